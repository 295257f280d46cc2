/// The Swift face of operation queues: a `BackgroundQueue` is one of the host's named
/// queues, seen by one plugin, which owns the operations it adds.
///
/// ```swift
/// let uploads = try context.queue("uploads")            // serial
/// uploads.add(name: "refresh", unique: .drop) { op in
///     _ = try await context.http(HTTPRequest(url: "http://127.0.0.1:8080/refresh"))
/// }
/// context.backgroundQueue.addOperation { _ in print("done") }   // Backgroundable's inTheBackground
/// ```
///
/// Everything here runs on the main executor: call it from a handler, a timer or `context.task`.
public struct BackgroundQueue {
    package let core: HostQueue
    public let context: PluginContext

    public var name: String { core.name }
    public var maxConcurrent: Int { core.maxConcurrent }
    /// Pending and running operations.
    public var count: Int { core.count }
    public var isSuspended: Bool { core.isSuspended }

    /// An operation to add: a name, a timeout, and its code.
    public struct Operation {
        public var name: String?
        public var timeout: Double
        public var onTimeout: ((QueueOperation) throws -> Void)?
        fileprivate var finishesWhenCodeEnds: Bool
        fileprivate var makeBody: (PluginContext) -> any QueueOperationBody

        /// Async code, run as a task on the main executor: it finishes when the closure returns or
        /// throws, or earlier with `op.finish()`. A stop (cancel, timeout, expiry) cancels the task.
        public static func async(
            name: String? = nil, timeout: Double = QueueOperation.defaultTimeout,
            onTimeout: ((QueueOperation) throws -> Void)? = nil,
            _ body: @escaping @Sendable (QueueOperation) async throws -> Void
        ) -> Operation {
            Operation(
                name: name, timeout: timeout, onTimeout: onTimeout, finishesWhenCodeEnds: true,
                makeBody: { SwiftAsyncBody(body, context: $0) })
        }

        /// Code run at once, on the main executor, under the watchdog. With `finishesOnReturn`
        /// false it is Backgroundable's `AsyncOperation`: it finishes only with `op.finish()`
        /// (from a timer, a callback) or its timeout.
        public static func sync(
            name: String? = nil, timeout: Double = QueueOperation.defaultTimeout, finishesOnReturn: Bool = true,
            onTimeout: ((QueueOperation) throws -> Void)? = nil, _ body: @escaping (QueueOperation) throws -> Void
        ) -> Operation {
            Operation(
                name: name, timeout: timeout, onTimeout: onTimeout, finishesWhenCodeEnds: finishesOnReturn,
                makeBody: { SwiftSyncBody(body, context: $0) })
        }
    }

    /// Adds an operation; returns it, or nil when `unique: .drop` dropped it.
    @discardableResult
    public func add(_ operation: Operation, unique: UniquenessPolicy = .ignore) -> QueueOperation? {
        let op = make(operation)
        if case .dropped = core.add(op, unique: unique) { return nil }
        return op
    }

    /// Adds async code (see `Operation.async`).
    @discardableResult
    public func add(
        name: String? = nil, unique: UniquenessPolicy = .ignore, timeout: Double = QueueOperation.defaultTimeout,
        onTimeout: ((QueueOperation) throws -> Void)? = nil,
        _ body: @escaping @Sendable (QueueOperation) async throws -> Void
    ) -> QueueOperation? {
        add(.async(name: name, timeout: timeout, onTimeout: onTimeout, body), unique: unique)
    }

    /// Adds synchronous code (see `Operation.sync`).
    @discardableResult
    public func addOperation(
        name: String? = nil, unique: UniquenessPolicy = .ignore, timeout: Double = QueueOperation.defaultTimeout,
        finishesOnReturn: Bool = true, onTimeout: ((QueueOperation) throws -> Void)? = nil,
        _ body: @escaping (QueueOperation) throws -> Void
    ) -> QueueOperation? {
        add(
            .sync(name: name, timeout: timeout, finishesOnReturn: finishesOnReturn, onTimeout: onTimeout, body),
            unique: unique)
    }

    /// Adds operations that run one after another, in order, even when they wait.
    @discardableResult
    public func addSequential(_ operations: [Operation]) -> [QueueOperation] {
        let ops = operations.map(make)
        core.addSequential(ops)
        return ops
    }

