import CLua
import CLuaShims
import Lifeline

/// One call of `lifeline.background(name, fn, ...)`: a background task, and the coroutine the
/// host runs `fn(task, ...)` in. The task ends on every path: `fn` returns, raises, is cancelled,
/// or expires. Under a task the plugin holds (`lifeline.background({task = id}, fn, ...)`), the
/// work begins no task and ends none: it stops when that task expires or ends.
///
/// The values `fn` returns stay on its dead coroutine, which the handle keeps, so `task:wait()`
/// answers them to every waiter, in order, nils included: the coroutines are threads of one
/// plugin's state, so a value moves between them as it is, with no copy.
///
/// The coroutine runs in slices, each a job of the main executor under the watchdog: the first on
/// the turn after `lifeline.background`, the next ones when what it waits on is over. A waiting
/// call (`lifeline.sleep`, `lifeline.http.request`, `task:wait`) registers the wait and yields
/// through the C trampoline; the host resumes the coroutine with `true, results...`, or with
/// `false, err` to make the call raise `err` (expiration, cancellation).
///
/// After an expiration or a cancel, `fn` has the expiration-handler limit, on the host's clock, to
/// return; then the host closes the coroutine (its to-be-closed variables run) and ends the task.
///
/// Threading: main executor only. Ownership: the plugin's `works` (or the operation), and a
/// queued slice's job, hold the object until it finishes. The coroutine is held through a registry
/// reference (the task handle's, whose second user value it is, or the operation's own),
/// released when it finishes (or with the state).
final class LuaBackgroundWork: HostJob {
    /// What became of the work; stored in the Lua handle for `done()` and `wait()`.
    enum Outcome: Int32 {
        case returned = 1
        case failed = 2
        case expired = 3
        case cancelled = 4
    }

    enum Interruption {
        /// The task expired, or the operation's queue task did.
        case expired
        case cancelled
        /// An operation's timeout passed (raised as a cancellation).
        case timedOut
        /// The task the work ran under, which it did not begin, ended (raised as a cancellation).
        case taskEnded
        var kind: HTTPFailure.Kind { self == .expired ? .expired : .cancelled }
        var outcome: Outcome { self == .expired ? .expired : .cancelled }
    }

    /// Pushes the values a resume passes; returns how many.
    typealias Push = (OpaquePointer) -> Int32

    private enum Phase {
        /// The first resume is queued: `fn` and its arguments (this many) are on the coroutine.
        case starting(arguments: Int32)
        /// A resume is queued with these values.
        case pending(Push)
        case running
        /// Waiting on a host wait (its id), or on another task (nil).
        case waiting(waitID: Int?)
        case finished
    }

    /// The background task it runs under: the one it began (`lifeline.background`), or one its
    /// plugin holds (`ownsTask` false); nil for a queue's operation, whose queue holds the task.
    let taskID: Int?
    /// Whether it began `taskID`, and so ends it when it finishes.
    let ownsTask: Bool
    /// Its key among the plugin's works (`LuaPlugin.work(id:)`, the handle's `work`): the task's
    /// id when it began the task, a negative number under a held task (many works may share one).
    let key: Int
    /// Its number: the task's id, or the operation's.
    private let number: Int
    /// What messages call it: "background task 3", "operation 7". Made only when a message or the
    /// watchdog needs it, not for every work.
    var label: String { "\(kindName) \(number)" }
    let name: String?
    /// Called once it finished, with what became of it.
    // `onEnd` and `waiters` are copied out before what they hold is called, so no access to them
    // overlaps another, and the runtime's check on each is skipped.
    @exclusivity(unchecked) var onEnd: ((Outcome) -> Void)?
    private unowned let plugin: LuaPlugin
    private let context: PluginContext
    let thread: OpaquePointer
    private let threadRef: Int32
    private let handleRef: Int32
    /// What the host keeps for a `lifeline.background` work, counted against the cap until the
    /// work is freed (an operation's is its queue's).
    private let charge: HostCharge?
    private var phase: Phase
    private var started = false
    private(set) var interruption: Interruption?
    /// Closes the coroutine if it has not returned within the grace after an interruption.
    private var closeTimer: Int?
    /// Works waiting on this one (`task:wait()`).
    @exclusivity(unchecked) private var waiters: [LuaBackgroundWork] = []
    /// The work this one waits on, in `task:wait()`.
    private weak var waitingOn: LuaBackgroundWork?
    /// An interruption that came while the coroutine ran (it cancelled itself): the next waiting
    /// call raises it. After that, waits work again until the grace is over, so `fn` can clean up.
    private var interruptionPending = false

