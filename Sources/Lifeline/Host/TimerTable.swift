/// Plugins' one-shot timers (`lifeline.after`, `context.after`): app jobs that call plugin code
/// under the watchdog when they fire.
///
/// Threading: main executor only.
final class TimerTable {
    private let session: AppSession
    private let caller: GuardedCaller
    /// The timers that have not fired, by id.
    private var timers = IDSlots<(plugin: Int, job: MainExecutor.JobID)>()
    private var nextID = 1

    init(session: AppSession, caller: GuardedCaller) {
        self.session = session
        self.caller = caller
    }

    func start(plugin index: Int, after seconds: Double, callback: @escaping PluginCallback) -> Int {
        let id = nextID
        nextID += 1
        // One method call, so `self` is taken from its unowned reference once, not at every use.
        let job = session.scheduleAppJob(at: session.now.adding(seconds: Units.clockDelay(seconds))) { [unowned self] in
            fire(id, plugin: index, callback)
        }
        timers.append(id, (index, job))
        return id
    }

    private func fire(_ id: Int, plugin index: Int, _ callback: PluginCallback) {
        timers.remove(id)
        caller.call(index, in: caller.openWindow(limit: session.profile.transitionLimit, handler: "timer"), callback)
    }

    /// Harmless if the timer fired or was cancelled already.
    func cancel(_ id: Int) {
        if let timer = timers.remove(id) { session.executor.cancel(timer.job) }
    }

    /// Cancels one plugin's timers (it failed to load).
    func cancel(plugin index: Int) {
        for (id, timer) in timers.entries where timer.plugin == index { cancel(id) }
    }

    /// Cancels every timer (the app ended).
    func cancelAll() {
        for timer in timers.values { session.executor.cancel(timer.job) }
        timers.removeAll()
    }
}
