#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Something the watchdog can stop while it runs: Lua code, stopped inside the VM (W2).
///
/// `preempt()` is called from the watchdog's thread, while the code runs on another: it must only
/// ask that thread to stop (W4), never touch the running code's state itself.
public protocol Preemptible: Sendable {
    func preempt()
}

/// The plugin side of what the watchdog guards: made once per loaded plugin, so arming the
/// watchdog for a call copies one reference, not the name and the preemptor.
public final class WatchdogSubject: Sendable {
    public let plugin: String
    /// How to stop the plugin's code; nil for Swift code, which cannot be stopped (W3).
    public let preemptor: (any Preemptible)?

    public init(plugin: String, preemptor: (any Preemptible)?) {
        self.plugin = plugin
        self.preemptor = preemptor
    }
}

/// What the watchdog is guarding right now.
public struct WatchdogTarget: Sendable {
    public var subject: WatchdogSubject
    /// The plugin whose code is running.
    public var plugin: String { subject.plugin }
    /// What it is running: an event name, "expiration handler", "timer", "load".
    public var handler: String
    /// The limit in seconds, as the profile gives it.
    public var limit: Double
    /// How to stop it; nil for Swift code, which cannot be stopped (W3).
    public var preemptor: (any Preemptible)? { subject.preemptor }
    /// The host's time when the code was called (virtual in simulate).
    public var time: HostTime

    public init(subject: WatchdogSubject, handler: String, limit: Double, time: HostTime) {
        self.subject = subject
        self.handler = handler
        self.limit = limit
        self.time = time
    }

    public init(plugin: String, handler: String, limit: Double, preemptor: (any Preemptible)?, time: HostTime) {
        self.init(subject: WatchdogSubject(plugin: plugin, preemptor: preemptor), handler: handler, limit: limit, time: time)
    }
}

/// The watchdog's thread: it learns of windows by sampling, and acts only once a deadline has
/// passed (W4).
///
/// A window is opened once for the calls that share a deadline: the handlers of one event (W1),
/// or one timer, expiration handler, operation or task slice. The host opens each with a span,
/// not a deadline (`open(span:)`): a few plain stores, with no clock read and no lock, for an
/// operation of a queue opens one window of its own. Each call then costs two atomic operations:
/// `enter` publishes a token (the window's number and the plugin's slot), `leave` takes it back
/// and says whether the watchdog acted on it.
///
/// The deadline is stamped by whoever first sees the window:
/// - While calls come and go, the thread samples the token once a period
///   (`WatchdogClock.samplingPeriod`, 250 µs on CLOCK_MONOTONIC), and stamps a window the first
///   time it sees its number: its deadline is the span after that look. The call began after the
///   look before, so the stamp is late by up to a period and never early: each call keeps its whole
///   limit (W1), and the period bounds how late the watchdog fires. This is how Go's sysmon
///   preempts, and Linux's soft-lockup detector.
/// - After a period with nothing new the thread parks, so an idle host costs nothing. Before it
///   sleeps it stores in `parked` what it knows: the window whose deadline it sleeps until, or
///   that it sleeps until woken. A call that finds the thread parked, in a window it does not
///   know, stamps its window itself, exactly, on the clock, and wakes the thread. The caller
///   stores its token and then reads `parked`, the thread stores `parked` and then reads the token
///   again, all sequentially consistent: one of the two sees the other, so no window goes unseen.
///   A clock with no sampling period (one that tests move by hand) parks the thread every time,
///   so every window is stamped exactly, at its first call.
///
/// `open(deadline:)` opens a window whose deadline the caller already has, under the lock, and
/// wakes the thread only when it sleeps past that deadline.
///
/// The thread reads who runs when a deadline passes, and claims that call with a compare-and-swap,
/// so it never stops a call that has already left. A token names the window, so a call that
/// entered meanwhile with the same token is a call of the same, expired, window: late too (W1).
///
/// Its time comes from a `WatchdogClock`: CLOCK_MONOTONIC in the host, a clock that tests move by
/// hand so that no test waits for a deadline in real time.
///
/// Threading: `register`, `open`, `enter` and `leave` from the main executor, one call at a time;
/// the thread acts on its own.
public final class Watchdog: @unchecked Sendable {