    /// The handler name the watchdog and errors use; made once, at the first slice.
    var handlerName: HandlerName { name.map { .named(kindName, $0) } ?? .numbered(kindName, number) }
    private var kindName: String { taskID == nil ? "operation" : "background task" }

    /// - Parameters: `thread` holds `fn` and its arguments (`arguments` of them, the task handle
    ///   first); `threadRef` and `handleRef` are registry references this object releases. A
    ///   `lifeline.background` work's coroutine is held by its handle, and its `threadRef` is
    ///   LUA_NOREF.
    init(
        taskID: Int?, ownsTask: Bool = true, key: Int? = nil, number: Int, name: String?, plugin: LuaPlugin,
        context: PluginContext, thread: OpaquePointer, threadRef: Int32, handleRef: Int32, arguments: Int32,
        charge: HostCharge? = nil
    ) {
        self.charge = charge
        self.taskID = taskID
        self.ownsTask = ownsTask
        self.key = key ?? number
        self.number = number
        self.name = name
        self.plugin = plugin
        self.context = context
        self.thread = thread
        self.threadRef = threadRef
        self.handleRef = handleRef
        self.phase = .starting(arguments: arguments)
    }

    var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    // MARK: - Running

    /// Queues the first slice.
    func start() { schedule() }

    /// Runs the first slice now (from a host job: a queue starting the operation).
    func startNow() {
        context.callNow(handler: handlerName, limit: .transition) { [self] in runPending() }
    }

    /// Ends it without running it (an operation that never started); nothing unwinds.
    func discard() {
        guard !started, !isFinished else { return }
        finish(.cancelled, message: nil)
    }

    /// Queues the next slice: this object is the executor's job, so queuing one allocates nothing.
    /// The job holds the work until it runs, or until the app ends and its jobs are dropped.
    private func schedule() {
        // An interruption reschedules a queued resume under the shorter expiration-handler limit:
        // the job queued before it goes.
        if let queuedSlice { context.cancelJob(queuedSlice) }
        sliceLimit = interruption == nil ? .transition : .expirationHandler
        queuedSlice = context.enqueue(self)
    }

    /// The queued slice's job, until it runs.
    private var queuedSlice: MainExecutor.JobID?
    /// The watchdog's limit for the queued slice.
    private var sliceLimit = WatchdogLimit.transition

    func runJob() {
        queuedSlice = nil
        context.callNow(handler: handlerName, limit: sliceLimit) { runPending() }
    }

    private func runPending() -> CallOutcome {
        let plugin = self.plugin  // taken from its unowned reference once
        guard let L = plugin.state else { return .returned }
        let nargs: Int32
        switch phase {
        case .starting(let arguments):
            nargs = arguments
        case .pending(let push):
            lifeline_bridge_enter(thread)
            nargs = push(thread)
            lifeline_bridge_leave(thread)
        default:
            return .returned
        }
        phase = .running
        started = true
        var results: Int32 = 0
        let status = running(plugin) { lifeline_resume(L, thread, nargs, &results) }
        switch status {
        case LUA_YIELD:
            if case .running = phase {
                // A bare coroutine.yield() reached the host: there is nothing to resume it for.
                let message = "\(handlerName) yielded outside a waiting call: use lifeline.sleep, "
                    + "lifeline.http.request or task:wait to wait"
                context.reportError(message: message, traceback: "", handler: handlerName.description)
                return close(then: .failed, message: message)
            }
            return .returned
        case LUA_OK:
            finish(.returned, message: nil, results: results)
            return .returned
        default:
            return failed(status, L)
        }
    }

