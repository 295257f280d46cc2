/// The Swift async API: scoped background tasks, an `AsyncSequence` wrapper, and
/// waiting on the host's clock and network.
///
/// Async plugin code runs on the main executor: start it with `PluginContext.task`, whose jobs the
/// `HostTaskExecutor` runs as jobs of the main executor. Every method here must be called from
/// such code (or other nonisolated async code started there).

/// Thrown by `withBackgroundTask` and by a `BackgroundTaskSequence` when the background task
/// expired (SPEC T3).
public struct BackgroundTaskExpired: Error, Equatable, Sendable, CustomStringConvertible {
    /// The task's name.
    public let name: String
    /// The task's id.
    public let task: Int
    public var description: String { "background task \(task) '\(name)' expired" }
}

/// Thrown when a background task cannot begin: the app is not running (or has ended).
public struct BackgroundTaskUnavailable: Error, Equatable, Sendable, CustomStringConvertible {
    public let name: String
    public var description: String { "background task '\(name)' could not begin: the app is not running" }
}

extension PluginContext {
    /// Starts async work on the main executor. It is cancelled when the app ends.
    ///
    /// ```swift
    /// context.on(.didEnterBackground) { _ in
    ///     context.task {
    ///         _ = try? await context.withBackgroundTask("sync") {
    ///             try await context.http(HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/sync"))
    ///         }
    ///     }
    /// }
    /// ```
    @discardableResult
    public func task(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let id = nextSwiftTaskID
        nextSwiftTaskID += 1
        let task = Task(executorPreference: taskExecutor) { [self] in
            await operation()
            swiftTasks[id] = nil
        }
        if isCurrent { swiftTasks[id] = task } else { task.cancel() }
        return task
    }

    /// Cancels the Swift tasks still running: the app ended.
    func cancelSwiftTasks() {
        for (_, task) in swiftTasks.sorted(by: { $0.key < $1.key }) { task.cancel() }
        swiftTasks.removeAll()
    }

    /// Runs `operation` under a background task that ends on every path: it returns, throws, is
    /// cancelled (cancelling the caller cancels the operation), or expires. On expiration the
    /// operation is cancelled (the task this code runs in is marked cancelled) and the call throws
    /// `BackgroundTaskExpired`, whatever the operation returns. An operation that ignores
    /// cancellation keeps the task until the budget runs out (T5).
    public func withBackgroundTask<T>(
        _ name: String, operation: () async throws -> T
    ) async throws -> T {
        let scope = ExpiryScope()
        scope.current = withUnsafeCurrentTask { $0 }
        let id = beginBackgroundTask(name: name) {
            scope.expire()
            return .returned
        }
        guard id != 0 else { throw BackgroundTaskUnavailable(name: name) }
        defer {
            scope.current = nil
            endBackgroundTask(id)
        }
        do {
            let value = try await operation()
            if scope.expired { throw BackgroundTaskExpired(name: name, task: id) }
            return value
        } catch {
            if scope.expired { throw BackgroundTaskExpired(name: name, task: id) }
            throw error
        }
    }

    /// Waits `seconds` on the host's clock (virtual in simulate). Throws `CancellationError` when
    /// the task is cancelled or the app ends.
    public func sleep(seconds: Double) async throws {
        try await hostWait { (complete: @escaping (Result<Void, any Error>) -> Void) in
            sleep(seconds) { slept in complete(slept ? .success(()) : .failure(CancellationError())) }
        }
    }

    /// Makes an HTTP request through the host's transport, under the plugin's network permissions
    /// (the scripted network in simulate). Throws `HTTPFailure`; cancelling the task cancels the
    /// request (`CancellationError`).
    public func http(_ request: HTTPRequest) async throws -> HTTPResponse {
        try await hostWait { (complete: @escaping (Result<HTTPResponse, any Error>) -> Void) in
            http(request) { result in complete(result.mapError { $0 }) }
        }
    }

    /// Bridges a host wait to async: starts it, and cancels it when the task is cancelled.
    private func hostWait<T: Sendable>(
        _ start: (@escaping (Result<T, any Error>) -> Void) -> Int
    ) async throws -> T {
        try Task.checkCancellation()
        let wait = HostWaitState<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                wait.continuation = continuation
                let id = start { result in wait.finish(result) }
                if id == 0 {
                    wait.finish(.failure(CancellationError()))  // the app is not running
                } else {
                    wait.id = id
                }
            }
        } onCancel: { [self] in
            // Any thread: hand the cancel to the main executor, where the wait lives.
            clock.post { [self] in
                if let id = wait.id { cancelWait(id, recording: .cancelled) }
                wait.finish(.failure(CancellationError()))
            }
        }
    }
}

