import Logging

/// Every call into plugin code goes through here: it opens the watchdog's window, makes the call,
/// and settles what happened. A plugin error is recorded; an overrun, or a rule the code broke
/// while it ran, terminates the app once the code has returned.
///
/// Threading: main executor only; the watchdog it owns has a thread of its own.
final class GuardedCaller {
    /// A watchdog window: one event's handlers across all plugins share one deadline (W1).
    struct Window {
        /// Tells windows apart, so the watchdog is told of one only when its first call enters.
        var id: Int
        /// How long its calls may run, in nanoseconds on the watchdog's clock: from its first
        /// call, as the watchdog stamps it.
        var span: UInt64
        /// Its deadline when the limit counts from the window's opening instead (loading, whose
        /// limit covers making the plugin too); nil: from its first call.
        var deadline: UInt64?
        var limit: Double
        var handler: HandlerName
        /// The host's time when it was opened (virtual in simulate): the time of its watchdog event.
        var time: HostTime
    }

    /// What a call into plugin code came to, once the host's own decisions are applied.
    enum Settled {
        case ok
        case raised(message: String, traceback: String)
        /// Past the window's deadline, or stopped inside the VM (with where).
        case overran(traceback: String?)
        /// The app was terminated meanwhile: by a rule the call broke (T8), or by the watchdog's
        /// thread while Swift code overran (W3).
        case terminated
    }

    private let session: AppSession
    /// The session's recorder, held here so that reaching it costs no retain (see
    /// `TaskRuntime.recorder`).
    private let recorder: Recorder
    private let watchdog: Watchdog
    private let clock: any WatchdogClock
    private let watchdogScale: Double
    private let recordsHandlerCalls: Bool
    private let onHandlerCall: (@Sendable (String, HandlerName, Double) -> Void)?
    /// Whether a call is timed at all: for the pictures, or for `onHandlerCall`. One flag, so a
    /// host that wants neither checks one field a call, as before the hook.
    private let timesCalls: Bool
    /// How many calls into plugin code are on the stack (0 or 1: plugin code never calls plugin code).
    private(set) var depth = 0
    /// A termination decided while plugin code was running (T8): carried out when the code
    /// returns, never from under it.
    private var pendingTermination: Termination?
    /// The last window made, and the one the watchdog guards now.
    private var windows = 0
    private var openedWindow = -1
    /// How late past its deadline the last overrunning call returned, in milliseconds (real time).
    private(set) var lastOverrunLateness: Double?
    init(session: AppSession, configuration: HostConfiguration) {
        self.session = session
        self.recorder = session.recorder
        self.watchdogScale = configuration.watchdogScale
        self.recordsHandlerCalls = configuration.recordsHandlerCalls
        self.onHandlerCall = configuration.onHandlerCall
        self.timesCalls = configuration.recordsHandlerCalls || configuration.onHandlerCall != nil
        self.clock = configuration.watchdogClock
        let fatal = configuration.onUnpreemptibleOverrun
        let recorder = recorder
        self.watchdog = Watchdog(stopGrace: configuration.stopGrace, clock: configuration.watchdogClock) {
            [terminations = session.terminations] target in
            if target.handler == GuardedCaller.loadHandler.description {
                // Loading is not yet the app's life: a load failure, as for Lua (SPEC 7).
                fatal?(.loadFailed(.badInput(GuardedCaller.loadUnstoppableMessage(target))))
                return
            }
            // The main executor is stuck in the Swift code that overran: the verdict is written
            // from here, through the same one place as every other termination, and the app ends
            // on the main executor once that code returns (`settle`).
            let termination = Termination.watchdog(target, traceback: nil)
            terminations.write(termination, watchdog: target)
            fatal?(.terminated(termination, recorder))
        }
    }

    func shutdown() { watchdog.shutdown() }

    /// Whether plugin code is running now.
    var isInsidePluginCode: Bool { depth > 0 }

    /// A window for calls that share a deadline: the watchdog learns of it when its first call
    /// enters, and stamps its start then (see `Watchdog`), so opening one reads no clock and takes
    /// no lock.
    ///
    /// - Parameter fromNow: the limit counts from now, not from the first call: a clock read.
    func openWindow(limit: Double, handler: HandlerName, fromNow: Bool = false) -> Window {
        let scaled = limit / max(watchdogScale, 1e-9) * 1e9
        let span = scaled >= Double(UInt64.max / 2) ? UInt64.max / 2 : UInt64(scaled)
        windows += 1
        return Window(
            id: windows, span: span, deadline: fromNow ? clock.nanoseconds() &+ span : nil, limit: limit,
            handler: handler, time: session.now)
    }