    /// Runs `body`, which runs the coroutine, as the plugin's running work: the waiting calls it
    /// makes find this work.
    private func running(_ plugin: LuaPlugin, _ body: () -> Int32) -> Int32 {
        let outer = plugin.runningWork
        plugin.runningWork = self
        defer { plugin.runningWork = outer }
        return body()
    }

    /// The coroutine raised (the error value is on top of L; the dead coroutine keeps it too).
    /// Lua leaves the to-be-closed variables of a coroutine that died by an error open until the
    /// coroutine is closed, so every path here closes it before the work ends.
    private func failed(_ status: Int32, _ L: OpaquePointer) -> CallOutcome {
        if let interruption, lifeline_is_interruption(L, -1) != 0 {
            // The interruption went uncaught: the work ends as expired or cancelled, not as an error.
            lifeline_pop(L, 1)
            return closeThread(L, then: interruption.outcome, message: nil)
        }
        if status != LUA_ERRMEM { lifeline_traceback_of(L, thread) }
        let outcome = plugin.outcome(status, L)
        switch outcome {
        case .returned:
            return closeThread(L, then: .returned, message: nil)
        case .preempted:
            return outcome  // the host terminates the app: no more of the plugin's code runs
        case .raised(let message, let traceback):
            context.reportError(message: message, traceback: traceback, handler: handlerName.description)
            return closeThread(L, then: .failed, message: message)
        }
    }

    // MARK: - Waiting

    /// Called by a waiting call, inside this coroutine, before it yields: a host wait.
    func waiting(on waitID: Int) { phase = .waiting(waitID: waitID) }

    /// Called by a waiting call that waits on something other than a host wait or a task (an
    /// operation), inside this coroutine, before it yields; `deliver` ends the wait.
    func waitingElsewhere() { phase = .waiting(waitID: nil) }

    var isWaiting: Bool {
        if case .waiting = phase { return true }
        return false
    }

    /// Whether this work waits, through `task:wait()` calls, for `other` (or is it).
    func waitsFor(_ other: LuaBackgroundWork) -> Bool {
        var current: LuaBackgroundWork? = self
        while let work = current {
            if work === other { return true }
            current = work.waitingOn
        }
        return false
    }

    /// Called by `task:wait()`, inside this coroutine, before it yields.
    func waiting(for other: LuaBackgroundWork) {
        phase = .waiting(waitID: nil)
        waitingOn = other
        other.waiters.append(self)
    }

    /// An interruption the next waiting call must raise, once.
    func takePendingInterruption() -> Interruption? {
        guard interruptionPending else { return nil }
        interruptionPending = false
        return interruption
    }

    /// Called when what the coroutine waits on is over: queues the resume with these values.
    func deliver(_ push: @escaping Push) {
        guard case .waiting = phase else { return }
        waitingOn = nil
        phase = .pending(push)
        schedule()
    }

    /// `true, results...`: the waiting call returns the results.
    static func results(_ push: @escaping (OpaquePointer) -> Int32) -> Push {
        { L in
            lua_pushboolean(L, 1)
            return push(L) + 1
        }
    }

    /// `true, results...` when `bytes` (what pushing the results allocates, about) fit under the
    /// plugin's cap; otherwise the waiting call raises Lua's memory error.
    static func results(fitting bytes: Int, _ push: @escaping (OpaquePointer) -> Int32) -> Push {
        { L in
            guard LuaPlugin.from(L).fits(bytes) else { return outOfMemory(L) }
            lua_pushboolean(L, 1)
            return push(L) + 1
        }
    }

