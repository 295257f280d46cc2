/// What the system does to the app beyond its lifecycle: background fetch, silent pushes, the
/// tasks plugins schedule (BGTaskScheduler), and the completions each of them hands a plugin.
///
/// The requests are the host's, not the app's: they outlive a launch, and the host launches the
/// app in the background, or wakes it from suspension, to run one. A completion the plugin has not
/// called keeps the app awake; a fetch's, a push's or a task's that runs out of time terminates
/// the app (`completionTimeout`), a task's expiration handler being called first; the completion
/// of `didFinishTransferEvents` that runs out only lets the app be suspended.
///
/// Nothing here calls plugin code from inside plugin code: a submit, a step or a change of the
/// device's conditions asks for an evaluation, which runs as a host job of its own.
///
/// Threading: main executor only.
final class SystemWork {
    private let session: AppSession
    private let subscriptions: SubscriptionTable
    private let caller: GuardedCaller
    private let policy: TaskPolicy
    /// The user force-quit the app: as on iOS, the system launches it for nothing until the user
    /// launches it again.
    private var userQuit = false

    private typealias Request = TaskRequests.Request
    /// Pending requests, and the rules of when each may run.
    private var requests = TaskRequests()
    /// The one host job that evaluates the requests when the next one falls due.
    private var wakeJob: (id: MainExecutor.JobID, time: HostTime)?
    private var evaluationQueued = false

    /// This launch's task handlers, by plugin name, then identifier.
    private var handlers: [String: [String: (plugin: Int, handler: SystemTaskHandler)]] = [:]

    enum CompletionKind: Equatable {
        case fetch
        case push
        case transferEvents
        case task(SystemTaskInfo)
    }
    private struct Completion {
        var plugin: Int
        var pluginName: String
        var kind: CompletionKind
        var jobs: [MainExecutor.JobID]
        var handler: SystemTaskHandler?
        /// Its expiration handler was called: a reload did it before its time.
        var expired = false
    }
    /// Completions not called yet, by id: each keeps the app awake.
    private var completions: [Int: Completion] = [:]
    /// Unique for the host's life, so a stale completion never completes a newer one.
    private var nextCompletion = 1

    /// Where pending requests are kept for a host started again; nil without a state dir.
    private var ledger: SystemTaskLedger?
    /// Seconds since 1970 at the host's start: the ledger keeps wall-clock times.
    private let epochAtStart: Double

    init(
        session: AppSession, subscriptions: SubscriptionTable, caller: GuardedCaller, policy: TaskPolicy,
        database: StateDatabase?, epochAtStart: Double
    ) {
        self.session = session
        self.subscriptions = subscriptions
        self.caller = caller
        self.policy = policy
        self.epochAtStart = epochAtStart
        guard let database else { return }
        let ledger = SystemTaskLedger(database: database)
        self.ledger = ledger
        // A temporary database that was never opened holds nothing.
        guard database.mayHoldData else { return }
        do {
            for saved in try ledger.all() {
                let earliest = HostTime.seconds(max(0, saved.earliest - epochAtStart))
                requests.restore(Request(plugin: saved.plugin, request: saved.request, earliest: earliest, submitted: .zero))
            }
        } catch {
            session.logger.error("cannot read the pending task requests: \(error.message)")
        }
        guard !requests.isEmpty else { return }
        // One tick after the start, so a launch the run begins with comes first.
        session.executor.schedule(at: session.now.adding(seconds: Units.clockResolution)) { [unowned self] in
            queueEvaluation()
        }
    }

    /// Keeps the ledger in step with `requests`; a failure is logged, and the request still
    /// runs in this host.
    private func persist(_ r: Request) {
        do {
            try ledger?.save(
                SystemTaskLedger.Saved(plugin: r.plugin, request: r.request, earliest: epochAtStart + r.earliest.seconds))
        } catch {
            session.logger.error("cannot save the task request '\(r.request.identifier)': \(error.message)")
        }
    }

