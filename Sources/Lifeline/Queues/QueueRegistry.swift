/// The operation queues of one launch, by name, each made on first use and shared by every
/// plugin; and the operation ids, unique for the host's life.
///
/// Threading: main executor only.
final class QueueRegistry {
    private let session: AppSession
    private let caller: GuardedCaller
    private let tasks: TaskRuntime
    private var queues: [String: HostQueue] = [:]
    private var nextOperationID = 1

    init(session: AppSession, caller: GuardedCaller, tasks: TaskRuntime) {
        self.session = session
        self.caller = caller
        self.tasks = tasks
    }

    /// The queue called `name`, made on first use. `maxConcurrent`, when given, must agree with
    /// the queue's if it exists.
    func queue(named name: String, maxConcurrent: Int?) throws(QueueError) -> HostQueue {
        guard !name.isEmpty else { throw QueueError("a queue's name must not be empty") }
        if let m = maxConcurrent, m < 1 { throw QueueError("maxConcurrent must be an integer >= 1") }
        if let q = queues[name] {
            if let m = maxConcurrent, m != q.maxConcurrent {
                throw QueueError("queue '\(name)' already exists with maxConcurrent = \(q.maxConcurrent), not \(m)")
            }
            return q
        }
        let fallback = name == HostQueue.backgroundName ? HostQueue.backgroundMaxConcurrent : 1
        let q = HostQueue(name: name, maxConcurrent: maxConcurrent ?? fallback, session: session, caller: caller, tasks: tasks)
        queues[name] = q
        return q
    }

    func makeOperationID() -> Int {
        defer { nextOperationID += 1 }
        return nextOperationID
    }

    /// The app left the background: queues whose task expired may start work again.
    func appLeftBackground() {
        for name in queues.keys.sorted() { queues[name]?.appLeftBackground() }
    }

    /// A reload ends `plugin`'s generation: each queue, in name order, forgets it (`HostQueue.retire`).
    func retire(_ plugin: PluginRef) {
        for name in queues.keys.sorted() { queues[name]?.retire(plugin) }
    }

    /// The app ended: every queue stops, in name order, and is forgotten.
    func abandonAll() {
        for name in queues.keys.sorted() { queues[name]?.abandon() }
        queues.removeAll()
    }
}