    /// Makes a plugin known to the watchdog: its entry keeps the slot returned.
    func register(_ subject: WatchdogSubject) -> Int { watchdog.register(subject) }

    /// The app ended and its plugins are gone: their slots go too, so relaunches do not pile up.
    func forgetPlugins() { watchdog.forgetSubjects() }

    /// Calls plugin code under the watchdog and carries out what happened: a plugin error is
    /// recorded, an overrun or a stop terminates the app.
    func call(_ index: Int, in window: Window, _ body: () -> CallOutcome) {
        let (outcome, fired) = callUnchecked(index, in: window, body)
        let settled = settle(outcome, fired: fired)
        // The plugin is read from the roster only when something is to be recorded: a copy of its
        // ref for every call cost a retain and a release of its name. Plugin code cannot end the
        // app but by a rule, which `settle` has carried out; a roster emptied meanwhile all the
        // same has no one left to record against.
        if case .ok = settled { return }
        guard session.plugins.indices.contains(index) else { return }
        record(settled, of: session.plugins[index].ref, in: window)
    }

    /// Records what went wrong in a call of `ref`'s plugin.
    private func record(_ settled: Settled, of ref: PluginRef, in window: Window) {
        switch settled {
        case .ok, .terminated:
            return
        case .raised(let message, let traceback):
            recordPluginError(ref, message: message, traceback: traceback, handler: window.handler.description)
        case .overran(let traceback):
            // Real time, so it stays out of the report; `lifeline run` and benchmarks read it here.
            // Told against the earliest the deadline may have been, so that a stamp's own lateness
            // (up to a sampling period) counts as lateness too.
            let late = Double(Int64(bitPattern: clock.nanoseconds() &- watchdog.lastFiredDeadline)) / 1e6
            lastOverrunLateness = late
            let plugin = ref.name
            session.logger.info("watchdog: plugin '\(plugin)' stopped \(late) ms past its deadline")
            let target = WatchdogTarget(
                plugin: plugin, handler: window.handler.description, limit: window.limit, preemptor: nil,
                time: session.now)
            session.request(.terminate(.watchdog(target, traceback: traceback), watchdog: target))
        }
    }

    /// Calls each subscription's handler with `event`. They share one watchdog window (W1), and
    /// stop once the app has ended; a subscription cancelled by an earlier handler is skipped.
    func deliver(_ event: LifecycleEvent, to subscriptions: [SubscriptionTable.Subscription]) {
        let window = openWindow(limit: session.profile.limit(for: event.name), handler: HandlerName(event.name.rawValue))
        for subscription in subscriptions {
            guard session.appRunning else { return }
            if subscription.cancelled { continue }
            call(subscription.plugin, in: window) { subscription.handler(event) }
        }
    }

    /// Runs plugin code now, under a watchdog window of its own. Call it from a host job, never
    /// from inside plugin code (plugin code does not call plugin code).
    func callNow(_ ref: PluginRef, handler: HandlerName, limit: WatchdogLimit, _ callback: PluginCallback) {
        guard session.isCurrent(ref) else { return }
        // The two fields, not the profile: a copy of it retains and releases its name.
        let seconds = limit == .expirationHandler ? session.profile.expirationHandlerLimit : session.profile.transitionLimit
        call(ref.slot, in: openWindow(limit: seconds, handler: handler), callback)
    }

    /// Records a plugin error: one the host caught around a call, or one the plugin's code raised
    /// outside a call the host made (in a coroutine the host resumed, for instance).
    func recordPluginError(_ ref: PluginRef, message: String, traceback: String, handler: String) {
        session.recorder.notePluginError()
        charge(ref, bytes: TimelineEvent.recordedBytes + message.utf8.count + traceback.utf8.count)
        session.record(
            .pluginError, ("plugin", .string(ref.name)), ("message", .string(message)),
            ("traceback", .string(traceback)))
        session.logger.error("plugin '\(ref.name)' raised an error in \(handler): \(message)")
    }