    private func forget(_ r: Request) {
        do {
            try ledger?.remove(plugin: r.plugin, identifier: r.request.identifier)
        } catch {
            session.logger.error("cannot remove the task request '\(r.request.identifier)': \(error.message)")
        }
    }

    /// Whether a completion is still to be called: the app is not suspended meanwhile.
    var holdsAppAwake: Bool { !completions.isEmpty }

    // MARK: - Steps

    /// Carries out what the system does (`Step.isSystemEvent`).
    func perform(_ step: Step) {
        switch step {
        case .fetch: deliver(.performFetch, payload: nil)
        case .push(let payload): deliver(.didReceiveRemoteNotification, payload: payload)
        case .runTasks(let filter):
            let picked = requests.force(filter)
            session.record(.runTasks, ("filter", .string(filter.description)), ("picked", .int(Int64(picked))))
            queueEvaluation()
        case .charging(let on):
            session.device.charging = on
            session.record(.charging, ("on", .bool(on)))
            queueEvaluation()
        case .network(let on):
            session.device.networkAvailable = on
            session.record(.network, ("on", .bool(on)))
            queueEvaluation()
        default:
            break
        }
    }

    /// What a lifecycle step means here: the app's leaving the foreground or its end may let a
    /// request run; a force-quit stops the system launching it until the user does.
    func stepped(_ step: Step) {
        switch step {
        case .forceQuit: userQuit = true
        case .launch: userQuit = false
        default: break
        }
        if !requests.isEmpty { queueEvaluation() }
    }

    // MARK: - Fetch and silent pushes

    /// Sends `performFetch` or `didReceiveRemoteNotification` to every plugin that handles it,
    /// each with a completion of its own. The app is launched in the background, or woken, for
    /// it; a fetch is not made while the app is in the foreground.
    private func deliver(_ name: LifecycleEventName, payload: String?) {
        if name == .performFetch, session.appRunning, session.visibleState == .active || session.visibleState == .inactive {
            return session.record(ReportEventName(name), ("dropped", .bool(true)))
        }
        // As on iOS, a force-quit app is launched for neither until the user launches it again.
        if userQuit, !session.appRunning { return session.record(ReportEventName(name), ("dropped", .bool(true))) }
        wake(name == .performFetch ? "fetch" : "push")
        guard session.isRunning else { return }
        session.record(ReportEventName(name))
        let list = subscriptions.subscriptions(to: name)
        guard !list.isEmpty else { return }
        let window = caller.openWindow(limit: session.profile.limit(for: name), handler: HandlerName(name.rawValue))
        var completionOf: [Int: Int] = [:]
        for subscription in list {
            guard session.isRunning else { return }
            if subscription.cancelled { continue }
            let id = completionOf[subscription.plugin] ?? open(
                name == .performFetch ? .fetch : .push, plugin: subscription.plugin, limit: session.profile.fetchLimit)
            completionOf[subscription.plugin] = id
            let event = LifecycleEvent(
                name: name, time: session.now.seconds, state: session.visibleState, completion: id, payload: payload)
            caller.call(subscription.plugin, in: window) { subscription.handler(event) }
        }
    }

    /// A completion for `didFinishTransferEvents`, when plugin `index` handles that event: the app
    /// stays awake until it is called or the profile's limit passes.
    func transferEventsCompletion(plugin: PluginRef) -> Int? {
        guard !subscriptions.subscriptions(to: .didFinishTransferEvents, plugin: plugin.slot).isEmpty else { return nil }
        return open(.transferEvents, plugin: plugin.slot, limit: session.profile.transferEventsLimit)
    }

    /// Opens a completion for plugin `index`, due in `limit` seconds.
    private func open(_ kind: CompletionKind, plugin index: Int, limit: Double, id: Int? = nil) -> Int {
        let id = id ?? takeID()
        var jobs: [MainExecutor.JobID] = []
        // One reading of the clock: on the real clock a second one is later, and the expiration
        // could then fall after the deadline.
        let now = session.now
        let due = now.adding(seconds: limit)
        if case .task = kind {
            let lead = session.profile.expirationLead
            let expiring = limit > lead ? now.adding(seconds: limit - lead) : now
            jobs.append(session.scheduleAppJob(at: expiring) { [unowned self] in expire(id) })
        }
        jobs.append(session.scheduleAppJob(at: due) { [unowned self] in timedOut(id) })
        completions[id] = Completion(
            plugin: index, pluginName: session.ref(index).name, kind: kind, jobs: jobs)
        return id
    }

