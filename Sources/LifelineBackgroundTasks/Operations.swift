// Foundation's Operation and OperationQueue, run on the main executor on the host's clock. They
// shadow Foundation's classes for code that imports LifelineBackgroundTasks: Foundation's run
// operations on threads of their own, against the wall clock, with `@Sendable` blocks, so a
// `completionBlock` that completes a `BGTask` neither compiles under Swift 6 nor gives the same
// report twice.
//
// An operation starts on a later turn of the main executor, once it is ready (its dependencies
// finished); a synchronous one (`main()`) finishes when `main()` returns; an asynchronous one
// (`isAsynchronous` true, `start()` overridden) finishes when it says so with
// `willChangeValue(forKey: "isFinished")` / `didChangeValue(forKey: "isFinished")`, as Apple's
// documentation tells such an operation to. The completion block runs on the turn after the
// operation finished. The app is not suspended while an operation waits to start or a completion
// block to run. Work takes host time only by waiting for something: a timer
// (`DispatchQueue.main.asyncAfter`), a response.
//
// Threading: main executor only.

/// One unit of work.
open class Operation {
    private var cancelledFlag = false
    private var executingFlag = false
    private var finishedFlag = false
    weak var queue: OperationQueue?
    public private(set) var dependencies: [Operation] = []
    /// Runs on the turn after the operation finished (cancelled or not).
    open var completionBlock: (() -> Void)?
    open var name: String?
    /// Kept, and ignored: every operation runs on the main executor.
    open var qualityOfService: QualityOfService = .default

    public init() {}

    /// Runs the operation: `main()` unless it was cancelled before it started.
    open func start() {
        guard !isCancelled else {
            finishedFlag = true
            queue?.operationDidFinish(self)
            return
        }
        executingFlag = true
        main()
        executingFlag = false
        finishedFlag = true
        queue?.operationDidFinish(self)
    }

    /// The work of a synchronous operation.
    open func main() {}

    /// Marks the operation cancelled. One not started yet finishes without running; one running
    /// should look at `isCancelled` and stop.
    open func cancel() {
        guard !cancelledFlag else { return }
        cancelledFlag = true
        queue?.operationDidChange()
    }

    open var isCancelled: Bool { cancelledFlag }
    open var isExecuting: Bool { executingFlag }
    open var isFinished: Bool { finishedFlag }
    open var isAsynchronous: Bool { false }
    open var isConcurrent: Bool { isAsynchronous }
    /// Whether it may start: its dependencies finished (or it was cancelled).
    open var isReady: Bool { isCancelled || dependencies.allSatisfy(\.isFinished) }

    open func addDependency(_ op: Operation) { dependencies.append(op) }
    open func removeDependency(_ op: Operation) { dependencies.removeAll { $0 === op } }

    /// For asynchronous operations, as with Foundation's key-value observing.
    open func willChangeValue(forKey key: String) {}

    /// `didChangeValue(forKey: "isFinished")` with `isFinished` true tells the queue the operation
    /// is over.
    open func didChangeValue(forKey key: String) {
        if key == "isFinished" || key == "finished", isFinished { queue?.operationDidFinish(self) }
        if key == "isReady" || key == "ready" { queue?.operationDidChange() }
    }
}

/// An operation that runs blocks.
open class BlockOperation: Operation {
    public private(set) var executionBlocks: [() -> Void] = []

    public override init() {}

    public convenience init(block: @escaping () -> Void) {
        self.init()
        executionBlocks = [block]
    }

    open func addExecutionBlock(_ block: @escaping () -> Void) { executionBlocks.append(block) }

    open override func main() {
        for block in executionBlocks { block() }
    }
}

/// A queue that starts its operations when they are ready, at most
/// `maxConcurrentOperationCount` at a time, on the main executor, for the plugin that made it.
/// A queue made outside plugin code runs nothing.
open class OperationQueue {
    public static let defaultMaxConcurrentOperationCount = -1

    open var maxConcurrentOperationCount = OperationQueue.defaultMaxConcurrentOperationCount {
        didSet { operationDidChange() }
    }
    open var name: String?
    /// Kept, and ignored: every operation runs on the main executor.
    open var qualityOfService: QualityOfService = .default
    /// While true, no new operation starts.
    open var isSuspended = false {
        didSet { operationDidChange() }
    }
    /// The operations not finished yet, in the order they were added.
    public private(set) var operations: [Operation] = []
    open var operationCount: Int { operations.count }

    private weak var app: AppleApp?
    private var startQueued = false

    public init() { app = AppleApp.current }

    /// The queue of `app`'s main executor: one operation at a time, as Foundation's main queue.
    init(mainOf app: AppleApp) {
        self.app = app
        name = "NSOperationQueue Main Queue"
        maxConcurrentOperationCount = 1
    }

    /// The running plugin's main queue: its operations run on later turns of the main executor,
    /// one at a time. Each plugin has its own, at each launch. Read with no plugin's code running,
    /// it is a queue that runs nothing.
    open class var main: OperationQueue { AppleApp.current?.mainOperationQueue ?? OperationQueue() }

    /// The queue whose operation is running, or the running plugin's main queue, as on iOS's main
    /// thread; nil with no plugin's code running.
    open class var current: OperationQueue? { runningSlot.value ?? AppleApp.current?.mainOperationQueue }
    private static let runningSlot = ThreadSlot<OperationQueue>()

    open func addOperation(_ op: Operation) {
        guard !op.isFinished, op.queue == nil else { return }
        op.queue = self
        operations.append(op)
        operationDidChange()
    }

    /// Adds `ops`. `waitUntilFinished: true` cannot block the main executor; the operations are
    /// added and the call returns at once, with a line in the plugin's log.
    open func addOperations(_ ops: [Operation], waitUntilFinished wait: Bool) {
        if wait {
            app?.context?.logger.warning("OperationQueue cannot wait on the main executor; the operations run later")
        }
        for op in ops { addOperation(op) }
    }

    open func addOperation(_ block: @escaping () -> Void) { addOperation(BlockOperation(block: block)) }

    /// Cancels every operation of the queue: those not started finish without running, and each
    /// operation's completion block still runs.
    open func cancelAllOperations() {
        for op in operations { op.cancel() }
    }

    /// Something changed that may let an operation start: look on the next turn.
    func operationDidChange() {
        guard !startQueued, let app else { return }
        startQueued = true
        app.soon { [self] in
            startQueued = false
            startReady()
        }
    }

    private func startReady() {
        guard !isSuspended else { return }
        let limit = maxConcurrentOperationCount < 0 ? Int.max : maxConcurrentOperationCount
        for op in operations where !op.isExecuting && !op.isFinished && op.isReady {
            if operations.count(where: \.isExecuting) >= limit { break }
            let saved = OperationQueue.runningSlot.value
            OperationQueue.runningSlot.value = self
            op.start()
            OperationQueue.runningSlot.value = saved
        }
    }

    func operationDidFinish(_ op: Operation) {
        guard let index = operations.firstIndex(where: { $0 === op }) else { return }
        operations.remove(at: index)
        if let block = op.completionBlock, let app { app.soon(block) }
        operationDidChange()
    }
}
