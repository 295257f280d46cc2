/// What the system schedules for a plugin (BGTaskScheduler), and the completions of background
/// fetch, silent pushes and transfer events. Lua plugins reach it as `lifeline.tasks` and
/// `event.complete`; Swift plugins call it here.
extension PluginContext {
    private func running() throws(SystemTaskError) {
        guard isCurrent else { throw SystemTaskError("the app is not running", reason: .unavailable) }
    }

    /// Registering and submitting start new work: refused while a reload unloads the plugin.
    private func starting() throws(SystemTaskError) {
        try running()
        if isUnloading { throw SystemTaskError(PluginContext.unloadingMessage) }
    }

    /// Registers the handler for `identifier` (the bridge's form: each call reports its own
    /// outcome). Only while the app launches, once, for an identifier plugin.toml permits.
    package func registerTask(_ identifier: String, handler: SystemTaskHandler) throws(SystemTaskError) {
        try starting()
        try parts.system.register(ref, identifier: identifier, handler: handler)
    }

    /// Registers a Swift handler for `identifier`. It gets the task, which it must complete with
    /// `setTaskCompleted(success:)` before its time runs out; it may set the task's
    /// `expirationHandler`, called shortly before. A thrown error is a `pluginError`, and the task
    /// still needs completing.
    public func registerTask(_ identifier: String, handler: @escaping (SystemTask) throws -> Void) throws(SystemTaskError) {
        let box = TaskBox()
        try registerTask(
            identifier,
            handler: SystemTaskHandler(
                run: { [unowned self] info in
                    let task = SystemTask(info, context: self)
                    box.tasks[info.id] = task
                    return SwiftCall.outcome { try handler(task) }
                },
                expire: { info in
                    guard let expire = box.tasks[info.id]?.expirationHandler else { return .returned }
                    return SwiftCall.outcome(expire)
                },
                finished: { info in box.tasks[info.id] = nil }))
    }

    /// Schedules `request`; one pending under the same identifier is replaced, as on iOS.
    public func submitTask(_ request: SystemTaskRequest) throws(SystemTaskError) {
        try starting()
        try parts.system.submit(ref, request)
    }

    /// Cancels the pending request for `identifier`; false if there is none.
    @discardableResult
    public func cancelTask(_ identifier: String) throws(SystemTaskError) -> Bool {
        try running()
        return try parts.system.cancel(ref, identifier: identifier)
    }

    /// This plugin's pending requests, in the order they were submitted.
    public func pendingTasks() throws(SystemTaskError) -> [PendingSystemTask] {
        try running()
        return try parts.system.pending(ref)
    }

    /// Calls the completion of a `performFetch` or `didReceiveRemoteNotification` event. False,
    /// when it was called already or its time ran out.
    @discardableResult
    public func complete(_ event: LifecycleEvent, _ result: FetchResult) throws(SystemTaskError) -> Bool {
        guard let id = event.completion else { throw SystemTaskError("\(event.name.rawValue) has no completion") }
        return try complete(id, with: .fetch(result))
    }

    /// Calls the completion of a `didFinishTransferEvents` event: the plugin has handled the batch.
    @discardableResult
    public func completeTransferEvents(_ event: LifecycleEvent) throws(SystemTaskError) -> Bool {
        guard let id = event.completion else { throw SystemTaskError("\(event.name.rawValue) has no completion") }
        return try complete(id, with: .none)
    }

    /// Marks scheduled task `id` completed.
    @discardableResult
    public func setTaskCompleted(_ id: Int, success: Bool) throws(SystemTaskError) -> Bool {
        try complete(id, with: .task(success: success))
    }

    /// The bridge's form: completion `id` with what it is called with.
    package func complete(_ id: Int, with value: CompletionValue) throws(SystemTaskError) -> Bool {
        try running()
        return try parts.system.complete(ref, id: id, with: value)
    }
}

/// The Swift handlers' tasks, by id, while they run.
private final class TaskBox {
    var tasks: [Int: SystemTask] = [:]
}

/// A scheduled task as a Swift handler gets it (`BGTask`).
public final class SystemTask {
    public let id: Int
    public let identifier: String
    public let kind: SystemTaskKind
    /// Called shortly before the task's time runs out; it should complete the task.
    public var expirationHandler: (() throws -> Void)?
    /// Weak: a plugin may keep the task after its launch is over, and then completes nothing.
    private weak var context: PluginContext?

    init(_ info: SystemTaskInfo, context: PluginContext) {
        self.id = info.id
        self.identifier = info.identifier
        self.kind = info.kind
        self.context = context
    }

    /// Ends the task; false if it was completed already or its time ran out.
    @discardableResult
    public func setTaskCompleted(success: Bool) -> Bool {
        (try? context?.setTaskCompleted(id, success: success)) ?? false
    }
}
