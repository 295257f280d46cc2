import Logging

/// The app's launch as the host's components see it: which launch is current, whether it runs,
/// the state handlers see, and the plugins loaded into it (the roster). The coordinator changes it
/// through named transitions; the components read it, schedule the app's jobs, record, and ask
/// the coordinator for what changes the whole app (`request`), so none of them needs the host.
///
/// Threading: main executor only.
final class AppSession {
    /// Where the app is in its life, for the components: one value, so no two flags can disagree.
    enum Phase: Equatable {
        /// Never launched yet.
        case idle
        /// Launched, and didFinishLaunching's handlers have not all returned: task handlers can
        /// still be registered.
        case launching
        /// Launched and past its launch.
        case launched
        /// Ended (it may be launched again).
        case ended
    }

    let executor: MainExecutor
    let recorder: Recorder
    let profile: Profile
    /// The host's own log.
    let logger: Logger
    private(set) var phase = Phase.idle
    /// Counts launches; app jobs and refs of an older launch are stale.
    private(set) var generation = 0
    /// The state handlers see; it follows the notification being sent.
    private(set) var visibleState: AppState = .notRunning
    /// This launch's plugins, in load order. A plugin that failed to load keeps its slot, closed,
    /// so every slot stays valid until the app ends.
    ///
    /// Read on every call into plugin code. Every access is instantaneous: an element is read and
    /// its references used after the access ended, and the list is changed only by loading and the
    /// app's end, from host code. No access can overlap another, so the runtime's check on each
    /// one is skipped.
    @exclusivity(unchecked) private(set) var plugins: [LoadedPlugin] = []
    /// Why a plugin could not be loaded, under the `.abort` policy.
    private(set) var loadError: LifelineError?
    /// The device's conditions, which the system's steps change.
    let device = Device()
    /// Where terminations are written, from this thread or the watchdog's.
    let terminations: Terminations
    /// Carries out the components' requests: the coordinator.
    weak var handler: (any HostRequestHandler)?

    init(executor: MainExecutor, recorder: Recorder, profile: Profile, logger: Logger) {
        self.executor = executor
        self.recorder = recorder
        self.profile = profile
        self.logger = logger
        self.terminations = Terminations(recorder: recorder)
        link.set(self)
    }

    deinit { link.set(nil) }

    /// Whether this session is still there, for what may outlive it: the executor's gate for app
    /// jobs.
    let link = Link<AppSession>()

    var now: HostTime { executor.now }
    /// Between a launch and the app's end.
    var appRunning: Bool { phase == .launching || phase == .launched }
    /// The app was terminated by a rule, or a plugin could not load: nothing runs any more.
    var isStopped: Bool { recorder.isTerminated || loadError != nil }
    /// Whether the app is running and no rule has stopped it.
    var isRunning: Bool { appRunning && !isStopped }

    // MARK: - Transitions: the coordinator's, and only its

    /// A launch begins: a new generation, in the state the app is launched into.
    func beginLaunch(inBackground: Bool) {
        generation += 1
        phase = .launching
        visibleState = inBackground ? .background : .inactive
    }

    /// A reload loads new generations of some plugins into the running app: until their
    /// didFinishLaunching's handlers return, they may register scheduled tasks' handlers, as at a
    /// launch.
    func beginReloadLaunch() {
        if phase == .launched { phase = .launching }
    }

    /// didFinishLaunching's handlers have returned: scheduled tasks' handlers can no longer be
    /// registered.
    func finishLaunching() {
        if phase == .launching { phase = .launched }
    }

    /// The state handlers see from now on.
    func show(_ state: AppState) { visibleState = state }

    /// The app ended. Its plugins stay in the roster until the coordinator has closed them
    /// (`removePlugins`).
    func end() {
        phase = .ended
        visibleState = .ended
    }

    /// Forgets the ended launch's plugins, once they are closed.
    func removePlugins() { plugins.removeAll() }

    /// A plugin could not be loaded under the `.abort` policy: the first reason is kept.
    func failLoad(_ error: LifelineError) {
        loadError = loadError ?? error
    }

    // MARK: - The roster

    /// Adds a plugin to this launch; its ref names the slot it gets.
    func add(_ plugin: LoadedPlugin) { plugins.append(plugin) }