    /// Counts `bytes` the report keeps for an event `ref`'s plugin caused against its memory cap,
    /// while its code is still loaded.
    func charge(_ ref: PluginRef, bytes: Int) {
        guard session.plugins.indices.contains(ref.slot), session.plugins[ref.slot].ref == ref else { return }
        session.plugins[ref.slot].code.chargeRecorded(bytes)
    }

    /// Stops `ref`'s plugin, which is running now, for a rule it broke (T8): its code is stopped
    /// where the watchdog can stop it, and the app is terminated when the call returns, never from
    /// under it. The first such termination is the one carried out.
    func stop(_ ref: PluginRef, because termination: Termination) {
        if pendingTermination == nil { pendingTermination = termination }
        session.plugins[ref.slot].code.preemptor?.preempt()
    }

    /// - Parameter fired: whether the watchdog acted during the call: its deadline passed. Overruns
    ///   are the watchdog's to detect, so a call costs no clock read of its own.
    func settle(_ outcome: CallOutcome, fired: Bool) -> Settled {
        if recorder.isTerminated {
            if session.appRunning { session.request(.endApp) }
            return .terminated
        }
        if var pending = pendingTermination {
            pendingTermination = nil
            if case .preempted(let traceback) = outcome { pending.traceback = traceback }
            session.request(.terminate(pending))
            return .terminated
        }
        switch outcome {
        case .returned where !fired: return .ok
        case .raised(let message, let traceback) where !fired: return .raised(message: message, traceback: traceback)
        case .returned, .raised: return .overran(traceback: nil)
        case .preempted(let traceback): return .overran(traceback: traceback)
        }
    }

    /// Calls plugin code under the watchdog. Returns what the code did, and whether the watchdog
    /// acted meanwhile.
    func callUnchecked(_ index: Int, in window: Window, _ body: () -> CallOutcome) -> (CallOutcome, fired: Bool) {
        // Only what the call needs, field by field (a copy of the whole entry costs four retains
        // a call): the body may end the app, which drops the plugins.
        let code = session.plugins[index].code
        if window.id != openedWindow {
            if let deadline = window.deadline {
                watchdog.open(deadline: deadline, handler: window.handler, limit: window.limit, time: window.time)
            } else {
                watchdog.open(span: window.span, handler: window.handler, limit: window.limit, time: window.time)
            }
            openedWindow = window.id
        }
        watchdog.enter(session.plugins[index].watchdogSlot)
        // Read before the call, which may end the app and drop the plugins.
        let timed = timesCalls
        let plugin = timed ? session.plugins[index].ref.name : ""
        let started = timed ? Monotonic.nanoseconds() : 0
        let startedAt = timed ? session.now : HostTime(nanoseconds: 0)
        depth += 1
        let outcome = body()
        depth -= 1
        let fired = watchdog.leave()
        code.resetPreemption()
        if timed { noteCall(plugin: plugin, handler: window.handler, started: started, at: startedAt) }
        return (outcome, fired)
    }

    /// Tells the pictures and `onHandlerCall` of a call that began at `started` (real time).
    private func noteCall(plugin: String, handler: HandlerName, started: UInt64, at startedAt: HostTime) {
        let nanoseconds = Monotonic.nanoseconds() &- started
        if recordsHandlerCalls {
            session.recorder.recordCall(
                HandlerCall(
                    time: startedAt, plugin: plugin, handler: handler.description,
                    milliseconds: Double(nanoseconds) / 1e6))
        }
        onHandlerCall?(plugin, handler, Double(nanoseconds) / 1e9)
    }

    // MARK: - Loading under the watchdog

    /// The watchdog's name for loading a plugin.
    static let loadHandler: HandlerName = "load"

    static func loadOverrunMessage(_ plugin: String, limit: Double) -> String {
        "plugin '\(plugin)' did not finish loading within the launch limit (\(ReportNumber.seconds(limit)) s)"
    }

    /// Why a plugin whose loading overran and could not be stopped failed (`lifeline check` prints it).
    static func loadUnstoppableMessage(_ target: WatchdogTarget) -> String {
        loadOverrunMessage(target.plugin, limit: target.limit) + " and could not be stopped ("
            + (target.preemptor == nil
                ? "Swift code cannot be preempted" : "stuck inside one C call, where the watchdog's stop cannot reach")
            + ")"
    }
}