    private let waiter = WatchdogWaiter()
    private let clock: any WatchdogClock
    /// How long the thread sleeps between two looks while calls come and go; nil: it never samples.
    private let period: UInt64?
    /// The token of the call running now (`WatchdogPolicy`'s layout), with `WatchdogPolicy.firedBit`
    /// once the watchdog acted on it; between calls, the window's idle token.
    private let running = Atomic<UInt64>(0)
    /// The span of the window `open(span:)` opened last, published before its first call enters.
    private let span = Atomic<UInt64>(0)
    /// 0 while the thread samples; what it knows while it is parked (`WatchdogPolicy.knows`,
    /// `parkedUntilWoken`). Written by the thread; read by `enter`.
    private let parked = Atomic<UInt64>(WatchdogPolicy.parkedUntilWoken)
    /// The last window's number and the idle token of the window open now. Main executor only.
    private var windows: UInt64 = 0
    private var idle: UInt64 = 0
    /// What the open window guards, for the target the thread reports. Written on the main
    /// executor as a window opens; read by the thread only for a call it has claimed, before that
    /// call's `leave` returns (which waits for the lock), so never while it is written.
    private var described = (handler: HandlerName(""), limit: 0.0, time: HostTime.zero)
    // Guarded by `waiter`'s lock.
    private var policy: WatchdogPolicy
    private var subjects: [WatchdogSubject] = []
    /// Until when the thread sleeps (`.max`: until woken), while it sleeps.
    private var sleepingUntil = UInt64.max
    private var stopping = false
    private var thread: Thread?
    /// The earliest the deadline of the call fired on last may have been.
    private var firedDeadline: UInt64 = 0
    /// Called on the watchdog's thread when code overruns and cannot be stopped (W3).
    private let onUnpreemptible: @Sendable (WatchdogTarget) -> Void

    /// - Parameters:
    ///   - stopGrace: seconds on `clock` that stopped code has to unwind before it counts as
    ///     unstoppable (Lua stuck inside one C call never reaches the hook).
    ///   - clock: where deadlines are read and waited for; `open` takes deadlines on this clock.
    ///   - onUnpreemptible: what to do when code overruns and cannot be stopped; called on the
    ///     watchdog's thread while the main executor is still inside that code.
    public init(
        stopGrace: Double = 1, clock: any WatchdogClock = MonotonicWatchdogClock(),
        onUnpreemptible: @escaping @Sendable (WatchdogTarget) -> Void = { _ in }
    ) {
        self.onUnpreemptible = onUnpreemptible
        self.clock = clock
        self.period = clock.samplingPeriod.map { max($0, 1) }
        self.policy = WatchdogPolicy(stopGrace: UInt64(max(0, stopGrace) * 1e9))
        let t = Thread { [unowned self] in self.loop() }
        t.name = "lifeline-watchdog"
        thread = t
        t.start()
    }

    /// Stops the thread. Call once, before dropping the watchdog.
    public func shutdown() {
        waiter.condition.withLock {
            stopping = true
            waiter.condition.signal()
        }
        while !waiter.condition.withLock({ thread == nil }) { usleep(100) }
    }

    /// Makes `subject` known to the watchdog; `enter` names it by the slot returned.
    public func register(_ subject: WatchdogSubject) -> Int {
        waiter.condition.withLock {
            precondition(subjects.count < WatchdogPolicy.maxSlots, "more plugins than a watchdog token can name")
            subjects.append(subject)
            return subjects.count - 1
        }
    }

    /// Forgets every subject (the app ended): slots are given again from 0. A call still running
    /// (the app ended from inside it) is left alone if its deadline passes.
    public func forgetSubjects() {
        waiter.condition.withLock { subjects.removeAll() }
    }

    /// Opens a window whose deadline is `span` nanoseconds after its first call enters, as the
    /// watchdog stamps it (see the type's comment). The calls entered from now on share it, until
    /// the next. Costs no clock read and no lock.
    public func open(span: UInt64, handler: HandlerName, limit: Double, time: HostTime) {
        idle = WatchdogPolicy.idle(window: nextWindow(), lazy: true)
        described = (handler, limit, time)
        // Before the first call's token, which the thread reads first.
        self.span.store(span, ordering: .releasing)
    }