    /// The ref the next plugin added to this launch gets.
    func nextRef(name: String) -> PluginRef { PluginRef(slot: plugins.count, name: name, generation: generation) }

    /// Takes a plugin that failed to load out of this launch; its slot stays, so slots stay valid.
    func unload(_ ref: PluginRef) { plugins[ref.slot].standing = .unloaded }

    /// A reload ends `ref`'s generation: it hears no more events and starts no new work, while
    /// its tasks' expiration handlers run and it ends what it began. A new generation of the
    /// same name takes its place for every lookup by name.
    func retire(_ ref: PluginRef) {
        plugins[ref.slot].standing = .retiring
        plugins[ref.slot].code.beginUnloading()
    }

    /// Whether `ref`'s generation is being unloaded by a reload.
    func isRetiring(_ ref: PluginRef) -> Bool { plugins[ref.slot].standing == .retiring }

    /// Whether `ref` is current and may start new work: not being unloaded by a reload. One read
    /// of the roster, as `isCurrent`: it guards every task's begin.
    func mayStart(_ ref: PluginRef) -> Bool {
        appRunning && ref.generation == generation && plugins[ref.slot].standing == .loaded
    }

    /// Whether `ref` belongs to the running launch and its plugin is loaded.
    func isCurrent(_ ref: PluginRef) -> Bool {
        appRunning && ref.generation == generation && plugins[ref.slot].standing != .unloaded
    }

    /// The loaded plugin called `name`, if this launch has it.
    func plugin(named name: String) -> PluginRef? {
        plugins.first { $0.ref.name == name && $0.standing == .loaded }?.ref
    }

    /// The ref of the plugin in `slot`.
    func ref(_ slot: Int) -> PluginRef { plugins[slot].ref }

    /// The hosts `ref`'s plugin may reach.
    func permissions(of ref: PluginRef) -> NetworkPermissions { plugins[ref.slot].network }

    /// The task identifiers `ref`'s plugin may register and submit.
    func taskIdentifiers(of ref: PluginRef) -> [String] { plugins[ref.slot].taskIdentifiers }

    // MARK: - Jobs, records and requests

    /// Schedules a job of this launch of the app: held while it is suspended, dropped once it ended.
    @discardableResult
    func scheduleAppJob(at time: HostTime? = nil, _ body: @escaping () -> Void) -> MainExecutor.JobID {
        executor.schedule(at: time ?? now, owner: .app(generation: generation), body)
    }

    func scheduleAppJob(_ job: any HostJob) -> MainExecutor.JobID {
        executor.schedule(at: now, owner: .app(generation: generation), job: job)
    }

    /// Records one of the host's events, at the session's time.
    func record(_ event: ReportEventName, _ fields: (String, JSONValue)...) { record(event, fields) }

    func record(_ event: ReportEventName, _ fields: [(String, JSONValue)]) {
        recorder.record(TimelineEvent(time: now, event: event, fields: fields))
    }

    /// Asks the coordinator to change the whole app (`HostRequest`).
    func request(_ request: HostRequest) { handler?.handle(request) }

    /// Writes a termination into the report, once (`Terminations`).
    @discardableResult
    func recordTermination(_ termination: Termination, watchdog target: WatchdogTarget? = nil) -> Bool {
        terminations.write(termination, watchdog: target)
    }
}

/// The device the app runs on, as the system's steps set it: on its charger or not, with a
/// network or not. It outlives launches.
///
/// Threading: main executor only.
final class Device {
    var charging = false
    var networkAvailable = true
}

/// A plugin loaded into one launch.
struct LoadedPlugin {
    var ref: PluginRef
    var code: any PluginCode
    var network: NetworkPermissions
    /// The task identifiers it may register and submit.
    var taskIdentifiers: [String]
    /// Its slot in the watchdog, which names it when it runs.
    var watchdogSlot: Int
    var standing = Standing.loaded

    enum Standing {
        case loaded
        /// A reload is ending its generation (`AppSession.retire`): it may end what it began.
        case retiring
        /// It failed to load, or its generation was unloaded by a reload: closed, and never
        /// called again.
        case unloaded
    }
}
