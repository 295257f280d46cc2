import Foundation
import Logging

/// The runtime that carries out the rules. It keeps the lifecycle, the launch (`AppSession`: the
/// visible state, the generation, the plugin roster), and the steps, loading and the app's end;
/// the rest is done by components it owns, each with one job (docs/architecture.md):
/// `GuardedCaller` calls plugin code under the watchdog, `SubscriptionTable` is the bus's table,
/// `TaskRuntime` runs tasks and the budget, `TimerTable` and `WaitTable` hold timers, sleeps and
/// requests, `StoreRegistry`, `QueueRegistry` and `TransferEvents` serve stores, queues and
/// transfers, and `SwiftSlices` runs Swift plugins' async code. The decisions themselves live in
/// the pure types `Lifecycle` and `TaskRegistry`; the host and its components do what they return.
///
/// Four orderings must stay in one place, and they live here:
/// - the teardown order when the app ends (`endApp`);
/// - the suspension check after each job (`afterJob`);
/// - a termination decided inside plugin code is carried out when that code returns
///   (`GuardedCaller.settle`, which requests it here);
/// - the generation gate: a job or context of an older launch does nothing (`AppSession`).
///
/// Components never hold the host: they ask it for what changes the whole app through
/// `AppSession.request`, and it carries out every request in one place (`handle`).
///
/// Threading: main executor only, except where a member says otherwise.
public final class LifelineHost: HostRequestHandler {
    public let executor: MainExecutor
    public let recorder: Recorder
    public let profile: Profile
    /// Seconds since 1970 at the host's start (see `HostConfiguration.epochAtStart`).
    public let epochAtStart: Double
    /// The host's own log.
    public let logger: Logger
    let configuration: HostConfiguration
    /// The plugins a launch loads, in name order; a reload replaces them.
    var descriptors: [PluginDescriptor]
    /// The plugins' generation: 1 from the start, one more at each reload that changed a plugin.
    public internal(set) var pluginGeneration = 1
    /// Each plugin's fingerprint as it was loaded, by name, when the host can be reloaded: what a
    /// reload compares the files with.
    var fingerprints: [String: String] = [:]
    /// The lifecycle's state machine, a pure value.
    var lifecycle = Lifecycle()
    /// This launch: what the components read.
    let session: AppSession
    /// What each plugin's context reaches.
    let parts: HostParts
    /// This launch's plugins' contexts, by slot: their Swift tasks are cancelled when the app ends.
    var contexts: [PluginContext] = []

    public init(
        configuration: HostConfiguration, plugins: [PluginDescriptor], executor: MainExecutor,
        recorder: Recorder? = nil
    ) {
        self.configuration = configuration
        self.profile = configuration.profile
        self.epochAtStart = configuration.epochAtStart ?? Date().timeIntervalSince1970
        self.logger = HostLogHandler.wrap(configuration.logger, now: { executor.now })
        self.descriptors = plugins.sorted { $0.name < $1.name }
        if configuration.reloadPlugins != nil {
            for d in descriptors { fingerprints[d.name] = d.fingerprint?() }
        }
        self.executor = executor
        let recorder = recorder ?? Recorder(profile: configuration.profile)
        self.recorder = recorder
        let session = AppSession(executor: executor, recorder: recorder, profile: profile, logger: logger)
        self.session = session
        let caller = GuardedCaller(session: session, configuration: configuration)
        let subscriptions = SubscriptionTable()
        let tasks = TaskRuntime(session: session, caller: caller)
        let system = SystemWork(
            session: session, subscriptions: subscriptions, caller: caller, policy: configuration.taskPolicy,
            database: configuration.database, epochAtStart: epochAtStart)
        parts = HostParts(
            session: session, caller: caller, subscriptions: subscriptions, tasks: tasks,
            timers: TimerTable(session: session, caller: caller),
            waits: WaitTable(session: session, transport: configuration.transport),
            stores: StoreRegistry(
                database: configuration.database,
                quotas: Dictionary(
                    descriptors.map { ($0.name, StoreRegistry.Quotas(store: $0.storeQuota, files: $0.filesQuota)) },
                    uniquingKeysWith: { first, _ in first })),
            queues: QueueRegistry(session: session, caller: caller, tasks: tasks),
            transfers: TransferEvents(session: session, subscriptions: subscriptions, caller: caller, system: system),
            slices: SwiftSlices(session: session, caller: caller),
            system: system,
            epochAtStart: epochAtStart, pluginLogger: configuration.pluginLogger, logLevel: logger.logLevel)
        session.handler = self
        // Weak: the session holds the executor, so a strong capture here would keep both, and
        // every event the recorder kept, alive after the host is gone.
        executor.appJobsAllowed = { [link = session.link] generation in
            guard let session = link.object, generation == session.generation, session.appRunning else { return .drop }
            return session.visibleState == .suspended ? .hold : .run
        }
        if let database = configuration.database {
            parts.transfers.start(
                database,
                settings: TransferEvents.Settings(
                    transport: configuration.transferTransport, limit: configuration.transferLimit,
                    jitterSeed: configuration.transferJitterSeed),
                epochAtStart: epochAtStart)
        }
    }