    /// Opens a window until `deadline` (nanoseconds on the watchdog's clock: CLOCK_MONOTONIC
    /// unless another clock was given). The calls entered from now on share it, until the next.
    public func open(deadline: UInt64, handler: HandlerName, limit: Double, time: HostTime) {
        let window = nextWindow()
        idle = WatchdogPolicy.idle(window: window, lazy: false)
        waiter.condition.withLock {
            described = (handler, limit, time)
            if policy.open(window: window, deadline: deadline, sleepingUntil: sleepingUntil) {
                waiter.condition.signal()
            } else if parked.load(ordering: .relaxed) != 0 {
                // It sleeps until an earlier deadline, and reads this window's when it wakes.
                parked.store(WatchdogPolicy.knows(window), ordering: .sequentiallyConsistent)
            }
        }
    }

    private func nextWindow() -> UInt64 {
        windows = windows == WatchdogPolicy.maxWindow ? 1 : windows + 1
        return windows
    }

    /// Notes that the subject in `slot` runs now, under the open window.
    public func enter(_ slot: Int) {
        let token = WatchdogPolicy.call(slot: slot, in: idle)
        running.store(token, ordering: .sequentiallyConsistent)
        // The thread is parked and does not know this window (or it has expired): stamp it and
        // wake the thread. (This stores `running` and then reads `parked`; the thread stores
        // `parked` and then reads `running`: one of the two sees the other.)
        if WatchdogPolicy.mustWake(parked: parked.load(ordering: .sequentiallyConsistent), entering: token) {
            wake(entering: token)
        }
    }

    /// The slow path of `enter`: the thread is asleep, so the caller stamps its window on the
    /// clock, exactly, and wakes the thread.
    private func wake(entering token: UInt64) {
        waiter.condition.withLock {
            // The thread sleeps (it holds the lock while awake): it cannot be stamping meanwhile.
            if policy.needsStamp(token) {
                // Read after the call's token was published: never early.
                let deadline = clock.nanoseconds() &+ span.load(ordering: .acquiring)
                _ = policy.open(window: WatchdogPolicy.window(of: token), deadline: deadline, sleepingUntil: nil)
            }
            waiter.condition.signal()
        }
    }

    /// Notes that the call entered last has returned. After it returns, the watchdog will not act
    /// on that call.
    ///
    /// - Returns: whether the watchdog acted on the call: its window's deadline passed while it ran.
    public func leave() -> Bool {
        let token = running.exchange(idle, ordering: .sequentiallyConsistent)
        guard token & WatchdogPolicy.firedBit != 0 else { return false }
        // The thread claimed the call and acts on it under the lock: wait until it has, so that
        // the stop it asked for can be cleared after this returns.
        waiter.condition.withLock {}
        return true
    }

    /// The earliest the deadline of the call the watchdog acted on last may have been, on its
    /// clock: how late it fired is told against it. Read after `leave` returned true.
    public var lastFiredDeadline: UInt64 { waiter.condition.withLock { firedDeadline } }

    private func loop() {
        let condition = waiter.condition
        condition.lock()
        // The token at the thread's last look, the time just before it, and the last time a look
        // found the token moved (a call entered or left, a window opened).
        var previous: UInt64 = 0
        var lastLook = clock.nanoseconds()
        var movedAt: UInt64?
        // From here on the thread looks (`parked` said until now that it did not).
        parked.store(0, ordering: .sequentiallyConsistent)
        while !stopping {
            let now = clock.nanoseconds()
            let token = running.load(ordering: .sequentiallyConsistent)
            if policy.needsStamp(token) {
                let spanRead = span.load(ordering: .acquiring)
                // Still that window's call (or gap): the span read is its window's, for the next
                // window's is stored only after this one's last call has left.
                guard running.load(ordering: .sequentiallyConsistent) == token else { continue }
                // Read after the window was seen: the stamp is never early.
                policy.stamp(token, span: spanRead, now: clock.nanoseconds(), lastLook: lastLook)
            }
            if token != previous { movedAt = now }
            previous = token
            lastLook = now
            // Calls came or went within the last period: more may come, so look again within a
            // period. A whole period with nothing new parks the thread.
            let sampling = period.map { p in movedAt.map { now &- $0 < p } ?? false } ?? false
            let call = WatchdogPolicy.isCall(token) ? token : 0
            switch policy.next(now: now, running: call) {
            case .wait(let until):
                if let period, sampling {
                    sleep(until: min(until ?? .max, now &+ period))
                } else {
                    park(until: until, saying: policy.parkedWord, seen: token)
                }
            case .idle:
                // The window expired with no call running: any call of it is late at once.
                if let period, sampling {
                    sleep(until: now &+ period)
                } else {
                    park(until: nil, saying: WatchdogPolicy.parkedUntilWoken, seen: token)
                }
            case .fire(let token):
                guard running.compareExchange(
                    expected: token, desired: token | WatchdogPolicy.firedBit, ordering: .sequentiallyConsistent
                ).exchanged else { continue }  // it left meanwhile
                firedDeadline = policy.earliestDeadline
                // Gone only if the app ended from inside the call: nothing is left to stop.
                guard let subject = subject(token) else { continue }
                if let preemptor = subject.preemptor {
                    preemptor.preempt()
                    policy.stopping(token, now: now)
                } else {
                    giveUp(subject)
                }
            case .giveUp(let token):
                if let subject = subject(token) { giveUp(subject) }
            }
        }
        thread = nil
        condition.unlock()
    }

