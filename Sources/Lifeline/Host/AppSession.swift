import Logging

/// The app's launch as the host's components see it: which launch is current, whether it runs,
/// the state handlers see, and the plugins loaded into it. The host changes it (`LifelineHost`
/// owns the lifecycle); the components read it, schedule the app's jobs and record through it, so
/// none of them needs the host itself.
///
/// Threading: main executor only.
final class AppSession {
    let executor: MainExecutor
    let recorder: Recorder
    let profile: Profile
    /// The host's own log.
    let logger: Logger
    /// Counts launches; app jobs and contexts of an older launch are stale.
    var generation = 0
    /// Between a launch and the app's end.
    var appRunning = false
    /// The state handlers see; it follows the notification being sent.
    var visibleState: AppState = .notRunning
    /// This launch's plugins, in load order. A plugin that failed to load keeps its slot, closed,
    /// so every index stays valid until the app ends.
    ///
    /// Read on every call into plugin code. Every access is instantaneous: an element is read and
    /// its references used after the access ended, and the list is changed only by loading and the
    /// app's end, from host code. No access can overlap another, so the runtime's check on each
    /// one is skipped.
    @exclusivity(unchecked) var plugins: [LoadedPlugin] = []
    /// Why a plugin could not be loaded, under the `.abort` policy.
    var loadError: LifelineError?
    /// Set once didFinishLaunching's handlers have returned: scheduled tasks' handlers can no
    /// longer be registered.
    var launchEnded = false

    init(executor: MainExecutor, recorder: Recorder, profile: Profile, logger: Logger) {
        self.executor = executor
        self.recorder = recorder
        self.profile = profile
        self.logger = logger
        link.set(self)
    }

    deinit { link.set(nil) }

    /// Whether this session is still there, for what may outlive it: the executor's gate for app
    /// jobs.
    let link = Link<AppSession>()

    var now: HostTime { executor.now }
    /// The app was terminated by a rule, or a plugin could not load: nothing runs any more.
    var isStopped: Bool { recorder.isTerminated || loadError != nil }
    /// Whether the app is running and no rule has stopped it.
    var isRunning: Bool { appRunning && !isStopped }

    /// Whether `context` belongs to the running launch and its plugin is loaded.
    func isCurrent(_ context: PluginContext) -> Bool {
        appRunning && context.generation == generation && !context.isUnloaded
    }

    /// The loaded plugin called `name`, if this launch has it.
    func pluginIndex(named name: String) -> Int? {
        plugins.firstIndex { $0.context.pluginName == name && !$0.context.isUnloaded }
    }

    /// Schedules a job of this launch of the app: held while it is suspended, dropped once it ended.
    @discardableResult
    func scheduleAppJob(at time: HostTime? = nil, _ body: @escaping () -> Void) -> MainExecutor.JobID {
        executor.schedule(at: time ?? now, owner: .app(generation: generation), body)
    }

    func scheduleAppJob(_ job: any HostJob) -> MainExecutor.JobID {
        executor.schedule(at: now, owner: .app(generation: generation), job: job)
    }

    func record(_ event: String, _ fields: (String, JSONValue)...) { record(event, fields) }

    func record(_ event: String, _ fields: [(String, JSONValue)]) {
        recorder.record(TimelineEvent(time: now, event: event, fields: fields))
    }
}

/// A plugin loaded into one launch.
struct LoadedPlugin {
    var instance: any PluginInstance
    var context: PluginContext
    var network: NetworkPermissions
    /// The task identifiers it may register and submit.
    var taskIdentifiers: [String]
    /// Its slot in the watchdog, which names it when it runs.
    var watchdogSlot: Int
}