    /// `false` and the marker that makes the waiting call raise Lua's memory error.
    static func outOfMemory(_ L: OpaquePointer) -> Int32 {
        lua_pushboolean(L, 0)
        lifeline_push_nomem(L)
        return 2
    }

    /// `false, err`: the waiting call raises err.
    static func raising(_ kind: HTTPFailure.Kind, _ message: String) -> Push {
        { L in
            lua_pushboolean(L, 0)
            lifeline_push_error(L, kind.rawValue, message)
            return 2
        }
    }

    var interruptionMessage: String {
        switch interruption {
        case .expired?: return "\(label) expired"
        case .cancelled?: return "\(label) was cancelled"
        case .timedOut?: return "\(label) timed out"
        case .taskEnded?: return "\(label) ended"
        case nil: return ""
        }
    }

    // MARK: - Interruption

    /// Expiration (from the task's expiration handler) or `task:cancel()`.
    func interrupt(_ reason: Interruption) {
        guard !isFinished, interruption == nil else { return }
        interruption = reason
        let grace = context.profile.expirationHandlerLimit
        closeTimer = context.startTimer(after: grace) { [weak self] in
            guard let self else { return .returned }
            closeTimer = nil
            return close(then: reason.outcome, message: nil)
        }
        switch phase {
        case .starting:
            // fn never ran: nothing to unwind.
            finish(reason.outcome, message: nil)
        case .pending:
            phase = .pending(LuaBackgroundWork.raising(reason.kind, interruptionMessage))
            schedule()  // under the expiration handler's limit, not the slice's
        case .waiting(let waitID):
            if let waitID { context.cancelWait(waitID, recording: reason.kind) }
            stopWaitingOnTask()
            phase = .pending(LuaBackgroundWork.raising(reason.kind, interruptionMessage))
            schedule()
        case .running:
            interruptionPending = true  // it cancelled itself: the next waiting call raises
        case .finished:
            break
        }
    }

    private func stopWaitingOnTask() {
        waitingOn?.waiters.removeAll { $0 === self }
        waitingOn = nil
    }

    // MARK: - Ending

    /// Closes the coroutine (to-be-closed variables run), then ends the work.
    private func close(then outcome: Outcome, message: String?) -> CallOutcome {
        guard !isFinished, let L = plugin.state else { return .returned }
        if case .waiting(let waitID?) = phase { context.cancelWait(waitID, recording: interruption?.kind) }
        stopWaitingOnTask()
        phase = .running
        return closeThread(L, then: outcome, message: message)
    }

    /// Closes the coroutine, reports an error that one of its __close metamethods raised, and
    /// ends the work; a watchdog stop inside a __close is handed on to the host.
    private func closeThread(_ L: OpaquePointer, then outcome: Outcome, message: String?) -> CallOutcome {
        let status = running(plugin) { lifeline_close_thread(L, thread) }
        if status != LUA_OK {
            let result = plugin.outcome(status, L)
            if case .preempted = result { return result }
            if case .raised(let text, let traceback) = result {
                context.reportError(message: text, traceback: traceback, handler: handlerName.description)
            }
        }
        finish(outcome, message: message)
        return .returned
    }

