import Logging

/// The operations a plugin sees (SPEC 6.2), for one plugin in one launch of the app. Lua plugins
/// reach it through the bridge; Swift plugins call it directly.
///
/// Threading: main executor only. Calls made after the app ended do nothing.
///
/// It is `@unchecked Sendable` so that a Swift plugin's async code (`task`) can carry it; it is
/// still main-executor only, which `HostTaskExecutor` ensures for code that runs in `task`.
public final class PluginContext: @unchecked Sendable {
    /// The host's components this context calls: never the host itself.
    let parts: HostParts
    /// Who the plugin is to the host's components: its slot, its name and its launch.
    package let ref: PluginRef
    /// The plugin's name.
    public var pluginName: String { ref.name }
    /// The plugin's log; `print` and `lifeline.log` go here.
    public let logger: Logger
    /// The executor's clock, through which work is handed back to the main executor from any thread.
    let clock: any HostClock
    /// Swift tasks started with `task`, by id, until they finish; cancelled when the app ends.
    var swiftTasks: [Int: Task<Void, Never>] = [:]
    var nextSwiftTaskID = 1
    /// Runs this plugin's async code on the main executor, under the watchdog.
    public private(set) lazy var taskExecutor: HostTaskExecutor = {
        // Weak: tasks keep their executor, and must not keep the host's parts or the context alive.
        final class Owners: @unchecked Sendable {
            weak var slices: SwiftSlices?
        }
        let owners = Owners()
        owners.slices = parts.slices
        return HostTaskExecutor(clock: clock, queue: parts.slices.pending) { [ref] slice in
            guard let slices = owners.slices else { return slice() }
            slices.run(ref, slice)
        }
    }()

    init(parts: HostParts, ref: PluginRef) {
        self.parts = parts
        self.ref = ref
        let pluginName = ref.name
        let session = parts.session
        self.clock = session.executor.clock
        var logger = parts.pluginLogger(pluginName)
        logger.logLevel = parts.logLevel
        // Every line the plugin writes is also a `log` event of the report, at the host's time.
        // The session is held strongly: a Swift plugin may keep its logger past the host's life,
        // and a line it writes then must not reach freed memory.
        self.logger = HostLogHandler.wrap(logger, now: { session.now }) { level, message in
            session.record(
                .log, ("plugin", .string(pluginName)), ("level", .string(level.reportName)),
                ("message", .string(message)))
        }
    }

    private var session: AppSession { parts.session }
    package var isCurrent: Bool { session.isCurrent(ref) }
    /// Whether a reload is ending this plugin's generation: it may end what it began, and start
    /// nothing new.
    public var isUnloading: Bool { session.isCurrent(ref) && session.isRetiring(ref) }
    /// Whether the plugin may start new work now.
    private var mayStart: Bool { session.mayStart(ref) }

    /// Whether the host keeps every event for the report (simulate, `run --report`): then the
    /// events a plugin causes count against its memory cap.
    package var reportKeepsEvents: Bool { session.recorder.keepsTimeline }

    /// Subscribes a handler that reports its own outcome (the bridge's form; Swift plugins use
    /// `on(_:perform:)`). Returns a subscription id for `cancelSubscription`.
    @discardableResult
    package func subscribe(_ event: LifecycleEventName, handler: @escaping EventHandler) -> Int {
        guard mayStart else { return 0 }
        return parts.subscriptions.subscribe(plugin: ref.slot, event: event, handler: handler)
    }

    /// Cancels a subscription; harmless if it is gone already.
    public func cancelSubscription(_ id: Int) { if isCurrent { parts.subscriptions.unsubscribe(id) } }

    /// T1: begins a background task. Returns its id (> 0), or 0 if the app is not running it.
    public func beginBackgroundTask(name: String?, expirationHandler: PluginCallback?) -> Int {
        guard mayStart else { return 0 }
        return parts.tasks.begin(ref, name: name, expirationHandler: expirationHandler)
    }

    /// Gives active task `id` its expiration handler, when the handler is made with what the
    /// task's id made (a Lua background work): begin the task with none, then set it at once.
    package func setExpirationHandler(task id: Int, _ handler: @escaping PluginCallback) {
        guard isCurrent else { return }
        parts.tasks.setExpirationHandler(ref, id: id, handler)
    }

    /// T6: ends a background task. Returns false, with iOS's warning, if it is unknown or ended.
    @discardableResult
    public func endBackgroundTask(_ id: Int) -> Bool {
        guard isCurrent else { return false }
        return parts.tasks.end(ref, id: id)
    }

    /// T2: seconds of background time left; `.greatestFiniteMagnitude` in the foreground.
    public var backgroundTimeRemaining: Double { parts.tasks.backgroundTimeRemaining }

    /// The app's state: inactive, active or background.
    public var state: AppState { session.visibleState }

    /// Seconds since the host started, on the host's clock.
    public var now: Double { session.now.seconds }

    /// Seconds since 1970 on the host's clock: virtual in simulate (from a fixed epoch), real in run.
    public var epochNow: Double { parts.epochAtStart + session.now.seconds }

    /// A one-shot timer whose callback reports its own outcome (the bridge's form; Swift plugins
    /// use `after(_:perform:)`). Returns its id for `cancelTimer`.
    @discardableResult
    package func startTimer(after seconds: Double, callback: @escaping PluginCallback) -> Int {
        guard mayStart else { return 0 }
        return parts.timers.start(plugin: ref.slot, after: seconds, callback: callback)
    }