    private func takeID() -> Int {
        defer { nextCompletion += 1 }
        return nextCompletion
    }

    /// Calls completion `id` for `plugin`. False, with a warning, when it was called
    /// already or ran out; throws when it is not the plugin's, or the value is not its kind's.
    func complete(_ plugin: PluginRef, id: Int, with value: CompletionValue) throws(SystemTaskError) -> Bool {
        guard let completion = completions[id] else {
            guard id > 0, id < nextCompletion else { throw SystemTaskError("there is no completion \(id)") }
            // No warning: a plugin calling it in a loop would flood the host's log.
            return false
        }
        guard completion.pluginName == plugin.name else {
            throw SystemTaskError("completion \(id) belongs to plugin '\(completion.pluginName)'")
        }
        switch (completion.kind, value) {
        case (.fetch, .fetch(let result)), (.push, .fetch(let result)):
            finish(id)
            session.record(
                completion.kind == .fetch ? .fetchCompleted : .pushCompleted, ("plugin", .string(plugin.name)),
                ("result", .string(result.rawValue)))
        case (.task(let task), .task(let success)):
            finish(id)
            recordTask(.systemTaskCompleted, completion.pluginName, task, ("success", .bool(success)))
        case (.transferEvents, _):
            finish(id)
            session.record(.transferEventsCompleted, ("plugin", .string(plugin.name)))
        case (.fetch, _), (.push, _):
            throw SystemTaskError("the completion takes a result: \(FetchResult.names)")
        case (.task, _):
            throw SystemTaskError("setTaskCompleted takes whether the task succeeded: true or false")
        }
        return true
    }

    /// Drops completion `id` and its deadlines.
    private func finish(_ id: Int) {
        guard let completion = completions.removeValue(forKey: id) else { return }
        for job in completion.jobs { session.executor.cancel(job) }
        if case .task(let task) = completion.kind { completion.handler?.finished(task) }
    }

    /// A task's time is nearly out: its expiration handler is called.
    private func expire(_ id: Int) {
        guard let completion = completions[id], case .task(let task) = completion.kind, session.isRunning,
            !completion.expired
        else { return }
        completions[id]?.expired = true
        recordTask(.systemTaskExpiring, completion.pluginName, task)
        guard let handler = completion.handler else { return }
        let window = caller.openWindow(limit: session.profile.expirationHandlerLimit, handler: "expirationHandler")
        caller.call(completion.plugin, in: window) { handler.expire(task) }
    }

    /// A completion was not called in time.
    private func timedOut(_ id: Int) {
        guard let completion = completions[id], session.isRunning else { return }
        let plugin = completion.pluginName
        switch completion.kind {
        case .transferEvents:
            finish(id)
            // As on iOS, the app is not killed for it: it is suspended once nothing else holds it.
            session.record(.transferEventsTimedOut, ("plugin", .string(plugin)))
        case .fetch, .push:
            finish(id)
            let what: LifecycleEventName = completion.kind == .fetch ? .performFetch : .didReceiveRemoteNotification
            session.request(
                .terminate(
                    .completionTimeout(
                        plugin: plugin, event: what.rawValue, limit: session.profile.fetchLimit, time: session.now)))
        case .task(let task):
            finish(id)
            session.request(
                .terminate(
                    .taskTimeout(
                        plugin: plugin, kind: task.kind.rawValue, identifier: task.identifier,
                        limit: session.profile.limit(for: task.kind), time: session.now)))
        }
    }

    // MARK: - Scheduled tasks

    private func checkAvailable() throws(SystemTaskError) {
        guard session.profile.hasTaskScheduler else {
            throw SystemTaskError(
                "BGTaskScheduler came with iOS 13, and profile \(session.profile.name) lacks it", reason: .unavailable)
        }
    }

