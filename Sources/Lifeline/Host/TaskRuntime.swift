import Logging

/// Background tasks as they run (SPEC 4): their expiration handlers, and the budget's two
/// moments, expiration (T3, T4) and the end (T5). The rules themselves are `TaskRegistry`'s;
/// this carries out what it decides, on the host's clock.
///
/// Threading: main executor only.
final class TaskRuntime {
    private let session: AppSession
    private let caller: GuardedCaller
    /// The session's recorder. The session holds it for as long as this runtime lives; loaded
    /// through the session, it was retained and released around every clock read of a begin and
    /// an end, two atomic operations each.
    private let recorder: Recorder
    // Touched by every begin and end. TaskRegistry's methods never call out, and a handler is
    // copied out of the table before it is called: no access to either can overlap another, so the
    // runtime's check on each one is skipped.
    @exclusivity(unchecked) private var tasks: TaskRegistry
    @exclusivity(unchecked) private var expirationHandlers = IDSlots<ExpirationHandler>()

    /// A struct, not a tuple: a function stored as a generic value is kept in its most general
    /// form, and converting it allocated a thunk for every task with a handler.
    private struct ExpirationHandler {
        let plugin: Int
        let callback: PluginCallback
    }
    /// Code that runs under a task it did not begin (a Lua work under a task its plugin holds),
    /// told when the task expires and when it ends. Few and short-lived: looked at only when some
    /// are there, so a begin and an end cost nothing more.
    private var watchers: [Int: [any TaskWatcher]] = [:]
    private var budgetJobs: [MainExecutor.JobID] = []

    init(session: AppSession, caller: GuardedCaller) {
        self.session = session
        self.caller = caller
        self.recorder = session.recorder
        self.tasks = TaskRegistry(taskLimit: session.profile.taskLimit)
    }

    /// The active tasks, in the order they began.
    var active: [TaskRegistry.Task] { tasks.active }
    var activeCount: Int { tasks.activeCount }
    /// T2: seconds of background time left; `.greatestFiniteMagnitude` in the foreground.
    var backgroundTimeRemaining: Double { tasks.remaining(at: session.now) ?? .greatestFiniteMagnitude }

    /// T1: begins a task. Returns its id, or 0 when the plugin is over the limit (T8): the caller is
    /// stopped at once, and the termination is carried out when its call returns.
    func begin(_ plugin: PluginRef, name: String?, expirationHandler: PluginCallback?) -> Int {
        switch tasks.begin(plugin: plugin.name, name: name) {
        case .limitExceeded(let limit):
            caller.stop(plugin, because: .taskLimit(plugin: plugin.name, limit: limit, time: session.now))
            return 0
        case .began(let id, let expireNow):
            let now = session.now
            recorder.recordTask(.taskBegan, time: now, plugin: plugin.name, task: id, name: name)
            if let expirationHandler { expirationHandlers.append(id, ExpirationHandler(plugin: plugin.slot, callback: expirationHandler)) }
            if expireNow {
                // T3: never from inside beginBackgroundTask, so the caller already holds the id.
                session.scheduleAppJob { [unowned self] in
                    if let task = tasks.expireLate(id: id) { signalExpiration(task) }
                }
            }
            return id
        }
    }

    /// Gives active task `id` its expiration handler, when the handler could not be made before
    /// the task began (it needs what is made with the task's id).
    func setExpirationHandler(_ plugin: PluginRef, id: Int, _ handler: @escaping PluginCallback) {
        guard tasks.isActive(id) else { return }
        expirationHandlers.remove(id)
        expirationHandlers.insert(id, ExpirationHandler(plugin: plugin.slot, callback: handler))
    }

    /// The active task `id`, or nil.
    func task(_ id: Int) -> TaskRegistry.Task? { tasks.task(id: id) }

    /// Tells `watcher` when active task `id` expires and when it ends, until `unwatch`.
    func watch(_ id: Int, _ watcher: any TaskWatcher) {
        guard tasks.isActive(id) else { return }
        watchers[id, default: []].append(watcher)
    }

    func unwatch(_ id: Int, _ watcher: any TaskWatcher) {
        guard !watchers.isEmpty, var list = watchers[id] else { return }
        list.removeAll { $0 === watcher }
        watchers[id] = list.isEmpty ? nil : list
    }

    /// T6: ends a plugin's task; false, with iOS's warning, if it is unknown or ended.
    func end(_ plugin: PluginRef, id: Int) -> Bool {
        if end(id) { return true }
        let warning = "Can't end BackgroundTask: no background task exists with identifier \(id), "
            + "or it may have already been ended."
        session.logger.warning("\(warning)", metadata: ["plugin": "\(plugin.name)"])
        recorder.recordTask(.endUnknownTask, time: session.now, plugin: plugin.name, task: id)
        return false
    }