    /// Cancels a timer; harmless if it fired or was cancelled already.
    public func cancelTimer(_ id: Int) { if isCurrent { parts.timers.cancel(id) } }

    // MARK: - Waiting: the forms the bridge builds on; Swift code uses the async API.

    /// Calls `completion(true)` after `seconds` on the host's clock, or `completion(false)` if the
    /// app ends first. Returns an id for `cancelWait` (0 if the app is not running).
    package func sleep(_ seconds: Double, completion: @escaping (Bool) -> Void) -> Int {
        guard mayStart else { return 0 }
        return parts.waits.sleep(plugin: ref.slot, seconds: seconds, completion: completion)
    }

    /// Starts an HTTP request under the plugin's network permissions; `completion` is called once,
    /// on a later turn, with the response or why it failed (`cancelled` if the app ends first).
    /// Returns an id for `cancelWait` (0 if the app is not running: `completion` is not called).
    package func http(
        _ request: HTTPRequest, completion: @escaping (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> Int {
        guard mayStart else { return 0 }
        return parts.waits.http(ref, request, completion: completion)
    }

    /// Stops a wait: its completion is not called. For a request, `recording` is the outcome the
    /// report shows (`expired`, `cancelled`). Harmless if the wait is over.
    package func cancelWait(_ id: Int, recording kind: HTTPFailure.Kind? = nil) {
        parts.waits.cancel(id, recording: kind)
    }

    /// Runs `job.runJob()` on the next turn, as an app job: dropped if the app ends first (the
    /// bridge resumes coroutines this way). The job calls plugin code through `callNow`. Returns its id for `cancelJob`; nil if the app is not
    /// running.
    package func enqueue(_ job: any HostJob) -> MainExecutor.JobID? {
        guard isCurrent else { return nil }
        return session.scheduleAppJob(job)
    }

    /// Cancels a job `enqueue(_:)` scheduled; harmless if it ran.
    package func cancelJob(_ id: MainExecutor.JobID) { session.executor.cancel(id) }

    /// Records a `pluginError` for an error the host did not catch itself (in a coroutine it resumed).
    package func reportError(message: String, traceback: String, handler: String) {
        guard isCurrent else { return }
        parts.caller.recordPluginError(ref, message: message, traceback: traceback, handler: handler)
    }

    /// The plugin's durable store. It lives in the state dir's database, so it outlives
    /// this launch of the app and the host. Throws when the host has no state dir.
    public func store() throws(StoreError) -> PluginStore {
        guard isCurrent else { throw StoreError("the app is not running, so the store cannot be used") }
        return try parts.stores.store(for: pluginName)
    }

    // MARK: - Background transfers

    /// Starts a background download of `url` into `file`, a name relative to the plugin's files
    /// folder (`<state-dir>/files/<plugin>/`). The file appears under that name only once it is
    /// complete and verified (its size, and `sha256` when given). Returns the transfer's id: `id`
    /// when given (an unfinished transfer with that id is returned, not started twice), else a
    /// number the host picks. `transferDidFinish` or `transferDidFail` follows, carrying it.
    public func download(url: String, to file: String, sha256: String? = nil, id: String? = nil) throws(TransferError)
        -> String
    {
        guard mayStart else { throw TransferError(isUnloading ? PluginContext.unloadingMessage : "the app is not running") }
        return try parts.transfers.start(
            ref, kind: .download, method: "GET", url: url, file: file, sha256: sha256, tag: id)
    }

    /// Starts a background upload of `file` (relative to the plugin's files folder) with `method`,
    /// PUT or POST. Returns the transfer's id, as `download` does.
    public func upload(url: String, from file: String, method: String = "PUT", id: String? = nil)
        throws(TransferError) -> String
    {
        guard mayStart else { throw TransferError(isUnloading ? PluginContext.unloadingMessage : "the app is not running") }
        let method = method.uppercased()
        guard method == "PUT" || method == "POST" else {
            throw TransferError("an upload's method must be PUT or POST, not '\(method)'")
        }
        return try parts.transfers.start(ref, kind: .upload, method: method, url: url, file: file, sha256: nil, tag: id)
    }

    /// The plugin's transfers, oldest first, finished ones included.
    public func transfers() throws(TransferError) -> [TransferRecord] {
        guard isCurrent else { throw TransferError("the app is not running") }
        return try parts.transfers.list(ref)
    }

    /// Cancels an unfinished transfer: `transferDidFail` follows with reason `cancelled`. False if
    /// the plugin has no unfinished transfer with that id.
    @discardableResult
    public func cancelTransfer(_ id: String) throws(TransferError) -> Bool {
        guard isCurrent else { throw TransferError("the app is not running") }
        return try parts.transfers.cancel(ref, id: id)
    }

    /// Runs plugin code now under a watchdog window of its own (see `GuardedCaller.callNow`).
    package func callNow(handler: HandlerName, limit: WatchdogLimit, _ callback: PluginCallback) {
        parts.caller.callNow(ref, handler: handler, limit: limit, callback)
    }

    /// A new operation id, unique for the host's life.
    package func makeOperationID() -> Int { parts.queues.makeOperationID() }

    /// Why a call that would start new work is refused while a reload unloads the plugin.
    public static let unloadingMessage = "the plugin is being unloaded by a reload: no new work may start"

    /// The profile's limits, for the bridge's timing rules.
    public var profile: Profile { session.profile }
}
