// The values a queue works with: its policies, its events, and one operation.

/// What `add` does when an operation with the same name is pending or running.
public enum UniquenessPolicy: String, Sendable, CaseIterable {
    /// Names do not matter: add it.
    case ignore
    /// Drop the new operation.
    case drop
    /// Cancel the old one; the new one takes its place.
    case replace
}

/// The events a queue tells its delegates about.
public enum QueueEvent: String, Sendable, CaseIterable {
    /// The queue goes from idle to working: before its first operation starts.
    case willStartOperations
    /// The queue drained: after its last operation finished, before its task ends.
    case didFinishOperations
}

/// What runs an operation's code: the Lua bridge's coroutine, or a Swift closure.
package protocol QueueOperationBody: AnyObject {
    /// Starts the code. Called on a job of the main executor, outside any plugin code. The body
    /// calls `operation.codeEnded(failed:)` once the code is done.
    func start(_ operation: QueueOperation)
    /// The operation was cancelled, timed out or expired while its code runs: ask it to stop. The
    /// body still calls `codeEnded` when the code is done.
    func stop(_ operation: QueueOperation, because reason: QueueOperation.StopReason)
    /// The operation finished (whether or not it started): release what the body holds.
    func finished(_ operation: QueueOperation)
}

/// One operation of a queue. Main executor only (`@unchecked Sendable` so async code there can
/// carry it).
public final class QueueOperation: @unchecked Sendable {
    /// An operation's timeout when none is given (Backgroundable's).
    public static let defaultTimeout = 10.0

    public enum State: Sendable { case pending, running, finished }
    public enum StopReason: Sendable { case cancelled, timedOut, expired }

    /// Unique for the host's life.
    public let id: Int
    public let name: String?
    /// Seconds after it starts at which it is finished and stopped; `.infinity`: never.
    public let timeout: Double
    /// Whether it finishes when its code ends; false: only `finish()` (or a stop) finishes it,
    /// like Backgroundable's `AsyncOperation`.
    public let finishesWhenCodeEnds: Bool
    /// The plugin that added it.
    package let plugin: PluginRef
    /// Plugin code called when the timeout passes, before the operation is stopped.
    // As in `HostQueue`: every access is instantaneous (`markFinished` copies `body` and the
    // observers out before it calls them), so the runtime's exclusivity check is skipped.
    @exclusivity(unchecked) public var onTimeout: PluginCallback?
    @exclusivity(unchecked) var body: (any QueueOperationBody)?
    /// The queue it was added to, while that queue is there.
    var queue: HostQueue? { queueLink?.object }
    @exclusivity(unchecked) var queueLink: Link<HostQueue>?

    @exclusivity(unchecked) public private(set) var state: State = .pending
    /// Whether it was told to stop: cancelled, timed out or expired.
    public var isCancelled: Bool { stopReason != nil }
    /// Why it was told to stop, if it was.
    @exclusivity(unchecked) public private(set) var stopReason: StopReason?
    /// Whether its code raised.
    @exclusivity(unchecked) public private(set) var failed = false
    public var isFinished: Bool { state == .finished }

    /// In a sequence: the operation that must finish before this one starts.
    @exclusivity(unchecked) var predecessor: QueueOperation?
    @exclusivity(unchecked) var codeRunning = false
    @exclusivity(unchecked) var timeoutJob: MainExecutor.JobID?
    @exclusivity(unchecked) private var observers: [() -> Void] = []

    package init(
        id: Int, name: String?, timeout: Double, finishesWhenCodeEnds: Bool, plugin: PluginRef,
        onTimeout: PluginCallback?, body: any QueueOperationBody
    ) {
        self.id = id
        self.name = name
        self.timeout = timeout
        self.finishesWhenCodeEnds = finishesWhenCodeEnds
        self.plugin = plugin
        self.onTimeout = onTimeout
        self.body = body
    }

    /// Finishes it now; harmless once finished. Its code, if it still runs, is not stopped.
    @discardableResult
    public func finish() -> Bool {
        guard state != .finished else { return false }
        queue?.finished(self)
        return true
    }

    /// Cancels it: a pending one finishes at once, a running one is asked to stop.
    public func cancel() { queue?.stop(self, .cancelled) }

    /// Called by the body when the code is done.
    public func codeEnded(failed: Bool) {
        guard codeRunning else { return }
        codeRunning = false
        if failed { self.failed = true }
        if state == .running && (finishesWhenCodeEnds || stopReason != nil || failed) { queue?.finished(self) }
    }

    /// Calls `observer` once it has finished (at once if it has).
    public func whenFinished(_ observer: @escaping () -> Void) {
        if state == .finished { observer() } else { observers.append(observer) }
    }

    func markRunning() {
        state = .running
        codeRunning = true
    }

    func markStopped(_ reason: StopReason) { if stopReason == nil { stopReason = reason } }

    func markFinished() {
        state = .finished
        predecessor = nil
        let body = self.body.take()
        body?.finished(self)
        guard !observers.isEmpty else { return }
        let observers = self.observers
        self.observers.removeAll()
        for observer in observers { observer() }
    }
}