    /// Ends an active task and records it; false if it is not active.
    @discardableResult
    func end(_ id: Int) -> Bool {
        guard case .ended(let task, let expired) = tasks.end(id: id) else { return false }
        if expirationHandlers.count > 0 { expirationHandlers.remove(id) }
        let now = session.now
        recorder.recordTask(.taskEnded, time: now, plugin: task.plugin, task: id, name: task.name, expired: expired)
        if !watchers.isEmpty, let list = watchers.removeValue(forKey: id) {
            for watcher in list { watcher.taskEnded() }
        }
        return true
    }

    /// The ids of the plugin's active tasks, in the order they began.
    func activeIDs(of plugin: String) -> [Int] { tasks.active.filter { $0.plugin == plugin }.map(\.id) }

    /// Signals expiration to each of these tasks still active and not yet expiring, as at T3:
    /// a reload ends a plugin's generation this way, whatever the app's state.
    func expire(_ ids: [Int]) {
        for id in ids {
            guard session.appRunning else { return }
            if let task = tasks.expireLate(id: id) { signalExpiration(task) }
        }
    }

    /// Drops a plugin's tasks without recording their end (it failed to load), but those in
    /// `older`: its retiring generation's, which end with that generation.
    func remove(plugin name: String, keeping older: [Int] = []) {
        for task in tasks.active where task.plugin == name && !older.contains(task.id) {
            _ = tasks.end(id: task.id)
            expirationHandlers.remove(task.id)
            watchers[task.id] = nil
        }
    }

    /// Forgets every task and the budget (the app ended).
    func reset() {
        cancelBudget()
        tasks.reset()
        expirationHandlers.removeAll()
        watchers.removeAll()
    }

    // MARK: - The budget

    /// The app entered the background: the budget's moments are scheduled.
    func startBudget() {
        let profile = session.profile
        let period = tasks.enterBackground(
            at: session.now, budget: profile.budget, expirationLead: profile.expirationLead)
        cancelBudget()
        budgetJobs = [
            session.executor.schedule(at: period.expiresAt) { [unowned self] in expirationMoment() },
            session.executor.schedule(at: period.endsAt) { [unowned self] in budgetRanOut() },
        ]
    }

    /// A fresh budget in the background (a reload), where a task whose expiration was signalled
    /// keeps that mark: a retiring generation's tasks end `expired`, and no handler is called twice.
    func refreshBudget() {
        let marked = tasks.active.filter(\.expiring).map(\.id)
        startBudget()
        for id in marked { _ = tasks.expireLate(id: id) }
    }

    /// The app left the background: no budget any more.
    func stopBudget() {
        cancelBudget()
        tasks.leaveBackground()
    }

    /// Cancels the budget's moments (the app was suspended or ended).
    func cancelBudget() {
        for job in budgetJobs { session.executor.cancel(job) }
        budgetJobs.removeAll()
    }

    /// T3, T4: the expiration moment.
    private func expirationMoment() {
        guard session.appRunning else { return }
        for task in tasks.expire() {
            guard session.appRunning else { return }
            guard tasks.isActive(task.id) else { continue }
            signalExpiration(task)
        }
        if session.appRunning, tasks.anyExpiring { warnOfTasksLeftAfterExpiration(turnsLeft: 32) }
    }

    /// iOS's warning, only for a task that really outlives its handlers. A queue or
    /// `lifeline.background` ends its task on a later turn, once the work the expiration stopped has
    /// unwound; so the check waits until no job is left at this moment (a few turns at most).
    private func warnOfTasksLeftAfterExpiration(turnsLeft: Int) {
        session.scheduleAppJob { [unowned self] in
            if turnsLeft > 0, session.executor.hasJobDueNow {
                return warnOfTasksLeftAfterExpiration(turnsLeft: turnsLeft - 1)
            }
            for task in tasks.active where task.expiring {
                session.logger.warning(
                    "Background task still not ended after expiration handlers were called: \(Termination.label(task))")
            }
        }
    }

    private func signalExpiration(_ task: TaskRegistry.Task) {
        recorder.recordTask(
            .taskExpiring, time: session.now, plugin: task.plugin, task: task.id, name: task.name)
        // The work running under the task is stopped first, as a task's own work is: its handler
        // may end the task, which would stop that work as cancelled rather than expired.
        if !watchers.isEmpty, let list = watchers[task.id] {
            for watcher in list { watcher.taskExpiring() }
        }
        guard let handler = expirationHandlers[task.id] else { return }
        let window = caller.openWindow(limit: session.profile.expirationHandlerLimit, handler: "expiration handler")
        caller.call(handler.plugin, in: window, handler.callback)
    }

    /// T5: the budget is gone.
    private func budgetRanOut() {
        guard session.appRunning, tasks.activeCount > 0 else { return }
        session.request(.terminate(.budgetRanOut(tasks: tasks.active, time: session.now)))
    }
}

/// Code that runs under a background task it did not begin: a Lua work under a task its plugin
/// holds (`lifeline.background({task = id}, fn)`). The host tells it when the task expires (before
/// the task's own expiration handler runs) and when the task ends, whoever ends it.
///
/// Threading: main executor only.
package protocol TaskWatcher: AnyObject {
    /// The task's expiration was signalled (SPEC T3).
    func taskExpiring()
    /// The task ended.
    func taskEnded()
}