    /// Counted: nothing starts until as many `resume()` calls.
    public func suspend() { core.suspend() }
    /// Returns false when the queue was not suspended.
    @discardableResult
    public func resume() -> Bool { core.resume(context.ref) }
    public func cancelAll() { core.cancelAll() }

    /// Tells `callback` when the queue starts working and when it drains.
    public func on(_ event: QueueEvent, perform callback: @escaping () throws -> Void) {
        core.on(event, plugin: context.ref) { SwiftCall.outcome(callback) }
    }

    private func make(_ operation: Operation) -> QueueOperation {
        let op = QueueOperation(
            id: context.makeOperationID(), name: operation.name, timeout: operation.timeout,
            finishesWhenCodeEnds: operation.finishesWhenCodeEnds, plugin: context.ref, onTimeout: nil,
            body: operation.makeBody(context))
        if let onTimeout = operation.onTimeout {
            op.onTimeout = { [unowned op] in SwiftCall.outcome { try onTimeout(op) } }
        }
        return op
    }
}

extension PluginContext {
    /// The queue called `name`, shared by every plugin of the host; made on first use, serial
    /// unless `maxConcurrent` says otherwise. Throws `QueueError` when `maxConcurrent`
    /// is below 1, or differs from the existing queue's.
    public func queue(_ name: String, maxConcurrent: Int? = nil) throws(QueueError) -> BackgroundQueue {
        BackgroundQueue(core: try parts.queues.queue(named: name, maxConcurrent: maxConcurrent), context: self)
    }

    /// The global queue (`lifeline.queue.background` in Lua).
    public var backgroundQueue: BackgroundQueue {
        // Cannot throw: the name is not empty and no maxConcurrent is asked for.
        BackgroundQueue(core: try! parts.queues.queue(named: HostQueue.backgroundName, maxConcurrent: nil), context: self)
    }

    /// Backgroundable's `inTheBackground { }`: synchronous code on the global queue.
    @discardableResult
    public func inTheBackground(_ body: @escaping () throws -> Void) -> QueueOperation? {
        backgroundQueue.addOperation { _ in try body() }
    }
}

extension QueueOperation {
    /// Waits until the operation has finished (or the app ended). Main executor only.
    public func waitUntilFinished() async {
        guard !isFinished else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in whenFinished { c.resume() } }
    }

    /// The handler name the watchdog and errors use; written out only when read.
    public var handlerName: HandlerName { name.map { .named("operation", $0) } ?? .numbered("operation", id) }
}

/// Swift async code: a task on the main executor.
final class SwiftAsyncBody: QueueOperationBody {
    private let work: @Sendable (QueueOperation) async throws -> Void
    private let context: PluginContext
    private var task: Task<Void, Never>?

    init(_ work: @escaping @Sendable (QueueOperation) async throws -> Void, context: PluginContext) {
        self.work = work
        self.context = context
    }

    func start(_ op: QueueOperation) {
        let work = self.work
        let context = self.context
        task = context.task {
            var failed = false
            do {
                try await work(op)
            } catch {
                if !op.isCancelled && !(error is CancellationError) {
                    failed = true
                    context.reportError(
                        message: "\(error)", traceback: "(Swift code: no traceback)", handler: op.handlerName.description)
                }
            }
            op.codeEnded(failed: failed)
        }
    }

    func stop(_ op: QueueOperation, because reason: QueueOperation.StopReason) { task?.cancel() }
    func finished(_ op: QueueOperation) { task = nil }
}

/// Swift code run at once.
final class SwiftSyncBody: QueueOperationBody {
    private let work: (QueueOperation) throws -> Void
    private let context: PluginContext

    init(_ work: @escaping (QueueOperation) throws -> Void, context: PluginContext) {
        self.work = work
        self.context = context
    }

    func start(_ op: QueueOperation) {
        var failed = false
        context.callNow(handler: op.handlerName, limit: .transition) {
            let outcome = SwiftCall.outcome { try work(op) }
            if case .raised = outcome { failed = true }
            return outcome
        }
        op.codeEnded(failed: failed)
    }

    func stop(_ op: QueueOperation, because reason: QueueOperation.StopReason) {}
    func finished(_ op: QueueOperation) {}
}
