/// A plugin's handler for a task identifier, in the form the bridge builds: each call reports its
/// own outcome.
public struct SystemTaskHandler {
    /// Runs the handler with its task.
    public var run: (SystemTaskInfo) -> CallOutcome
    /// Calls the task's expiration handler, when it has one.
    public var expire: (SystemTaskInfo) -> CallOutcome
    /// The task is over: what was kept for it may go.
    public var finished: (SystemTaskInfo) -> Void

    public init(
        run: @escaping (SystemTaskInfo) -> CallOutcome, expire: @escaping (SystemTaskInfo) -> CallOutcome,
        finished: @escaping (SystemTaskInfo) -> Void = { _ in }
    ) {
        self.run = run
        self.expire = expire
        self.finished = finished
    }
}
