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

/// The watchdog's thread: it sleeps until the open window's deadline, and only then acts (W4).
///
/// A window is opened once for the calls that share a deadline: the handlers of one event (W1),
/// or one timer, expiration handler or task slice. That takes the lock, and wakes the thread only
/// when it sleeps past the new deadline. Each call then costs two atomic operations: `enter`
/// stores which call runs now, `leave` takes it back and says whether the watchdog acted on it.
/// The thread reads who runs when a deadline passes, and claims that call with a compare-and-swap,
/// so it never stops a call that has already left.
///
/// Its time comes from a `WatchdogClock`: CLOCK_MONOTONIC in the host, a clock that tests move by
/// hand so that no test waits for a deadline in real time.
///
/// Threading: `register`, `open`, `enter` and `leave` from the main executor; the thread acts on
/// its own.
public final class Watchdog: @unchecked Sendable {

    private let waiter = WatchdogWaiter()
    private let clock: any WatchdogClock
    /// The token of the call running now, 0 when none: `(call number << 32) | (slot + 1) << 1`,
    /// with `WatchdogPolicy.firedBit` once the watchdog acted on it.
    private let running = Atomic<UInt64>(0)
    /// Whether the open window's deadline passed with no call running: the next call to enter
    /// wakes the thread, which acts on it at once.
    private let expired = Atomic<Bool>(false)
    /// Numbers the calls, so that a token is never reused while the thread may still hold it.
    /// Main executor only.
    private var calls: UInt64 = 0
    // Guarded by `waiter`'s lock.
    private var policy: WatchdogPolicy
    private var subjects: [WatchdogSubject] = []
    private var window = (handler: HandlerName(""), limit: 0.0, time: HostTime.zero)
    /// Until when the thread sleeps (`.max`: until woken), while it sleeps.
    private var sleepingUntil = UInt64.max
    private var stopping = false
    private var thread: Thread?
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
            subjects.append(subject)
            return subjects.count - 1
        }
    }

    /// Forgets every subject (the app ended): slots are given again from 0. A call still running
    /// (the app ended from inside it) is left alone if its deadline passes.
    public func forgetSubjects() {
        waiter.condition.withLock { subjects.removeAll() }
    }

    /// Opens a window until `deadline` (nanoseconds on the watchdog's clock: CLOCK_MONOTONIC
    /// unless another clock was given). The calls entered from now on share it, until the next.
    public func open(deadline: UInt64, handler: HandlerName, limit: Double, time: HostTime) {
        waiter.condition.withLock {
            window = (handler, limit, time)
            expired.store(false, ordering: .sequentiallyConsistent)
            if policy.open(deadline: deadline, sleepingUntil: sleepingUntil) { waiter.condition.signal() }
        }
    }

    /// Notes that the subject in `slot` runs now, under the open window.
    public func enter(_ slot: Int) {
        calls &+= 1
        running.store(calls << 32 | UInt64(slot + 1) << 1, ordering: .sequentiallyConsistent)
        // The window is already past its deadline: the thread sleeps until a call comes, and this
        // one is late from its first instruction. (The thread stores `expired` and then reads
        // `running`, this the other way round, so one of the two sees the other.)
        if expired.load(ordering: .sequentiallyConsistent) {
            waiter.condition.withLock { waiter.condition.signal() }
        }
    }

    /// Notes that the call entered last has returned. After it returns, the watchdog will not act
    /// on that call.
    ///
    /// - Returns: whether the watchdog acted on the call: its window's deadline passed while it ran.
    public func leave() -> Bool {
        let token = running.exchange(0, ordering: .sequentiallyConsistent)
        guard token & WatchdogPolicy.firedBit != 0 else { return false }
        // The thread claimed the call and acts on it under the lock: wait until it has, so that
        // the stop it asked for can be cleared after this returns.
        waiter.condition.withLock {}
        return true
    }

    private func loop() {
        let condition = waiter.condition
        condition.lock()
        while !stopping {
            let now = clock.nanoseconds()
            switch policy.next(now: now, running: running.load(ordering: .sequentiallyConsistent)) {
            case .wait(let until):
                sleep(until: until)
            case .idle:
                expired.store(true, ordering: .sequentiallyConsistent)
                let token = running.load(ordering: .sequentiallyConsistent)
                if token != 0 && token & WatchdogPolicy.firedBit == 0 { continue }  // a call entered meanwhile
                sleep(until: nil)
            case .fire(let token):
                guard running.compareExchange(
                    expected: token, desired: token | WatchdogPolicy.firedBit, ordering: .sequentiallyConsistent
                ).exchanged else { continue }  // it left meanwhile
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

    private func sleep(until deadline: UInt64?) {
        sleepingUntil = deadline ?? .max
        clock.wait(waiter, until: deadline)
        sleepingUntil = 0
    }

    private func subject(_ token: UInt64) -> WatchdogSubject? {
        let slot = Int(truncatingIfNeeded: (token & 0xFFFF_FFFF) >> 1) - 1
        return subjects.indices.contains(slot) ? subjects[slot] : nil
    }

    /// Called with the lock held; releases it while `onUnpreemptible` runs.
    private func giveUp(_ subject: WatchdogSubject) {
        let target = WatchdogTarget(
            subject: subject, handler: window.handler.description, limit: window.limit, time: window.time)
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
}

/// CLOCK_MONOTONIC: the host's clock, which a change of the wall clock cannot move.
public struct MonotonicWatchdogClock: WatchdogClock {
    public init() {}

    public func nanoseconds() -> UInt64 { Monotonic.nanoseconds() }

    public func wait(_ waiter: WatchdogWaiter, until deadline: UInt64?) {
        waiter.condition.wait(until: deadline)
    }
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