    // MARK: - Requests

    /// Carries out what a component asks of the whole app.
    func handle(_ request: HostRequest) {
        switch request {
        case .terminate(let termination, let target):
            terminate(termination, watchdog: target)
        case .endApp:
            if session.appRunning { endApp() }
        case .wake(let reason):
            if lifecycle.state == .suspended { resume(reason: reason) } else { relaunchInBackground(reason: reason) }
        case .relaunch(let reason):
            relaunchInBackground(reason: reason)
        }
    }

    /// Stops the watchdog and closes the plugins. Call once, when done with the host.
    public func shutdown() {
        if session.appRunning { endApp() }
        parts.transfers.shutdown()
        parts.caller.shutdown()
    }

    // MARK: - Reading the state

    /// The time now, on the host's clock.
    public var now: HostTime { executor.now }
    /// The app's state, as the lifecycle state machine has it.
    public var state: AppState { lifecycle.state }
    /// The state handlers see; it follows the notification being sent.
    public var visibleState: AppState { session.visibleState }
    /// Whether the host has stopped for good: the app was terminated by a rule, or could not load.
    public var isStopped: Bool { session.isStopped }
    /// Why a plugin could not be loaded, under the `.abort` policy.
    public var loadError: LifelineError? { session.loadError }
    /// The active tasks, in the order they began.
    public var activeTasks: [TaskRegistry.Task] { parts.tasks.active }
    /// How many background tasks are active, without listing them.
    public var activeTaskCount: Int { parts.tasks.activeCount }
    /// How late past its deadline the last overrunning call returned, in milliseconds (real time).
    public var lastOverrunLateness: Double? { parts.caller.lastOverrunLateness }
    /// T2: seconds of background time left now; `.greatestFiniteMagnitude` while the app is not
    /// in the background, as iOS's `backgroundTimeRemaining` says in the foreground. For observers
    /// outside the host (the metrics page), on the main executor (`LiveRun.onMainExecutor`).
    public var backgroundTimeRemaining: Double { parts.tasks.backgroundTimeRemaining }
    /// Each plugin the app holds open now, by name, with its code: a reload's old generation may
    /// still be there beside the new one, under the same name, until its tasks' time is up.
    public var pluginCodes: [(name: String, code: any PluginCode)] {
        session.plugins.filter { $0.standing != .unloaded }.map { ($0.ref.name, $0.code) }
    }
    /// Waits under way, for tests: none may be left once the work is done.
    package var pendingWaits: Int { parts.waits.count }

    // MARK: - Steps

    /// Carries out one step now (a scenario line, a signal or a `lifeline ctl` in `run`): a step of
    /// the lifecycle, or something the system does (`Step.isSystemEvent`), which `SystemWork`
    /// carries out.
    public func perform(_ step: Step) throws(Lifecycle.TransitionError) {
        if case .reload(let all) = step {
            reload(all: all)
            return
        }
        if step.isSystemEvent {
            // A profile without the API has no such event: the system never sends it.
            if let lack = profile.lacks(step) { return logger.warning("\(step) ignored: \(lack)") }
            return parts.system.perform(step)
        }
        var step = step
        if step == .launch || step == .launchInBackground, lifecycle.state == .background || lifecycle.state == .suspended {
            // The host relaunched the app in the background for its transfers' events; the user's
            // launch brings that app to the foreground, as on iOS.
            if step == .launchInBackground { return }
            step = .foreground
        }
        let wasSuspended = lifecycle.state == .suspended
        let actions = try lifecycle.apply(step)
        recordStep(step, suspended: wasSuspended)
        for action in actions {
            // Stop once the app ended, or a plugin failed to load (SPEC 7: nothing runs then).
            if case .startApp = action {} else if !session.appRunning || isStopped { return }
            switch action {
            case .startApp(let inBackground): startApp(inBackground: inBackground)
            case .startBudget: parts.tasks.startBudget()
            case .stopBudget: stopBudget()
            case .notify(let name, let state):
                dispatch(name, state: state)
                if name == .didFinishLaunching { session.finishLaunching() }
            case .endApp: endApp()
            case .cancelTransfers: parts.transfers.cancelAll()
            }
        }
        if session.appRunning { session.show(lifecycle.state) }
        parts.transfers.stepped(step)
        parts.system.stepped(step)
    }

