import Foundation
import Logging

/// How the host is set up: the profile, the watchdog's scale, and what to do with a plugin that
/// fails to load.
public struct HostConfiguration: Sendable {
    /// What to do when a plugin fails to load (SPEC 7).
    public enum LoadFailurePolicy: Sendable {
        /// Stop everything: simulate and check (exit 65).
        case abort
        /// Skip that plugin and log why: run.
        case skip
    }

    public var profile: Profile
    /// Real handler time is multiplied by this before it is compared with a limit (W5).
    public var watchdogScale: Double
    public var loadFailurePolicy: LoadFailurePolicy
    /// The wall-clock time (seconds since 1970) of the host's start, from which os.time counts;
    /// nil: the real time when the host is made. `Simulation` fixes it, for determinism.
    public var epochAtStart: Double?
    public var logger: Logger
    /// Makes the logger of each plugin (its print and lifeline.log lines) from the plugin's name;
    /// by default, one labelled "plugin.NAME" from the process's logging system.
    public var pluginLogger: @Sendable (String) -> Logger = { Logger(label: "plugin.\($0)") }
    /// Real seconds that Lua code, once asked to stop, has to unwind before it is treated as
    /// unstoppable, like Swift code (it is stuck inside one C call).
    public var stopGrace: Double = 1
    /// Called on the watchdog's thread when code overruns and cannot be stopped (W3): Swift code,
    /// or Lua code still running a grace after it was asked to stop. The main executor is still
    /// inside that code. The CLI writes the report there and exits.
    public var onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)?
    /// Where plugins' HTTP requests go: the scripted network in simulate, a real client in run.
    public var transport: any HTTPTransport = NoNetworkTransport()
    /// The state dir's database, which holds the plugins' stores and the background transfers;
    /// nil: stores and transfers are unavailable, and every call says so.
    public var database: StateDatabase?
    /// Where background transfers go: the scripted network in simulate, a real client in run.
    public var transferTransport: any TransferTransport = NoTransferTransport()
    /// Background transfers that run at once; the rest wait in order.
    public var transferLimit = TransferManager.defaultLimit
    /// Seeds the retry jitter, for runs that must repeat exactly (simulate); nil: random.
    public var transferJitterSeed: UInt64?
    /// Whether every call into plugin code is noted with its real duration (`Recorder.handlerCalls`),
    /// for the pictures. Off by default: it costs two clock reads a call.
    public var recordsHandlerCalls = false

    public init(
        profile: Profile = .ios13, watchdogScale: Double = 1, loadFailurePolicy: LoadFailurePolicy = .abort,
        logger: Logger = Logger(label: "lifeline"),
        onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)? = nil
    ) {
        self.profile = profile
        self.watchdogScale = watchdogScale
        self.loadFailurePolicy = loadFailurePolicy
        self.logger = logger
        self.onUnpreemptibleOverrun = onUnpreemptibleOverrun
    }
}

/// Swift code that overran a watchdog limit and is still running (W3).
public enum UnpreemptibleOverrun: Sendable {
    /// A handler overran: the app is terminated, and the recorder holds the report to write.
    case terminated(Termination, Recorder)
    /// A plugin overran the launch limit while loading: a load failure (exit 65).
    case loadFailed(LifelineError)
}

/// The runtime that carries out the rules: it owns the lifecycle, the tasks, the plugins and the
/// bus, and runs everything on the main executor. The decisions themselves live in the pure types
/// `Lifecycle` and `TaskRegistry`; the host does what they return.
///
/// Threading: main executor only, except where a member says otherwise.
public final class LifelineHost {
    public let executor: MainExecutor
    public let recorder: Recorder
    public let profile: Profile
    /// Seconds since 1970 at the host's start (see `HostConfiguration.epochAtStart`).
    public let epochAtStart: Double
    /// The host's own log.
    public let logger: Logger
    let pluginLogger: @Sendable (String) -> Logger
    private let configuration: HostConfiguration
    private let descriptors: [PluginDescriptor]
    private let watchdog: Watchdog

    private var lifecycle = Lifecycle()
    private var tasks: TaskRegistry
    /// The state handlers see; it follows the notification being sent.
    public private(set) var visibleState: AppState = .notRunning
    /// Counts launches; app jobs and contexts of an older launch are stale.
    private var generation = 0
    private var appRunning = false
    private var plugins: [LoadedPlugin] = []
    /// Subscriptions by event ordinal, each list in the order the subscriptions were made.
    private var subscriptions = [[Subscription]](repeating: [], count: LifecycleEventName.allCases.count)
    private var subscriptionsByID: [Int: Subscription] = [:]
    private var nextSubscriptionID = 1
    private var expirationHandlers: [Int: (plugin: Int, callback: PluginCallback)] = [:]
    private var timers: [Int: (plugin: Int, job: MainExecutor.JobID)] = [:]
    private var nextTimerID = 1
    private var budgetJobs: [MainExecutor.JobID] = []
    /// How many calls into plugin code are on the stack (0 or 1: plugin code never calls plugin code).
    private var callDepth = 0
    /// A termination decided while plugin code was running (T8); carried out when it returns.
    private var pendingTermination: Termination?
    /// Why a plugin could not be loaded, under the `.abort` policy.
    public private(set) var loadError: LifelineError?
    /// How late past its deadline the last overrunning call returned, in milliseconds (real time).
    public private(set) var lastOverrunLateness: Double?
    /// Plugins' HTTP requests.
    private var network: NetworkSession!
    /// What plugins wait on (sleeps, requests), by id: each is finished exactly once, by its
    /// result, by `cancelWait`, or by the app's end.
    private var waits: [Int: Wait] = [:]
    private var nextWaitID = 1
    /// Swift plugins' async slices waiting to run (see `HostTaskExecutor`).
    let swiftSlices = HostTaskExecutor.Queue()
    /// Swift slices that became ready while the app was suspended, in the order they did.
    private var heldSwiftSlices: [(PluginContext, () -> Void)] = []
    /// Operation queues of this launch, by name.
    private var queues: [String: HostQueue] = [:]
    /// Operation ids are unique for the host's life.
    private var nextOperationID = 1
    /// The plugins' stores, by plugin name: they outlive every launch of the app.
    private var stores: [String: PluginStore] = [:]
    /// Background transfers and their undelivered events: the host's, not the app's.
    private var transfers: TransferManager?
    private var transferLedger: TransferLedger?
    /// When each unfinished transfer's progress was last recorded, in seconds.
    private var progressRecorded: [String: Double] = [:]
    /// Set while transfer events are being delivered, so a delivery never nests.
    private var deliveringTransferEvents = false
    /// Set when an event arrived while the app was suspended: if the app then ends without
    /// running again, the host relaunches it to deliver them.
    private var transferEventsHeld = false