extension PluginContext {
    /// Active task `id`, if this plugin began it (nil if not, or if it ended).
    package func heldTask(_ id: Int) -> TaskRegistry.Task? {
        guard isCurrent, let task = parts.tasks.task(id), task.plugin == pluginName else { return nil }
        return task
    }

    /// Tells `watcher` when active task `id` expires and when it ends, until `unwatchTask`.
    package func watchTask(_ id: Int, _ watcher: any TaskWatcher) {
        if isCurrent { parts.tasks.watch(id, watcher) }
    }

    package func unwatchTask(_ id: Int, _ watcher: any TaskWatcher) {
        if isCurrent { parts.tasks.unwatch(id, watcher) }
    }
}

/// A wait's continuation, resumed once: by the result or by a cancel, whichever comes first.
/// Main executor only.
private final class HostWaitState<T: Sendable>: @unchecked Sendable {
    var id: Int?
    var continuation: CheckedContinuation<T, any Error>?

    func finish(_ result: Result<T, any Error>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }
}

/// What an expiration handler needs to cancel the code running under a task.
final class ExpiryScope: @unchecked Sendable {
    /// The task the operation runs in, while it runs.
    var current: UnsafeCurrentTask?
    private(set) var expired = false

    func expire() {
        expired = true
        current?.cancel()
    }
}

/// An `AsyncSequence` whose iteration runs under a background task: the task begins at the first
/// `next()` and ends when iteration finishes, throws, or is abandoned (the iterator is dropped, as
/// when the loop breaks or its task is cancelled). On expiration, `next()` throws
/// `BackgroundTaskExpired`. This is the lazily composable form of `withBackgroundTask`.
///
/// ```swift
/// for try await batch in batches.withBackgroundTask("upload", in: context) {
///     _ = try await context.http(batch)
/// }
/// ```
public struct BackgroundTaskSequence<Base: AsyncSequence>: AsyncSequence {
    public typealias Element = Base.Element
    let base: Base
    let name: String
    let context: PluginContext

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), scope: SequenceScope(context: context, name: name))
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let scope: SequenceScope

        public mutating func next() async throws -> Element? {
            guard !scope.finished else { return nil }
            try scope.beginIfNeeded()
            if scope.expired { throw scope.end(expired: true)! }
            // Kept until the iteration ends, not only while `next` runs: an expiration that lands
            // while the loop's body awaits must cancel the body too.
            scope.expiry.current = withUnsafeCurrentTask { $0 }
            do {
                guard let element = try await base.next() else {
                    if let error = scope.end(expired: scope.expired) { throw error }
                    return nil
                }
                if scope.expired { throw scope.end(expired: true)! }
                return element
            } catch {
                if let expired = scope.end(expired: scope.expired) { throw expired }
                throw error
            }
        }
    }
}

/// The background task of one iteration. Main executor only, but for `deinit`.
public final class SequenceScope: @unchecked Sendable {
    let context: PluginContext
    let name: String
    let expiry = ExpiryScope()
    private var id: Int?
    private(set) var finished = false

    init(context: PluginContext, name: String) {
        self.context = context
        self.name = name
    }

    var expired: Bool { expiry.expired }

    func beginIfNeeded() throws {
        guard id == nil else { return }
        let expiry = self.expiry
        let id = context.beginBackgroundTask(name: name) {
            expiry.expire()
            return .returned
        }
        guard id != 0 else {
            finished = true
            throw BackgroundTaskUnavailable(name: name)
        }
        self.id = id
    }

    /// Ends the task; returns the expiration error to throw when it expired.
    func end(expired: Bool) -> BackgroundTaskExpired? {
        finished = true
        expiry.current = nil
        guard let id else { return nil }
        self.id = nil
        context.endBackgroundTask(id)
        return expired ? BackgroundTaskExpired(name: name, task: id) : nil
    }

    deinit {
        // Abandoned mid-iteration: end the task on the main executor.
        guard let id else { return }
        let context = self.context
        context.clock.post { context.endBackgroundTask(id) }
    }
}

extension AsyncSequence {
    /// Iterates this sequence under a background task named `name` (see `BackgroundTaskSequence`).
    public func withBackgroundTask(_ name: String, in context: PluginContext) -> BackgroundTaskSequence<Self> {
        BackgroundTaskSequence(base: self, name: name, context: context)
    }
}