    /// - Parameter results: how many values `fn` returned, on top of the dead coroutine.
    private func finish(_ outcome: Outcome, message: String?, results: Int32 = 0) {
        guard !isFinished else { return }
        phase = .finished
        if let queuedSlice { context.cancelJob(queuedSlice) }
        queuedSlice = nil
        if let closeTimer { context.cancelTimer(closeTimer) }
        closeTimer = nil
        let plugin = self.plugin  // taken from its unowned reference once
        plugin.forget(self)
        if let L = plugin.state {
            lifeline_bridge_enter(L)
            lua_rawgeti(L, lifeline_registryindex(), lua_Integer(handleRef))
            // The reference is the handle `lifeline.background` made (an operation has none: nil).
            if let handle = lua_touserdata(L, -1)?.assumingMemoryBound(to: LifelineTaskHandle.self) {
                handle.pointee.outcome = outcome.rawValue
                handle.pointee.results = results
                if let message {
                    LuaModule.push(L, message)
                    lua_setiuservalue(L, -2, 1)
                }
                // The finished coroutine goes with the garbage, even if the plugin keeps the handle,
                // unless it holds the values fn returned: the handle keeps them for task:wait().
                if results == 0 {
                    lua_pushnil(L)
                    lua_setiuservalue(L, -2, 2)
                }
            }
            lifeline_pop(L, 1)
            lifeline_bridge_leave(L)
            lifeline_unref(L, handleRef)
            if threadRef != LUA_NOREF { lifeline_unref(L, threadRef) }
        }
        if let taskID {
            if ownsTask { context.endBackgroundTask(taskID) } else { context.unwatchTask(taskID, self) }
        }
        onEnd?(outcome)
        onEnd = nil
        let waiting = waiters
        waiters.removeAll()
        // Each waiter is in task:wait(), whose first argument, at its stack's index 1 while it
        // waits, is this work's handle: the values are read from there when the waiter resumes.
        let bytes = Int(results) * LuaBackgroundWork.slotBytes
        for waiter in waiting {
            waiter.deliver(
                LuaBackgroundWork.results(fitting: bytes) { L in
                    LuaBackgroundWork.pushOutcome(L, outcome, message, handle: 1)
                })
        }
    }

    /// What a stack slot costs: what pushing the values a work returned allocates, about.
    static let slotBytes = 16

    /// What `task:wait()` returns: `true` and the values `fn` returned, or `false, err` with
    /// err.kind "error", "expired" or "cancelled". The values are read from the handle at
    /// `handle` (its dead coroutine holds them), which must be the finished work's.
    static func pushOutcome(_ L: OpaquePointer, _ outcome: Outcome, _ message: String?, handle index: Int32) -> Int32 {
        switch outcome {
        case .returned:
            guard let handle = lifeline_to_task(L, index), handle.pointee.results > 0 else {
                lua_pushboolean(L, 1)
                return 1
            }
            let n = handle.pointee.results
            guard lua_checkstack(L, n + 2) != 0 else {
                lua_pushboolean(L, 0)
                lifeline_push_error(L, "error", "the task returned more values than task:wait() can return")
                return 2
            }
            lua_pushboolean(L, 1)
            lua_getiuservalue(L, index, 2)  // the dead coroutine, with the values on top
            guard let co = lua_tothread(L, -1), lua_gettop(co) >= n else {
                lifeline_pop(L, 1)
                return 1
            }
            let base = lua_gettop(L)
            // Moved over, then copies moved back: the next waiter finds them there too. Moving
            // back refills the slots just freed, so co's stack never grows.
            lua_xmove(co, L, n)
            for i in 1...n {
                lua_pushvalue(L, base + i)
                lua_xmove(L, co, 1)
            }
            lua_rotate(L, base, -1)  // the coroutine to the top, and off
            lifeline_pop(L, 1)
            return 1 + n
        case .failed:
            lua_pushboolean(L, 0)
            lifeline_push_error(L, "error", message ?? "the task raised an error")
        case .expired:
            lua_pushboolean(L, 0)
            lifeline_push_error(L, "expired", "the task expired")
        case .cancelled:
            lua_pushboolean(L, 0)
            lifeline_push_error(L, "cancelled", "the task was cancelled")
        }
        return 2
    }
}

/// A work under a task its plugin holds stops when that task expires, as a work under its own task
/// does, and when it ends while the work runs: the work would otherwise go on unprotected, and the
/// app could suspend in the middle of it.
extension LuaBackgroundWork: TaskWatcher {
    func taskExpiring() { interrupt(.expired) }
    func taskEnded() { interrupt(.taskEnded) }
}