    private func checkPermitted(_ plugin: PluginRef, _ identifier: String) throws(SystemTaskError) {
        guard session.taskIdentifiers(of: plugin).contains(identifier) else {
            throw SystemTaskError(
                "'\(identifier)' is not a permitted identifier; list it in plugin.toml: [background] identifiers = "
                    + "[\"\(identifier)\"]", reason: .notPermitted)
        }
    }

    /// Registers the handler for `identifier`: only while the app launches (the plugin loading, or
    /// didFinishLaunching's handlers), once per identifier, and for a permitted identifier.
    func register(_ plugin: PluginRef, identifier: String, handler: SystemTaskHandler) throws(SystemTaskError) {
        try checkAvailable()
        guard session.phase == .launching else {
            throw SystemTaskError(
                "'\(identifier)' is registered after the app finished launching; register handlers while "
                    + "the plugin loads")
        }
        try checkPermitted(plugin, identifier)
        guard handlers[plugin.name]?[identifier] == nil else {
            throw SystemTaskError("a handler for '\(identifier)' is registered already")
        }
        handlers[plugin.name, default: [:]][identifier] = (plugin.slot, handler)
        // Requests that came due while no handler could run may run now that one can.
        if !requests.isEmpty { queueEvaluation() }
    }

    /// Schedules `request` for `plugin`. One with the same identifier is replaced, as on
    /// iOS; otherwise the plugin may have one refresh and ten processing requests pending.
    func submit(_ ref: PluginRef, _ request: SystemTaskRequest) throws(SystemTaskError) {
        try checkAvailable()
        try checkPermitted(ref, request.identifier)
        let plugin = ref.name
        let (entry, replaced) = try requests.submit(request, plugin: plugin, now: session.now)
        persist(entry)
        session.record(
            .systemTaskSubmitted, ("plugin", .string(plugin)), ("identifier", .string(request.identifier)),
            ("kind", .string(request.kind.rawValue)), ("earliestBegin", .number(ReportNumber.seconds(entry.earliest))),
            ("requiresNetwork", .bool(request.requiresNetwork)), ("requiresPower", .bool(request.requiresPower)),
            ("replaced", .bool(replaced)))
        queueEvaluation()
    }

    /// Cancels the plugin's pending request for `identifier`; false if there is none.
    func cancel(_ plugin: PluginRef, identifier: String) throws(SystemTaskError) -> Bool {
        try checkAvailable()
        guard let cancelled = requests.cancel(plugin: plugin.name, identifier: identifier) else { return false }
        forget(cancelled)
        session.record(.systemTaskCancelled, ("plugin", .string(plugin.name)), ("identifier", .string(identifier)))
        return true
    }

    /// The plugin's pending requests, in the order they were submitted.
    func pending(_ plugin: PluginRef) throws(SystemTaskError) -> [PendingSystemTask] {
        try checkAvailable()
        return requests.all.filter { $0.plugin == plugin.name }.map {
            PendingSystemTask(request: $0.request, earliestBegin: $0.earliest.seconds)
        }
    }

    /// Launches the app in the background when it is not running, or wakes it when suspended,
    /// saying why; the app may still not run afterwards (a plugin failed to load).
    private func wake(_ reason: String) { session.request(.wake(reason: reason)) }

    /// Evaluates the requests on a turn of its own, at the time now.
    private func queueEvaluation() {
        guard !evaluationQueued else { return }
        evaluationQueued = true
        session.executor.schedule(at: session.now) { [unowned self] in
            evaluationQueued = false
            evaluate()
        }
    }