    /// Sleeps past the sampling period: tells callers so in `parked`, then looks once more, for a
    /// call that entered before the store counted on the thread to see it.
    private func park(until deadline: UInt64?, saying word: UInt64, seen token: UInt64) {
        parked.store(word, ordering: .sequentiallyConsistent)
        if running.load(ordering: .sequentiallyConsistent) == token { sleep(until: deadline) }
        parked.store(0, ordering: .sequentiallyConsistent)
    }

    private func sleep(until deadline: UInt64?) {
        sleepingUntil = deadline ?? .max
        clock.wait(waiter, until: deadline)
        sleepingUntil = 0
    }

    private func subject(_ token: UInt64) -> WatchdogSubject? {
        let slot = WatchdogPolicy.slot(of: token)
        return subjects.indices.contains(slot) ? subjects[slot] : nil
    }

    /// Called with the lock held; releases it while `onUnpreemptible` runs.
    private func giveUp(_ subject: WatchdogSubject) {
        let target = WatchdogTarget(
            subject: subject, handler: described.handler.description, limit: described.limit, time: described.time)
        waiter.condition.unlock()
        onUnpreemptible(target)
        waiter.condition.lock()
    }
}

/// Where the watchdog's thread reads the time and waits for its deadline.
public protocol WatchdogClock: Sendable {
    /// Now, in nanoseconds.
    func nanoseconds() -> UInt64
    /// Called on the watchdog's thread with `waiter`'s lock held: blocks until `deadline` (nil:
    /// none) may have passed on this clock or the waiter is woken. It may return early, for the
    /// watchdog reads the clock again after every wait.
    func wait(_ waiter: WatchdogWaiter, until deadline: UInt64?)
    /// How often, in nanoseconds, the watchdog's thread looks for new windows while calls come
    /// and go: it bounds how late a window's deadline is stamped. nil (the default): never, for a
    /// clock whose time jumps (moved by hand) would stamp late by the jump; every window is then
    /// stamped exactly by its first call.
    var samplingPeriod: UInt64? { get }
}

extension WatchdogClock {
    public var samplingPeriod: UInt64? { nil }
}

/// CLOCK_MONOTONIC: the host's clock, which a change of the wall clock cannot move.
public struct MonotonicWatchdogClock: WatchdogClock {
    /// A quarter of a millisecond: the stamp's lateness, added to the wake-up's, stays well within
    /// the 1 ms that `watchdog.latency` allows, and a busy host wakes the thread 4,000 times a
    /// second on a core of its own.
    public static let samplingPeriod: UInt64 = 250_000

    public init() {}

    public func nanoseconds() -> UInt64 { Monotonic.nanoseconds() }

    public func wait(_ waiter: WatchdogWaiter, until deadline: UInt64?) {
        waiter.condition.wait(until: deadline)
    }

    public var samplingPeriod: UInt64? { Self.samplingPeriod }
}

/// The watchdog thread's lock and wake-up, as a clock sees them: a clock that is moved by hand
/// wakes the waiter with `wake()`, and waits on it with `waitUntilWoken()`.
public final class WatchdogWaiter: Sendable {
    let condition = MonotonicCondition()

    init() {}

    /// Blocks, with the lock held, until `wake()`. May return spuriously.
    public func waitUntilWoken() { condition.wait(until: nil) }

    /// Wakes the watchdog's thread so that it reads its clock again. Takes the lock, so a wake-up
    /// cannot fall between the thread's reading of the clock and its wait.
    public func wake() { condition.withLock { condition.signal() } }
}