    /// Launches the app in the background for the system (a transfer's events, a fetch, a push, a
    /// scheduled task), when it is not running; the report says why.
    private func relaunchInBackground(reason: String) {
        guard lifecycle.state == .notRunning || lifecycle.state == .ended else { return }
        session.record(.relaunch, ("reason", .string(reason)))
        try? perform(.launchInBackground)
    }

    /// Wakes the suspended app in the background for the system: the budget starts again, full,
    /// as at every entry into the background, and what the suspension held runs, transfer events
    /// included.
    func resume(reason: String) {
        guard lifecycle.state == .suspended, session.appRunning else { return }
        lifecycle.resume()
        session.show(.background)
        session.record(.resumed, ("reason", .string(reason)))
        parts.tasks.startBudget()
        executor.releaseHeld()
        parts.slices.releaseHeld()
        // Transfer events held while it slept are heard now, as on any return to running.
        parts.transfers.deliver()
    }

    /// Steps with no notification of their own still leave a trace in the report, so a reader
    /// sees why the app ended or what it was told.
    private func recordStep(_ step: Step, suspended: Bool) {
        switch step {
        case .memoryWarning:
            suspended ? session.record(.memoryWarning, ("dropped", .bool(true))) : session.record(.memoryWarning)
        case .kill: session.record(.killed)
        case .forceQuit: session.record(.forceQuit)
        case .terminate where suspended: session.record(.endedWhileSuspended)
        default: break
        }
    }

    /// Runs after every job of the executor: the app is suspended once it is in the background with
    /// no task left and no handler running (T7). A queued Swift slice counts as a running handler.
    public func afterJob() {
        guard session.appRunning, !parts.caller.isInsidePluginCode, session.visibleState == .background,
            lifecycle.state == .background, parts.tasks.activeCount == 0, parts.slices.pending.isEmpty,
            !parts.system.holdsAppAwake
        else { return }
        lifecycle.suspend()
        session.show(.suspended)
        parts.tasks.cancelBudget()
        session.record(.suspended)
    }

    /// The app left the background: the budget stops, and what the suspension held runs again.
    private func stopBudget() {
        parts.tasks.stopBudget()
        executor.releaseHeld()
        parts.slices.releaseHeld()
        parts.queues.appLeftBackground()
    }

    // MARK: - Launch and end

    private func startApp(inBackground: Bool) {
        session.beginLaunch(inBackground: inBackground)
        if inBackground { parts.tasks.startBudget() }
        for descriptor in descriptors {
            guard session.appRunning, !isStopped else { return }
            // Each plugin gets the launch limit to load, so one slow plugin fails alone.
            if let message = load(descriptor) {
                loadFailed(descriptor, message)
            } else {
                recorder.notePlugin(name: descriptor.name, kind: descriptor.kind.rawValue, status: "loaded")
            }
        }
    }

