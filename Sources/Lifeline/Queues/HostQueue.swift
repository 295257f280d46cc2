// Operation queues: Backgroundable's queues, on the host's executor and budgets.
//
// A queue runs operations in the order they were added, at most `maxConcurrent` at once. While it
// has running operations, or pending ones it may start, it holds exactly one background task: it
// begins when work goes from none to some and ends when the queue drains. When that task expires
// the queue stops starting operations, stops the running ones, and ends its task so the app can
// suspend; the pending ones run again once the app is back in the foreground.
//
// Queues belong to the host, by name, so plugins in Lua and in Swift can share one. They live for
// one launch of the app.
//
// Threading: main executor only.

import DequeModule

/// A named queue of the host.
package final class HostQueue {
    /// The global queue's name: `lifeline.queue.background`, `context.backgroundQueue`.
    public static let backgroundName = "background"
    /// The global queue runs this many operations at once.
    public static let backgroundMaxConcurrent = 4
    /// The most operations one turn of a queue starts.
    static let batch = 256

    public let name: String
    public let maxConcurrent: Int
    private let session: AppSession
    /// The session's recorder, held here: loaded through the session, it was retained and released
    /// around the clock read of every event (see `TaskRuntime.recorder`).
    private let recorder: Recorder
    /// Calls the plugins' code: delegates and timeouts.
    private let caller: GuardedCaller
    /// Begins and ends the queue's background task.
    private let tasks: TaskRuntime

    // Every operation touches these a dozen times, and the runtime's exclusivity check cost about
    // 2,300 instructions an operation. Each access is instantaneous: none holds a property while
    // it calls out (loops over `running`, `pending` and `delegates` iterate copies), so no two can
    // overlap, and the check is skipped.

    /// Pending operations in order; finished ones are spent, and dropped once they come first.
    @exclusivity(unchecked) private var pending = Deque<QueueOperation>()
    @exclusivity(unchecked) public private(set) var pendingCount = 0
    @exclusivity(unchecked) public private(set) var running: [QueueOperation] = []
    /// suspend() calls not yet balanced by resume().
    @exclusivity(unchecked) public private(set) var suspendCount = 0
    /// Its task expired in this stay in the background: it starts nothing until the foreground.
    @exclusivity(unchecked) public private(set) var expired = false
    @exclusivity(unchecked) private var taskID = 0
    @exclusivity(unchecked) private var pumpScheduled = false
    /// Inside `pump`: an operation that finishes there needs no new turn, the loop goes on.
    @exclusivity(unchecked) private var pumping = false
    /// Whether willStartOperations was sent for the current stretch of work.
    @exclusivity(unchecked) private var announced = false
    @exclusivity(unchecked) private var delegates: [(event: QueueEvent, plugin: PluginRef, callback: PluginCallback)] = []

    init(name: String, maxConcurrent: Int, session: AppSession, caller: GuardedCaller, tasks: TaskRuntime) {
        self.name = name
        self.maxConcurrent = maxConcurrent
        self.session = session
        self.recorder = session.recorder
        self.caller = caller
        self.tasks = tasks
        link.set(self)
    }

    deinit { link.set(nil) }

    /// Whether this queue is still there, for what may outlive it: its operations, which a plugin
    /// may keep past the launch, and its jobs.
    let link = Link<HostQueue>()

    /// Pending and running operations.
    public var count: Int { pendingCount + running.count }
    public var isSuspended: Bool { suspendCount > 0 }
    /// Whether it holds a background task now.
    public var holdsTask: Bool { taskID != 0 }

    // MARK: - Adding

    /// What `add` did.
    public enum AddResult {
        case added
        /// Dropped under `.drop`: this operation of the same name is pending or running.
        case dropped(existing: QueueOperation)
    }

    /// Adds an operation under a uniqueness policy.
    @discardableResult
    public func add(_ op: QueueOperation, unique: UniquenessPolicy = .ignore) -> AddResult {
        if unique != .ignore, let name = op.name, let old = live(named: name) {
            if unique == .drop {
                op.queueLink = link
                session.record(
                    .opDropped, fields(op) + [("existing", .int(Int64(old.id)))])
                op.markFinished()
                return .dropped(existing: old)
            }
            session.record(.opReplaced, fields(op) + [("replaced", .int(Int64(old.id)))])
            if old.state == .pending, let i = pendingIndex(of: old) {
                // It waits in the old one's place, and in its sequence.
                op.queueLink = link
                op.predecessor = old.predecessor
                for later in pending[(i + 1)...] where later.predecessor === old { later.predecessor = op }
                pending[i] = op
                old.markStopped(.cancelled)
                old.markFinished()
                record(.opFinished, old)
                ensureTask(op.plugin)
                schedulePump()
                return .added
            }
            stop(old, .cancelled)
            // The old one ran: the new one runs next.
            enqueue(op, atFront: true)
            return .added
        }
        enqueue(op, atFront: false)
        return .added
    }

    /// Adds operations that run one after another, in this order, whatever they wait on. Each
    /// starts once the one before it finished (whether it returned, failed or was cancelled).
    public func addSequential(_ ops: [QueueOperation]) {
        var previous: QueueOperation?
        for op in ops {
            op.predecessor = previous
            enqueue(op, atFront: false)
            previous = op
        }
    }

    private func enqueue(_ op: QueueOperation, atFront: Bool) {
        op.queueLink = link
        if atFront {
            pending.prepend(op)
        } else {
            pending.append(op)
        }
        pendingCount += 1
        ensureTask(op.plugin)
        schedulePump()
    }

    /// The pending or running operation called `name`; one that was told to stop does not count.
    private func live(named name: String) -> QueueOperation? {
        if let op = running.first(where: { $0.name == name && $0.stopReason == nil }) { return op }
        for op in pending where op.state == .pending && op.name == name { return op }
        return nil
    }

    private func pendingIndex(of op: QueueOperation) -> Int? {
        pending.firstIndex { $0 === op }
    }

    // MARK: - Controls

    /// Counted: the queue starts nothing until as many `resume()` calls.
    public func suspend() {
        suspendCount += 1
        schedulePump()  // ends the task once nothing runs
    }

    /// Returns false when the queue was not suspended.
    @discardableResult
    package func resume(_ plugin: PluginRef) -> Bool {
        guard suspendCount > 0 else { return false }
        suspendCount -= 1
        if suspendCount == 0 {
            ensureTask(plugin)
            schedulePump()
        }
        return true
    }

    /// Cancels every pending and running operation.
    public func cancelAll() {
        for op in running { stop(op, .cancelled) }
        for op in pending where op.state == .pending { stop(op, .cancelled) }
    }

    /// A reload ends `plugin`'s generation: it hears no more of this queue, its operations not
    /// started yet are cancelled (no new work may start), and its running ones are told to stop as
    /// expired, as the works under its tasks are. Other plugins' operations go on.
    func retire(_ plugin: PluginRef) {
        delegates.removeAll { $0.plugin == plugin }
        for op in pending where op.state == .pending && op.plugin == plugin { stop(op, .cancelled) }
        for op in running where op.plugin == plugin { stop(op, .expired) }
    }

    /// Registers a delegate callback.
    package func on(_ event: QueueEvent, plugin: PluginRef, _ callback: @escaping PluginCallback) {
        delegates.append((event, plugin, callback))
    }

    // MARK: - Stopping and finishing

    func stop(_ op: QueueOperation, _ reason: QueueOperation.StopReason) {
        switch op.state {
        case .finished:
            return
        case .pending:
            op.markStopped(reason)
            pendingCount -= 1
            conclude(op)
            schedulePump()
        case .running:
            guard op.stopReason == nil else { return }
            op.markStopped(reason)
            interrupt(op, reason)
        }
    }

    /// Asks a running operation's code to stop; finishes it at once if no code runs.
    private func interrupt(_ op: QueueOperation, _ reason: QueueOperation.StopReason) {
        if op.codeRunning {
            op.body?.stop(op, because: reason)
        } else {
            finished(op)
        }
    }

    /// Finishes `op`: running or pending.
    func finished(_ op: QueueOperation) {
        switch op.state {
        case .finished: return
        case .pending: pendingCount -= 1
        case .running:
            // Most often the only one, or the last started (a serial queue, synchronous code).
            if running.last === op { running.removeLast() } else { running.removeAll { $0 === op } }
            if let job = op.timeoutJob { session.executor.cancel(job) }
        }
        conclude(op)
        schedulePump()
    }

    private func conclude(_ op: QueueOperation) {
        op.markFinished()
        record(.opFinished, op)
    }

    /// The queue's task expired (T3): stop starting, stop what runs; the task ends once it stopped.
    private func taskExpired() {
        expired = true
        for op in running { stop(op, .expired) }
        schedulePump()
    }

    /// The app is back in the foreground: what expired may run again.
    func appLeftBackground() {
        guard expired else { return }
        expired = false
        if let first = pending.first(where: { $0.state == .pending }) { ensureTask(first.plugin) }
        schedulePump()
    }

    /// The app ended: everything goes, with nothing recorded.
    func abandon() {
        let ops = running + pending.filter { $0.state == .pending }
        running.removeAll()
        pending.removeAll()
        pendingCount = 0
        delegates.removeAll()
        for op in ops {
            op.markStopped(.cancelled)
            op.markFinished()
        }
    }

    // MARK: - Running

    /// Whether the queue may start its next operation now.
    private var canStart: Bool { !expired && suspendCount == 0 && running.count < maxConcurrent }

    /// Begins the queue's task if it has work it may do and holds none.
    private func ensureTask(_ plugin: PluginRef) {
        guard taskID == 0, !expired, !running.isEmpty || (pendingCount > 0 && suspendCount == 0) else { return }
        // The task is begun for the plugin whose operation needs it, while it is part of the app.
        guard session.isCurrent(plugin) else { return }
        taskID = tasks.begin(plugin, name: "queue \(name)") { [link] in
            link.object?.taskExpired()
            return .returned
        }
    }

    private func schedulePump() {
        guard !pumpScheduled, !pumping else { return }
        pumpScheduled = true
        session.scheduleAppJob { [link] in link.object?.pump() }
    }

    /// One turn of the queue: starts what it may, tells the delegates, ends the task when done.
    private func pump() {
        pumpScheduled = false
        if !announced && canStart && pendingCount > 0 {
            announced = true
            notify(.willStartOperations)
            guard session.isRunning else { return }
        }
        // Operations that finish at once (synchronous code) run in one turn, a batch at a time, so
        // other jobs still get their turns between batches.
        pumping = true
        var started = 0
        while canStart, started < HostQueue.batch, let op = nextStartable() {
            start(op)
            started += 1
            guard session.isRunning else {
                pumping = false
                return
            }
        }
        pumping = false
        if started == HostQueue.batch && canStart && pendingCount > 0 {
            schedulePump()
            return
        }
        if running.isEmpty && (pendingCount == 0 || !canStart) {
            if pendingCount == 0 && announced {
                announced = false
                notify(.didFinishOperations)
                // A delegate may have added work: then the task carries on.
                if count > 0 {
                    schedulePump()
                    return
                }
            }
            endTask()
        }
    }

    private func endTask() {
        guard taskID != 0 else { return }
        let id = taskID
        taskID = 0
        tasks.end(id)
    }

    private func notify(_ event: QueueEvent) {
        for delegate in delegates where delegate.event == event {
            guard session.isRunning else { return }
            caller.callNow(
                delegate.plugin, handler: HandlerName("queue '\(name)' \(event.rawValue)"), limit: .transition,
                delegate.callback)
        }
    }

    /// The first pending operation whose predecessor finished; removes it from the pending list.
    private func nextStartable() -> QueueOperation? {
        var i = 0
        while i < pending.count {
            let op = pending[i]
            if op.state != .pending {
                if i == 0 { pending.removeFirst() } else { i += 1 }
                continue
            }
            if let before = op.predecessor, before.state != .finished {
                i += 1
                continue
            }
            pending.remove(at: i)
            pendingCount -= 1
            return op
        }
        return nil
    }

    private func start(_ op: QueueOperation) {
        op.markRunning()
        running.append(op)
        ensureTask(op.plugin)
        record(.opStarted, op)
        let startedAt = session.now
        op.body?.start(op)
        // Only an operation still running needs its timeout: most synchronous ones are done.
        if op.state == .running && op.timeout.isFinite {
            op.timeoutJob = session.scheduleAppJob(at: startedAt.adding(seconds: op.timeout)) {
                [link, weak op] in
                guard let op else { return }
                link.object?.timedOut(op)
            }
        }
    }

    private func timedOut(_ op: QueueOperation) {
        guard op.state == .running, op.stopReason == nil else { return }
        op.timeoutJob = nil
        // Marked first, so the operation counts as timed out even if onTimeout finishes it.
        op.markStopped(.timedOut)
        if let onTimeout = op.onTimeout {
            caller.callNow(op.plugin, handler: HandlerName("operation \(op.id) onTimeout"), limit: .transition, onTimeout)
        }
        if op.state == .running { interrupt(op, .timedOut) }
    }

    // MARK: - Report fields

    private func fields(_ op: QueueOperation) -> [(String, JSONValue)] {
        var f: [(String, JSONValue)] = []
        f.reserveCapacity(5)
        f.append(("plugin", .string(op.plugin.name)))
        f.append(("queue", .string(name)))
        f.append(("op", .int(Int64(op.id))))
        if let n = op.name { f.append(("name", .string(n))) }
        return f
    }

    /// `opStarted`, or `opFinished` with how it finished.
    private func record(_ event: TimelineStore.Kind, _ op: QueueOperation) {
        let now = session.now
        recorder.recordOperation(
            event, time: now, plugin: op.plugin.name, queue: name, op: op.id, name: op.name,
            finished: event == .opFinished
                ? TimelineEvent.OperationEnding(
                    timedOut: op.stopReason == .timedOut, cancelled: op.stopReason == .cancelled,
                    expired: op.stopReason == .expired, failed: op.failed)
                : nil)
    }
}