    /// Starts the first request that is due, whose conditions hold, while the app is not in the
    /// foreground (another evaluation follows for the rest); then sets the wake-up for the next
    /// one due.
    private func evaluate() {
        guard !session.isStopped else { return }
        let foreground = session.appRunning && (session.visibleState == .active || session.visibleState == .inactive)
        let (ready, more, next, deferred) = requests.takeReady(
            now: session.now, policy: policy,
            conditions: TaskRequests.Conditions(
                foreground: foreground, userQuit: userQuit, networkAvailable: session.device.networkAvailable,
                charging: session.device.charging))
        // Why the others did not run, once per request and reason (`TaskRequests.takeReady`).
        for d in deferred {
            var fields: [(String, JSONValue)] = [
                ("plugin", .string(d.request.plugin)), ("identifier", .string(d.request.request.identifier)),
                ("reason", .string(d.reason.rawValue)),
            ]
            if let until = d.until { fields.append(("until", .number(ReportNumber.seconds(until)))) }
            session.record(.taskDeferred, fields)
        }
        if let job = wakeJob, job.time != next {
            session.executor.cancel(job.id)
            wakeJob = nil
        }
        if let next, wakeJob == nil {
            let id = session.executor.schedule(at: next) { [unowned self] in
                wakeJob = nil
                evaluate()
            }
            wakeJob = (id, next)
        }
        guard let ready else { return }
        if more { queueEvaluation() }
        start(ready)
    }

    /// Runs one request: the app is launched or woken for it, then its plugin's handler gets the
    /// task. A request whose plugin registered no handler in this launch is dropped, as iOS drops a
    /// launch for an identifier with no handler.
    private func start(_ r: Request) {
        wake("systemTask")
        let request = r.request
        // An app that could not run (a plugin failed to load; a rule ended it) leaves the request
        // in the state dir for a host started again.
        guard session.isRunning else { return }
        // Once run, a request is gone: a plugin that wants another submits again.
        forget(r)
        guard let registered = handlers[r.plugin]?[request.identifier] else {
            return session.record(
                .systemTaskDropped, ("plugin", .string(r.plugin)), ("identifier", .string(request.identifier)),
                ("reason", .string("noHandler")))
        }
        let task = SystemTaskInfo(id: takeID(), identifier: request.identifier, kind: request.kind)
        _ = open(.task(task), plugin: registered.plugin, limit: session.profile.limit(for: request.kind), id: task.id)
        completions[task.id]?.handler = registered.handler
        recordTask(.systemTaskStarted, r.plugin, task)
        let window = caller.openWindow(limit: session.profile.transitionLimit, handler: HandlerName("task \(request.identifier)"))
        caller.call(registered.plugin, in: window) { registered.handler.run(task) }
    }

    private func recordTask(
        _ event: ReportEventName, _ plugin: String, _ task: SystemTaskInfo, _ extra: (String, JSONValue)...
    ) {
        session.record(
            event,
            [("plugin", .string(plugin)), ("identifier", .string(task.identifier)), ("kind", .string(task.kind.rawValue)),
                ("task", .int(Int64(task.id)))] + extra)
    }

    // MARK: - The app's end

    /// Forgets one plugin's handlers and completions (it failed to load).
    func remove(_ plugin: PluginRef) {
        handlers[plugin.name] = nil
        dropCompletions(of: plugin)
    }

    /// A reload ends `plugin`'s generation: its handlers go now, so the new generation can
    /// register its own, and its scheduled tasks under way get their expiration handlers, as its
    /// background tasks do. Its completions stay open, for its code to call, until it is closed
    /// (`dropCompletions`).
    func retire(_ plugin: PluginRef) {
        handlers[plugin.name] = nil
        for id in completions.keys.sorted() where completions[id]?.plugin == plugin.slot { expire(id) }
    }

    /// Drops the completions `plugin`'s code did not call: it is closed.
    func dropCompletions(of plugin: PluginRef) {
        for (id, c) in completions where c.plugin == plugin.slot { finish(id) }
    }

    /// Whether `plugin` has a completion open.
    func holdsCompletions(_ plugin: PluginRef) -> Bool { completions.values.contains { $0.plugin == plugin.slot } }

    /// The app ended: this launch's handlers and completions go; the requests stay.
    func appEnded() {
        handlers.removeAll()
        for id in completions.keys.sorted() { finish(id) }
        if !requests.isEmpty { queueEvaluation() }
    }
}

/// What a completion is called with.
package enum CompletionValue {
    case fetch(FetchResult)
    case task(success: Bool)
    case none
}