    /// Loads one plugin into this launch, under the launch limit. Returns why it failed, or nil.
    func load(_ descriptor: PluginDescriptor) -> String? {
        let caller = parts.caller
        // From now: the launch limit covers making the plugin as well as running its code.
        let window = caller.openWindow(limit: profile.launchLimit, handler: GuardedCaller.loadHandler, fromNow: true)
        let instance: any PluginInstance
        do {
            instance = try descriptor.make()
        } catch {
            return error.message
        }
        // A reload's retiring generation of this plugin may hold tasks: a failed load takes only its own.
        let older = parts.tasks.activeIDs(of: descriptor.name)
        let ref = session.nextRef(name: descriptor.name)
        let context = PluginContext(parts: parts, ref: ref)
        session.add(
            LoadedPlugin(
                ref: ref, code: instance, network: descriptor.network, taskIdentifiers: descriptor.taskIdentifiers,
                watchdogSlot: caller.register(WatchdogSubject(plugin: ref.name, preemptor: instance.preemptor))))
        contexts.append(context)
        let index = ref.slot
        let (outcome, fired) = caller.callUnchecked(index, in: window) { instance.start(context) }
        switch caller.settle(outcome, fired: fired) {
        case .ok, .terminated:
            return nil
        case .raised(let message, let traceback):
            unload(index, keepingTasks: older)
            return traceback.isEmpty ? message : message + "\n" + traceback
        case .overran:
            unload(index, keepingTasks: older)
            return GuardedCaller.loadOverrunMessage(descriptor.name, limit: window.limit)
        }
    }

    /// Loads one plugin as a launch would, runs nothing else, and ends (`lifeline check`).
    func loadForCheck(_ descriptor: PluginDescriptor) -> String? {
        session.beginLaunch(inBackground: false)
        let failure = load(descriptor)
        if session.appRunning { endApp() }
        return failure ?? recorder.termination?.reason
    }

    func loadFailed(_ descriptor: PluginDescriptor, _ message: String) {
        switch configuration.loadFailurePolicy {
        case .abort:
            session.failLoad(.badInput(message))
        case .skip:
            skip(descriptor, "skipped", message)
        }
    }

    /// The run goes on without a plugin that failed to load; its exit code says a plugin failed.
    func skip(_ descriptor: PluginDescriptor, _ how: String, _ message: String) {
        logger.error("plugin '\(descriptor.name)' \(how): \(message)")
        recorder.notePluginError()
        recorder.notePlugin(name: descriptor.name, kind: descriptor.kind.rawValue, status: "failed")
    }

    /// Takes a plugin that failed to load out of this launch: its subscriptions, timers and
    /// expiration handlers go with it, and so do its tasks, so none is left dangling; `older`
    /// are tasks of the plugin's retiring generation, which end with it.
    func unload(_ index: Int, keepingTasks older: [Int] = []) {
        let plugin = session.plugins[index]
        session.unload(plugin.ref)
        parts.timers.cancel(plugin: index)
        parts.subscriptions.remove(plugin: index)
        parts.tasks.remove(plugin: plugin.ref.name, keeping: older)
        parts.system.remove(plugin.ref)
        plugin.code.close()
        contexts[index].cancelSwiftTasks()
        parts.waits.abandon(plugin: index)
        // The slot stays, so indexes stay valid; a closed instance is never called again.
    }

    /// The app's end, in an order that matters: the budget, tasks, timers and subscriptions go
    /// first, so nothing new is started; then the queues, while the plugins that own their
    /// operations are still open; then the plugins close; then held Swift slices run once, outside
    /// the app, to see their cancellation; and last the waits are abandoned, after the plugins
    /// closed, so a Lua completion finds its state gone and does nothing, while a Swift
    /// continuation is resumed with a cancellation and no task is left hanging.
    private func endApp() {
        session.end()
        lifecycle.end()
        parts.tasks.reset()
        parts.timers.cancelAll()
        parts.subscriptions.removeAll()
        parts.queues.abandonAll()
        parts.system.appEnded()
        for (p, context) in zip(session.plugins, contexts) {
            p.code.close()
            context.cancelSwiftTasks()
        }
        session.removePlugins()
        contexts.removeAll()
        parts.caller.forgetPlugins()
        parts.slices.releaseHeld()
        parts.waits.abandon()
    }

    /// A rule terminated the app: the one place a termination is carried out on the main executor.
    private func terminate(_ termination: Termination, watchdog target: WatchdogTarget?) {
        guard session.recordTermination(termination, watchdog: target) else { return }
        logger.error("\(termination.headline)")
        if session.appRunning { endApp() }
    }

    // MARK: - Notifications

    /// Sends a lifecycle notification to every plugin's handlers, which share one watchdog window.
    private func dispatch(_ name: LifecycleEventName, state: AppState) {
        session.show(state)
        session.record(ReportEventName(name))
        let list = parts.subscriptions.subscriptions(to: name)
        guard !list.isEmpty else { return }
        parts.caller.deliver(LifecycleEvent(name: name, time: now.seconds, state: state), to: list)
    }
}