    private struct Wait {
        var plugin: Int
        /// Stops the work; the completion is not called.
        var cancel: (HTTPFailure.Kind?) -> Void
        /// Stops the work and calls the completion with a cancellation (the app ended).
        var abandon: () -> Void
    }

    private struct LoadedPlugin {
        var instance: any PluginInstance
        var context: PluginContext
        var network: NetworkPermissions
        /// Who the watchdog guards while this plugin's code runs.
        var watchdogSubject: WatchdogSubject
    }

    private final class Subscription {
        let id: Int
        let event: LifecycleEventName
        let plugin: Int
        let handler: EventHandler
        var cancelled = false
        init(id: Int, event: LifecycleEventName, plugin: Int, handler: @escaping EventHandler) {
            self.id = id
            self.event = event
            self.plugin = plugin
            self.handler = handler
        }
    }

    /// A watchdog window: one event's handlers across all plugins share one deadline (W1).
    private struct Window {
        var deadline: UInt64
        var limit: Double
        var handler: String
    }

    public init(
        configuration: HostConfiguration, plugins: [PluginDescriptor], executor: MainExecutor,
        recorder: Recorder? = nil
    ) {
        self.configuration = configuration
        self.profile = configuration.profile
        self.epochAtStart = configuration.epochAtStart ?? Date().timeIntervalSince1970
        self.logger = HostLogHandler.wrap(configuration.logger, now: { executor.now })
        self.pluginLogger = configuration.pluginLogger
        self.descriptors = plugins.sorted { $0.name < $1.name }
        self.executor = executor
        let recorder = recorder ?? Recorder(profile: configuration.profile)
        self.recorder = recorder
        self.tasks = TaskRegistry(taskLimit: configuration.profile.taskLimit)
        let fatal = configuration.onUnpreemptibleOverrun
        self.watchdog = Watchdog(stopGrace: configuration.stopGrace) { target in
            if target.handler == LifelineHost.loadHandler {
                // Loading is not yet the app's life: a load failure, as for Lua (SPEC 7).
                fatal?(.loadFailed(.badInput(LifelineHost.loadUnstoppableMessage(target))))
                return
            }
            let termination = LifelineHost.watchdogTermination(target, traceback: nil)
            recorder.record(LifelineHost.watchdogEvent(target))
            recorder.record(LifelineHost.terminatedEvent(termination))
            recorder.noteTermination(termination)
            fatal?(.terminated(termination, recorder))
        }
        network = NetworkSession(transport: configuration.transport, executor: executor) {
            [unowned self] event, fields in record(event, fields)
        }
        executor.appJobsAllowed = { [unowned self] generation in
            guard generation == self.generation, self.appRunning else { return .drop }
            return self.visibleState == .suspended ? .hold : .run
        }
        if let database = configuration.database { startTransfers(database) }
    }

    /// Stops the watchdog and closes the plugins. Call once, when done with the host.
    public func shutdown() {
        if appRunning { endApp() }
        transfers?.shutdown()
        watchdog.shutdown()
    }

    // MARK: - Reading the state

    /// The time now, on the host's clock.
    public var now: HostTime { executor.now }
    /// The app's state, as the lifecycle state machine has it.
    public var state: AppState { lifecycle.state }
    /// Whether the host has stopped for good: the app was terminated by a rule, or could not load.
    public var isStopped: Bool { recorder.isTerminated || loadError != nil }
    /// The active tasks, in the order they began.
    public var activeTasks: [TaskRegistry.Task] { tasks.active }
    /// How many background tasks are active, without listing them.
    public var activeTaskCount: Int { tasks.activeCount }

    var backgroundTimeRemaining: Double { tasks.remaining(at: now) ?? .greatestFiniteMagnitude }

    func isCurrent(_ context: PluginContext) -> Bool {
        appRunning && context.generation == generation && !context.isUnloaded
    }

    // MARK: - Steps

    /// Carries out one step of the lifecycle now (a scenario line, or a signal in `run`).
    public func perform(_ step: Step) throws(Lifecycle.TransitionError) {
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
            if case .startApp = action {} else if !appRunning || isStopped { return }
            switch action {
            case .startApp(let inBackground): startApp(inBackground: inBackground)
            case .startBudget: startBudget()
            case .stopBudget: stopBudget()
            case .notify(let name, let state): dispatch(name, state: state)
            case .endApp: endApp()
            case .cancelTransfers: transfers?.cancelAll(reason: LifelineHost.forceQuitReason)
            }
        }
        if appRunning { visibleState = lifecycle.state }
        if step == .launch || step == .launchInBackground || step == .foreground { deliverTransferEvents() }
        if (step == .kill || step == .terminate) && transferEventsHeld {
            transferEventsHeld = false
            transferEventQueued(relaunch: true)
        }
        if step == .forceQuit { transferEventsHeld = false }
    }

    /// Steps with no notification of their own still leave a trace in the report, so a reader
    /// sees why the app ended or what it was told.
    private func recordStep(_ step: Step, suspended: Bool) {
        switch step {
        case .memoryWarning: suspended ? record("memoryWarning", ("dropped", .bool(true))) : record("memoryWarning")
        case .kill: record("killed")
        case .forceQuit: record("forceQuit")
        case .terminate where suspended: record("endedWhileSuspended")
        default: break
        }
    }

    /// The reason a force-quit gives the transfers it cancels, as iOS does.
    public static let forceQuitReason = "userForceQuit"

    /// Runs after every job of the executor: the app is suspended once it is in the background with
    /// no task left and no handler running (T7).
    public func afterJob() {
        guard appRunning, callDepth == 0, visibleState == .background, lifecycle.state == .background,
            tasks.activeCount == 0, swiftSlices.isEmpty
        else { return }
        lifecycle.suspend()
        visibleState = .suspended
        cancelBudgetJobs()
        record("suspended")
    }

    // MARK: - Launch and end

    private func startApp(inBackground: Bool) {
        generation += 1
        appRunning = true
        visibleState = inBackground ? .background : .inactive
        if inBackground { startBudget() }
        for descriptor in descriptors {
            guard appRunning, !isStopped else { return }
            // Each plugin gets the launch limit to load, so one slow plugin fails alone.
            let window = openWindow(limit: profile.launchLimit, handler: LifelineHost.loadHandler)
            if let message = load(descriptor, in: window) {
                loadFailed(descriptor, message)
            } else {
                recorder.notePlugin(name: descriptor.name, kind: descriptor.kind.rawValue, status: "loaded")
            }
        }
    }

    /// Loads one plugin into this launch. Returns why it failed, or nil.
    private func load(_ descriptor: PluginDescriptor, in window: Window) -> String? {
        let instance: any PluginInstance
        do {
            instance = try descriptor.make()
        } catch {
            return error.message
        }
        let context = PluginContext(
            host: self, pluginName: descriptor.name, index: plugins.count, generation: generation)
        plugins.append(LoadedPlugin(
                instance: instance, context: context, network: descriptor.network,
                watchdogSubject: WatchdogSubject(plugin: context.pluginName, preemptor: instance.preemptor)))
        let index = plugins.count - 1
        let (outcome, fired) = callUnchecked(index, in: window) { instance.start(context) }
        switch settle(outcome, fired: fired) {
        case .ok, .terminated:
            return nil
        case .raised(let message, let traceback):
            unload(index)
            return traceback.isEmpty ? message : message + "\n" + traceback
        case .overran:
            unload(index)
            return LifelineHost.loadOverrunMessage(descriptor.name, limit: window.limit)
        }
    }

    /// The watchdog's name for loading a plugin.
    static let loadHandler = "load"

    static func loadOverrunMessage(_ plugin: String, limit: Double) -> String {
        "plugin '\(plugin)' did not finish loading within the launch limit (\(ReportNumber.seconds(limit)) s)"
    }

    /// Why a plugin whose loading overran and could not be stopped failed (`lifeline check` prints it).
    static func loadUnstoppableMessage(_ target: WatchdogTarget) -> String {
        loadOverrunMessage(target.plugin, limit: target.limit) + " and could not be stopped ("
            + (target.preemptor == nil
                ? "Swift code cannot be preempted" : "stuck inside one C call, where the watchdog's stop cannot reach")
            + ")"
    }

    /// `lifeline check`: loads every plugin, each on a host of its own under the launch limit,
    /// runs nothing else, and says which failed and why (nil: loaded). No app is launched.
    public static func check(
        configuration: HostConfiguration, plugins: [PluginDescriptor]
    ) -> [(plugin: PluginDescriptor, failure: String?)] {
        var configuration = configuration
        configuration.loadFailurePolicy = .skip
        if configuration.database == nil {
            // A plugin may use its store while it loads; check keeps nothing it writes.
            if let result = try? StateDatabase.withTemporary({ database throws(LifelineError) in
                configuration.database = database
                return check(configuration: configuration, plugins: plugins)
            }) {
                return result
            }
        }
        return plugins.sorted { $0.name < $1.name }.map { descriptor in
            // A host per plugin, so nothing one plugin does (T8 while loading, say) reaches the next.
            let host = LifelineHost(
                configuration: configuration, plugins: [descriptor], executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            return (descriptor, host.loadForCheck(descriptor))
        }
    }

    private func loadForCheck(_ descriptor: PluginDescriptor) -> String? {
        generation += 1
        appRunning = true
        visibleState = .inactive
        let failure = load(descriptor, in: openWindow(limit: profile.launchLimit, handler: LifelineHost.loadHandler))
        if appRunning { endApp() }
        return failure ?? recorder.termination?.reason
    }

    private func loadFailed(_ descriptor: PluginDescriptor, _ message: String) {
        switch configuration.loadFailurePolicy {
        case .abort:
            loadError = loadError ?? .badInput(message)
        case .skip:
            logger.error("plugin '\(descriptor.name)' skipped: \(message)")
            recorder.notePluginError()  // the run goes on, but its exit code says a plugin failed
            recorder.notePlugin(name: descriptor.name, kind: descriptor.kind.rawValue, status: "failed")
        }
    }

    /// Takes a plugin that failed to load out of this launch: its subscriptions, timers and
    /// expiration handlers go with it, and so do its tasks, so none is left dangling.
    private func unload(_ index: Int) {
        plugins[index].context.isUnloaded = true
        for (id, timer) in timers where timer.plugin == index {
            executor.cancel(timer.job)
            timers[id] = nil
        }
        for list in subscriptions { for s in list where s.plugin == index { s.cancelled = true } }
        subscriptions = subscriptions.map { $0.filter { !$0.cancelled } }
        subscriptionsByID = subscriptionsByID.filter { !$0.value.cancelled }
        let name = plugins[index].context.pluginName
        for task in tasks.active where task.plugin == name {
            _ = tasks.end(id: task.id)
            expirationHandlers[task.id] = nil
        }
        plugins[index].instance.close()
        plugins[index].context.cancelSwiftTasks()
        abandonWaits { $0.plugin == index }
        // Keep the slot so indexes stay valid; a closed instance is never called again.
    }

    private func endApp() {
        appRunning = false
        lifecycle.end()
        visibleState = .ended
        cancelBudgetJobs()
        tasks.reset()
        expirationHandlers.removeAll()
        for (_, timer) in timers { executor.cancel(timer.job) }
        timers.removeAll()
        subscriptions = subscriptions.map { _ in [] }
        subscriptionsByID.removeAll()
        // Queues first, while the plugins that own their operations are still open.
        for name in queues.keys.sorted() { queues[name]?.abandon() }
        queues.removeAll()
        for p in plugins {
            p.instance.close()
            p.context.cancelSwiftTasks()
        }
        plugins.removeAll()
        // Their tasks are cancelled now: each held slice runs once, outside the app, to see it.
        releaseHeldSwiftSlices()
        // After the plugins closed: a Lua completion then finds its state gone and does nothing,
        // while a Swift continuation is resumed with a cancellation, so no task is left hanging.
        abandonWaits { _ in true }
    }

    private func abandonWaits(where belongs: (Wait) -> Bool) {
        for id in waits.keys.sorted() {
            guard let wait = waits[id], belongs(wait) else { continue }
            waits[id] = nil
            wait.abandon()
        }
    }

    private func terminate(_ termination: Termination) {
        guard recorder.termination == nil else { return }
        recorder.record(LifelineHost.terminatedEvent(termination))
        recorder.noteTermination(termination)
        logger.error("app terminated (\(termination.kind.rawValue), \(termination.kind.code)): \(termination.reason)")
        if appRunning { endApp() }
    }

    // MARK: - Notifications

    private func dispatch(_ name: LifecycleEventName, state: AppState) {
        visibleState = state
        record(name.rawValue)
        let list = subscriptions[name.ordinal]
        guard !list.isEmpty else { return }
        let event = LifecycleEvent(name: name, time: now.seconds, state: state)
        let window = openWindow(limit: profile.limit(for: name), handler: name.rawValue)
        for subscription in list {
            guard appRunning else { return }
            if subscription.cancelled { continue }
            call(subscription.plugin, in: window) { subscription.handler(event) }
        }
    }

    func subscribe(_ context: PluginContext, event: LifecycleEventName, handler: @escaping EventHandler) -> Int {
        let id = nextSubscriptionID
        nextSubscriptionID += 1
        let s = Subscription(id: id, event: event, plugin: context.index, handler: handler)
        subscriptions[event.ordinal].append(s)
        subscriptionsByID[id] = s
        return id
    }

    func unsubscribe(_ id: Int) {
        guard let s = subscriptionsByID.removeValue(forKey: id) else { return }
        s.cancelled = true
        subscriptions[s.event.ordinal].removeAll { $0 === s }
    }

    // MARK: - Calling plugin code under the watchdog

    private func openWindow(limit: Double, handler: String) -> Window {
        let scaled = limit / max(configuration.watchdogScale, 1e-9) * 1e9
        let span = scaled >= Double(UInt64.max / 2) ? UInt64.max / 2 : UInt64(scaled)
        return Window(deadline: Monotonic.nanoseconds() &+ span, limit: limit, handler: handler)
    }

    /// Calls plugin code under the watchdog and carries out what happened: a plugin error is
    /// recorded, an overrun or a stop terminates the app.
    private func call(_ index: Int, in window: Window, _ body: () -> CallOutcome) {
        let plugin = plugins[index].context.pluginName
        let (outcome, fired) = callUnchecked(index, in: window, body)
        switch settle(outcome, fired: fired) {
        case .ok, .terminated:
            return
        case .raised(let message, let traceback):
            recorder.notePluginError()
            if plugins.indices.contains(index) {
                plugins[index].instance.chargeRecorded(
                    TimelineEvent.recordedBytes + message.utf8.count + traceback.utf8.count)
            }
            record(
                "pluginError", ("plugin", .string(plugin)), ("message", .string(message)),
                ("traceback", .string(traceback)))
            logger.error("plugin '\(plugin)' raised an error in \(window.handler): \(message)")
        case .overran(let traceback):
            // Real time, so it stays out of the report; `lifeline run` and benchmarks read it here.
            let late = Double(Monotonic.nanoseconds() &- window.deadline) / 1e6
            lastOverrunLateness = late
            logger.info("watchdog: plugin '\(plugin)' stopped \(late) ms past its deadline")
            watchdogFired(plugin: plugin, window: window, traceback: traceback)
        }
    }

    /// What a call into plugin code came to, once the host's own decisions are applied.
    private enum Settled {
        case ok
        case raised(message: String, traceback: String)
        /// Past the window's deadline, or stopped inside the VM (with where).
        case overran(traceback: String?)
        /// The app was terminated meanwhile: by a rule the call broke (T8), or by the watchdog's
        /// thread while Swift code overran (W3).
        case terminated
    }

    /// - Parameter fired: whether the watchdog acted during the call: its deadline passed. Overruns
    ///   are the watchdog's to detect, so a call costs no clock read of its own.
    private func settle(_ outcome: CallOutcome, fired: Bool) -> Settled {
        if recorder.isTerminated {
            if appRunning { endApp() }
            return .terminated
        }
        if var pending = pendingTermination {
            pendingTermination = nil
            if case .preempted(let traceback) = outcome { pending.traceback = traceback }
            terminate(pending)
            return .terminated
        }
        let overran = fired
        switch outcome {
        case .returned where !overran: return .ok
        case .raised(let message, let traceback) where !overran: return .raised(message: message, traceback: traceback)
        case .returned, .raised: return .overran(traceback: nil)
        case .preempted(let traceback): return .overran(traceback: traceback)
        }
    }

    /// Calls plugin code under the watchdog. Returns what the code did, and whether the watchdog
    /// acted meanwhile.
    private func callUnchecked(
        _ index: Int, in window: Window, _ body: () -> CallOutcome
    ) -> (CallOutcome, fired: Bool) {
        // Only what the call needs: the body may end the app, which drops `plugins`.
        let instance = plugins[index].instance
        let target = WatchdogTarget(
            subject: plugins[index].watchdogSubject, handler: window.handler, limit: window.limit, time: now)
        watchdog.arm(deadline: window.deadline, target: target)
        let started = configuration.recordsHandlerCalls ? Monotonic.nanoseconds() : 0
        let startedAt = now
        callDepth += 1
        let outcome = body()
        callDepth -= 1
        let fired = watchdog.disarm()
        instance.resetPreemption()
        if configuration.recordsHandlerCalls {
            recorder.recordCall(
                HandlerCall(
                    time: startedAt, plugin: target.plugin, handler: window.handler,
                    milliseconds: Double(Monotonic.nanoseconds() &- started) / 1e6))
        }
        return (outcome, fired)
    }

    private func watchdogFired(plugin: String, window: Window, traceback: String?) {
        let target = WatchdogTarget(
            plugin: plugin, handler: window.handler, limit: window.limit, preemptor: nil, time: now)
        recorder.record(LifelineHost.watchdogEvent(target))
        terminate(LifelineHost.watchdogTermination(target, traceback: traceback))
    }

    static func watchdogEvent(_ target: WatchdogTarget) -> TimelineEvent {
        TimelineEvent(
            time: target.time, event: "watchdog",
            fields: [
                ("plugin", .string(target.plugin)), ("handler", .string(target.handler)),
                ("limit", .number(ReportNumber.seconds(target.limit))),
            ])
    }

    static func watchdogTermination(_ target: WatchdogTarget, traceback: String?) -> Termination {
        Termination(
            kind: .watchdog,
            reason: "plugin '\(target.plugin)' was still running its \(target.handler) handler "
                + "when the \(ReportNumber.seconds(target.limit)) s watchdog limit passed",
            plugin: target.plugin, time: target.time, traceback: traceback)
    }

    static func terminatedEvent(_ t: Termination) -> TimelineEvent {
        TimelineEvent(
            time: t.time, event: "terminated",
            fields: [("kind", .string(t.kind.rawValue)), ("code", .string(t.kind.code))])
    }

    // MARK: - Background tasks (SPEC 4)

    func beginBackgroundTask(_ context: PluginContext, name: String?, expirationHandler: PluginCallback?) -> Int {
        switch tasks.begin(plugin: context.pluginName, name: name) {
        case .limitExceeded(let limit):
            if pendingTermination == nil {
                pendingTermination = Termination(
                    kind: .taskLimit,
                    reason: "plugin '\(context.pluginName)' began more than \(limit) background tasks at once",
                    plugin: context.pluginName, time: now, traceback: nil)
            }
            // Stop the caller at once; the termination is carried out when its call returns.
            plugins[context.index].instance.preemptor?.preempt()
            return 0
        case .began(let id, let expireNow):
            recorder.record(.task(time: now, event: "taskBegan", plugin: context.pluginName, task: id, name: name))
            if let expirationHandler { expirationHandlers[id] = (context.index, expirationHandler) }
            if expireNow {
                // T3: never from inside beginBackgroundTask, so the caller already holds the id.
                executor.schedule(at: now, owner: .app(generation: generation)) { [unowned self] in
                    if let task = tasks.expireLate(id: id) { signalExpiration(task) }
                }
            }
            return id
        }
    }

    func endBackgroundTask(_ context: PluginContext, id: Int) -> Bool {
        if endTask(id) { return true }
        let warning = "Can't end BackgroundTask: no background task exists with identifier \(id), "
            + "or it may have already been ended."
        logger.warning("\(warning)", metadata: ["plugin": "\(context.pluginName)"])
        recorder.record(.task(time: now, event: "endUnknownTask", plugin: context.pluginName, task: id))
        return false
    }

    /// Ends an active task and records it; false if it is not active.
    private func endTask(_ id: Int) -> Bool {
        guard case .ended(let task, let expired) = tasks.end(id: id) else { return false }
        if !expirationHandlers.isEmpty { expirationHandlers[id] = nil }
        recorder.record(
            .task(time: now, event: "taskEnded", plugin: task.plugin, task: id, name: task.name, expired: expired))
        return true
    }

    private func startBudget() {
        let period = tasks.enterBackground(at: now, budget: profile.budget, expirationLead: profile.expirationLead)
        cancelBudgetJobs()
        budgetJobs = [
            executor.schedule(at: period.expiresAt) { [unowned self] in expirationMoment() },
            executor.schedule(at: period.endsAt) { [unowned self] in budgetRanOut() },
        ]
    }

    private func stopBudget() {
        cancelBudgetJobs()
        tasks.leaveBackground()
        executor.releaseHeld()
        releaseHeldSwiftSlices()
        for name in queues.keys.sorted() { queues[name]?.appLeftBackground() }
    }

    private func cancelBudgetJobs() {
        for job in budgetJobs { executor.cancel(job) }
        budgetJobs.removeAll()
    }

    /// T3, T4: the expiration moment.
    private func expirationMoment() {
        guard appRunning else { return }
        for task in tasks.expire() {
            guard appRunning else { return }
            guard tasks.isActive(task.id) else { continue }
            signalExpiration(task)
        }
        if appRunning, tasks.anyExpiring { warnOfTasksLeftAfterExpiration(turnsLeft: 32) }
    }

    /// iOS's warning, only for a task that really outlives its handlers. A queue or
    /// `lifeline.background` ends its task on a later turn, once the work the expiration stopped has
    /// unwound; so the check waits until no job is left at this moment (a few turns at most).
    private func warnOfTasksLeftAfterExpiration(turnsLeft: Int) {
        scheduleAppJob { [unowned self] in
            if turnsLeft > 0, executor.hasJobDueNow { return warnOfTasksLeftAfterExpiration(turnsLeft: turnsLeft - 1) }
            for task in tasks.active where task.expiring {
                let label = "plugin '\(task.plugin)' task \(task.id)" + (task.name.map { " '\($0)'" } ?? "")
                logger.warning("Background task still not ended after expiration handlers were called: \(label)")
            }
        }
    }

    private func signalExpiration(_ task: TaskRegistry.Task) {
        recorder.record(.task(time: now, event: "taskExpiring", plugin: task.plugin, task: task.id, name: task.name))
        guard let handler = expirationHandlers[task.id] else { return }
        let window = openWindow(limit: profile.expirationHandlerLimit, handler: "expiration handler")
        call(handler.plugin, in: window, handler.callback)
    }

    /// T5: the budget is gone.
    private func budgetRanOut() {
        guard appRunning, tasks.activeCount > 0 else { return }
        let left = tasks.active
        let names = left.map { t in
            "plugin '\(t.plugin)' task \(t.id)" + (t.name.map { " '\($0)'" } ?? "")
        }.joined(separator: ", ")
        terminate(
            Termination(
                kind: .backgroundTaskTimeout,
                reason: "background time ran out with \(left.count) task\(left.count == 1 ? "" : "s") "
                    + "still running: \(names)",
                plugin: left[0].plugin, time: now, traceback: nil))
    }

    // MARK: - Timers

    func startTimer(_ context: PluginContext, after seconds: Double, callback: @escaping PluginCallback) -> Int {
        let id = nextTimerID
        nextTimerID += 1
        let index = context.index
        // The clock's resolution: a timer fires 1 ms later at the soonest, so a loop of zero-delay
        // timers still moves virtual time on, and `--until` can end it.
        let delay = max(LifelineHost.timerResolution, seconds.isNaN ? 0 : seconds)
        let job = executor.schedule(at: now.adding(seconds: delay), owner: .app(generation: generation)) {
            [unowned self] in
            timers[id] = nil
            call(index, in: openWindow(limit: profile.transitionLimit, handler: "timer"), callback)
        }
        timers[id] = (index, job)
        return id
    }

    /// The soonest a timer fires: 1 ms.
    public static let timerResolution = 0.001

    func cancelTimer(_ id: Int) {
        if let timer = timers.removeValue(forKey: id) { executor.cancel(timer.job) }
    }

    // MARK: - Waits

    /// Calls `completion(true)` after `seconds` on the host's clock (as an app job: held while the
    /// app is suspended), or `completion(false)` if the app ends first.
    func sleep(_ context: PluginContext, seconds: Double, completion: @escaping (Bool) -> Void) -> Int {
        let id = nextWaitID
        nextWaitID += 1
        let delay = max(LifelineHost.timerResolution, seconds.isNaN ? 0 : seconds)
        let job = executor.schedule(at: now.adding(seconds: delay), owner: .app(generation: generation)) {
            [unowned self] in
            guard waits.removeValue(forKey: id) != nil else { return }
            completion(true)
        }
        waits[id] = Wait(
            plugin: context.index, cancel: { [unowned self] _ in executor.cancel(job) },
            abandon: { [unowned self] in
                executor.cancel(job)
                completion(false)
            })
        return id
    }

    /// Starts an HTTP request for a plugin, under its network permissions.
    func http(
        _ context: PluginContext, _ request: HTTPRequest,
        completion: @escaping (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> Int {
        let id = nextWaitID
        nextWaitID += 1
        let permissions = plugins[context.index].network
        let exchange = network.start(plugin: context.pluginName, permissions: permissions, request: request) {
            [unowned self] result in
            guard waits.removeValue(forKey: id) != nil else { return }
            completion(result)
        }
        waits[id] = Wait(
            plugin: context.index, cancel: { [unowned self] kind in network.cancel(exchange, recording: kind) },
            abandon: { [unowned self] in
                network.cancel(exchange)
                completion(.failure(HTTPFailure(.cancelled, "the app ended")))
            })
        return id
    }

    /// Stops a wait; its completion is not called. `kind` is what the report records for a request.
    func cancelWait(_ id: Int, recording kind: HTTPFailure.Kind?) {
        waits.removeValue(forKey: id)?.cancel(kind)
    }

    /// Waits under way, for tests: none may be left once the work is done.
    public var pendingWaits: Int { waits.count }

    /// Runs plugin code on the next turn, under a watchdog window.
    func enqueue(
        _ context: PluginContext, handler: String, limit: WatchdogLimit, _ callback: @escaping PluginCallback
    ) {
        scheduleAppJob { [unowned self] in callNow(context, handler: handler, limit: limit, callback) }
    }

    /// Runs plugin code now, under a watchdog window of its own. Call it from a host job, never
    /// from inside plugin code (plugin code does not call plugin code).
    func callNow(_ context: PluginContext, handler: String, limit: WatchdogLimit, _ callback: PluginCallback) {
        guard isCurrent(context) else { return }
        let seconds = limit == .expirationHandler ? profile.expirationHandlerLimit : profile.transitionLimit
        call(context.index, in: openWindow(limit: seconds, handler: handler), callback)
    }

    /// Schedules a job of this launch of the app: held while it is suspended, dropped once it ended.
    @discardableResult
    func scheduleAppJob(at time: HostTime? = nil, _ body: @escaping () -> Void) -> MainExecutor.JobID {
        executor.schedule(at: time ?? now, owner: .app(generation: generation), body)
    }

    /// Whether the app is running and no rule has stopped it.
    var isRunning: Bool { appRunning && !isStopped }

    // MARK: - Stores

    /// The plugin's store, made on first use.
    func store(_ context: PluginContext) throws(StoreError) -> PluginStore {
        if let store = stores[context.pluginName] { return store }
        guard let database = configuration.database else {
            throw StoreError("the host was started without a state dir, so there is no store")
        }
        let quota = descriptors.first { $0.name == context.pluginName }?.storeQuota ?? PluginStore.defaultQuota
        let store = PluginStore(plugin: context.pluginName, quota: quota, database: database)
        stores[context.pluginName] = store
        return store
    }

    // MARK: - Background transfers

    private func startTransfers(_ database: StateDatabase) {
        let ledger = TransferLedger(database: database)
        transferLedger = ledger
        let manager = TransferManager(
            ledger: ledger, transport: configuration.transferTransport, executor: executor,
            filesRoot: database.directory + "/files", limit: configuration.transferLimit,
            jitterSeed: configuration.transferJitterSeed,
            callbacks: TransferManager.Callbacks(
                eventQueued: { [unowned self] _, relaunch in transferEventQueued(relaunch: relaunch) },
                progress: { [unowned self] plugin, id, received, total in
                    transferProgress(plugin: plugin, id: id, received: received, total: total)
                },
                record: { [unowned self] event, fields in record(event, fields) }))
        transfers = manager
        // A temporary database that was never opened holds nothing to resume.
        guard database.mayHoldData else { return }
        do {
            try manager.resumeUnfinished()
        } catch {
            logger.error("cannot resume the unfinished transfers: \(error.message)")
        }
    }

    /// The host's transfers, or why there are none.
    private func transferManager() throws(TransferError) -> TransferManager {
        guard let transfers else {
            throw TransferError("the host was started without a state dir, so there are no background transfers")
        }
        return transfers
    }

    func startTransfer(
        _ context: PluginContext, kind: TransferRecord.Kind, method: String, url: String, file: String,
        sha256: String?, tag: String?
    ) throws(TransferError) -> String {
        let manager = try transferManager()
        if let target = HTTPURL(url), !plugins[context.index].network.allows(host: target.host, port: target.port) {
            let hostPort = target.host.contains(":") ? "[\(target.host)]:\(target.port)" : "\(target.host):\(target.port)"
            throw TransferError(
                "plugin '\(context.pluginName)' may not reach \(hostPort): list it in the plugin's plugin.toml under "
                    + "[permissions] network, as in network = [\"\(hostPort)\"]")
        }
        return try manager.start(
            plugin: context.pluginName, kind: kind, method: method, url: url, file: file, sha256: sha256, tag: tag)
    }

    func listTransfers(_ context: PluginContext) throws(TransferError) -> [TransferRecord] {
        do {
            return try transferManager().list(plugin: context.pluginName)
        } catch let error as StoreError {
            throw TransferError(error.message)
        } catch let error as TransferError {
            throw error
        } catch {
            throw TransferError("\(error)")
        }
    }

    func cancelTransfer(_ context: PluginContext, id: String) throws(TransferError) -> Bool {
        try transferManager().cancel(plugin: context.pluginName, id: id)
    }

    /// A transfer ended and its event waits: delivered now if the app runs, held while it is
    /// suspended, and, when it is not running, the host launches it in the background to hear it.
    private func transferEventQueued(relaunch: Bool) {
        executor.schedule(at: now) { [unowned self] in
            if appRunning {
                if visibleState == .suspended { transferEventsHeld = true }
                deliverTransferEvents()
            } else if relaunch, !isStopped, lifecycle.state == .notRunning || lifecycle.state == .ended {
                record("relaunch", ("reason", .string("transferEvents")))
                try? perform(.launchInBackground)
            }
        }
    }

    /// Delivers the waiting transfer events to the plugins that handle them, in the order they
    /// happened, then `didFinishTransferEvents` to each plugin that got any. An event is removed
    /// once its handlers have returned (or raised); if the app ends meanwhile it stays, and is
    /// delivered at the next launch. Events of a plugin with no handler for them stay too.
    private func deliverTransferEvents() {
        guard let ledger = transferLedger, appRunning, !isStopped, visibleState != .suspended, callDepth == 0,
            !deliveringTransferEvents
        else { return }
        deliveringTransferEvents = true
        transferEventsHeld = false
        defer { deliveringTransferEvents = false }
        let names: [String]
        do {
            names = try ledger.pluginsWithPendingEvents()
        } catch {
            return logger.error("cannot read the transfer events: \(error.message)")
        }
        for name in names {
            guard let index = plugins.firstIndex(where: { $0.context.pluginName == name && !$0.context.isUnloaded })
            else { continue }
            var delivered = false
            for pending in (try? ledger.pendingEvents(plugin: name)) ?? [] {
                guard isRunning, let event = LifecycleEventName(rawValue: pending.name) else { return }
                let info = TransferEventInfo(id: pending.transferID, reason: pending.reason)
                guard dispatch(event, to: index, transfer: info) else { continue }
                guard isRunning else { return }
                do {
                    try ledger.acknowledge(pending.seq)
                } catch {
                    logger.error("cannot remove a delivered transfer event: \(error.message)")
                }
                delivered = true
            }
            if delivered { _ = dispatch(.didFinishTransferEvents, to: index, transfer: nil, recordAlways: true) }
        }
    }

    private func transferProgress(plugin: String, id: String, received: Int64, total: Int64?) {
        // The report samples progress: at most one event per transfer per virtual second, and the
        // last one, so a long download is a few lines, not hundreds.
        let last = progressRecorded[id]
        let complete = total.map { received >= $0 } ?? false
        if last == nil || now.seconds - last! >= 1 || complete {
            progressRecorded[id] = complete ? nil : now.seconds
            var fields: [(String, JSONValue)] = [
                ("plugin", .string(plugin)), ("transfer", .string(id)), ("received", .int(received)),
            ]
            if let total { fields.append(("total", .int(total))) }
            record("transferProgress", fields)
        }
        guard isRunning, visibleState != .suspended, callDepth == 0,
            let index = plugins.firstIndex(where: { $0.context.pluginName == plugin && !$0.context.isUnloaded })
        else { return }
        _ = dispatch(.transferProgress, to: index, transfer: TransferEventInfo(id: id, received: received, total: total))
    }

    /// Sends an event to one plugin's handlers; false if it has none. The event is recorded when
    /// it has handlers, or always with `recordAlways`; `transferProgress` is recorded by
    /// `transferProgress` itself, sampled.
    private func dispatch(
        _ name: LifecycleEventName, to index: Int, transfer: TransferEventInfo?, recordAlways: Bool = false
    ) -> Bool {
        let list = subscriptions[name.ordinal].filter { $0.plugin == index && !$0.cancelled }
        if list.isEmpty && !recordAlways { return false }
        if name != .transferProgress {
            var fields: [(String, JSONValue)] = [("plugin", .string(plugins[index].context.pluginName))]
            if let transfer {
                fields.append(("transfer", .string(transfer.id)))
                if let reason = transfer.reason { fields.append(("reason", .string(reason))) }
            }
            record(name.rawValue, fields)
        }
        guard !list.isEmpty else { return false }
        let event = LifecycleEvent(name: name, time: now.seconds, state: visibleState, transfer: transfer)
        let window = openWindow(limit: profile.limit(for: name), handler: name.rawValue)
        for subscription in list {
            guard appRunning else { break }
            if subscription.cancelled { continue }
            call(subscription.plugin, in: window) { subscription.handler(event) }
        }
        return true
    }

    // MARK: - Operation queues

    /// Why a queue cannot be had.
    public struct QueueError: Error, Equatable, Sendable {
        public let message: String
    }

    /// The queue called `name`, made on first use. `maxConcurrent`, when given, must agree with
    /// the queue's if it exists.
    func queue(named name: String, maxConcurrent: Int?) throws(QueueError) -> HostQueue {
        guard !name.isEmpty else { throw QueueError(message: "a queue's name must not be empty") }
        if let m = maxConcurrent, m < 1 { throw QueueError(message: "maxConcurrent must be an integer >= 1") }
        if let q = queues[name] {
            if let m = maxConcurrent, m != q.maxConcurrent {
                throw QueueError(
                    message: "queue '\(name)' already exists with maxConcurrent = \(q.maxConcurrent), not \(m)")
            }
            return q
        }
        let fallback = name == HostQueue.backgroundName ? HostQueue.backgroundMaxConcurrent : 1
        let q = HostQueue(name: name, maxConcurrent: maxConcurrent ?? fallback, host: self)
        queues[name] = q
        return q
    }

    func makeOperationID() -> Int {
        defer { nextOperationID += 1 }
        return nextOperationID
    }

    /// Ends a queue's background task.
    func endQueueTask(_ id: Int) { _ = endTask(id) }

    /// Records a timeline event.
    func recordEvent(_ event: String, _ fields: [(String, JSONValue)]) { record(event, fields) }

    /// Runs one slice of a Swift plugin's async code: under the watchdog while the plugin is part
    /// of the running app; as is once it is not (a cancelled task unwinding after the app ended).
    func runSwiftSlice(_ context: PluginContext, _ slice: @escaping () -> Void) {
        guard isCurrent(context) else { return slice() }
        // A suspended app runs no code: a slice that a completion (a response, a timer) makes
        // ready waits until the app runs again, or runs cancelled when the app ends.
        guard visibleState != .suspended else {
            heldSwiftSlices.append((context, slice))
            return
        }
        call(context.index, in: openWindow(limit: profile.transitionLimit, handler: "Swift task")) {
            slice()
            return .returned
        }
    }

    private func releaseHeldSwiftSlices() {
        let held = heldSwiftSlices
        heldSwiftSlices.removeAll()
        for (context, slice) in held {
            executor.schedule(at: now) { [unowned self] in runSwiftSlice(context, slice) }
        }
    }

    /// Records a plugin error that the plugin's code raised outside a call the host made (in a
    /// coroutine the host resumed, for instance).
    func reportError(_ context: PluginContext, message: String, traceback: String, handler: String) {
        recorder.notePluginError()
        if plugins.indices.contains(context.index) {
            plugins[context.index].instance.chargeRecorded(
                TimelineEvent.recordedBytes + message.utf8.count + traceback.utf8.count)
        }
        record(
            "pluginError", ("plugin", .string(context.pluginName)), ("message", .string(message)),
            ("traceback", .string(traceback)))
        logger.error("plugin '\(context.pluginName)' raised an error in \(handler): \(message)")
    }

    // MARK: - Recording

    /// A line a plugin wrote (print, lifeline.log, a Swift plugin's logger): a `log` event.
    func recordLog(plugin: String, level: Logger.Level, message: String) {
        record("log", ("plugin", .string(plugin)), ("level", .string(level.reportName)), ("message", .string(message)))
    }

    private func record(_ event: String, _ fields: (String, JSONValue)...) { record(event, fields) }

    private func record(_ event: String, _ fields: [(String, JSONValue)]) {
        recorder.record(TimelineEvent(time: now, event: event, fields: fields))
    }
}
