#if canImport(Glibc)
import Glibc
#endif
import Foundation

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

/// The watchdog's thread: it sleeps until the armed deadline, and only then acts (W4). Arming and
/// disarming cost a lock and, when the deadline moves earlier, a wake-up; nothing runs inside the
/// Lua VM until a deadline has passed.
///
/// Its time comes from a `WatchdogClock`: CLOCK_MONOTONIC in the host, a clock that tests move by
/// hand so that no test waits for a deadline in real time.
///
/// Threading: `arm`/`disarm` from the main executor; `fire` runs on the watchdog's own thread.
public final class Watchdog: @unchecked Sendable {
    private let waiter = WatchdogWaiter()
    private let clock: any WatchdogClock
    // Guarded by `waiter`'s lock.
    private var policy: WatchdogPolicy
    private var stopping = false
    private var thread: Thread?
    /// Called on the watchdog's thread when code overruns and cannot be stopped (W3).
    private let onUnpreemptible: @Sendable (WatchdogTarget) -> Void

    /// - Parameters:
    ///   - stopGrace: seconds on `clock` that stopped code has to unwind before it counts as
    ///     unstoppable (Lua stuck inside one C call never reaches the hook).
    ///   - clock: where deadlines are read and waited for; `arm` takes deadlines on this clock.
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

    /// Guards `target` until `deadline` (nanoseconds on the watchdog's clock: CLOCK_MONOTONIC
    /// unless another clock was given).
    public func arm(deadline: UInt64, target: WatchdogTarget) {
        waiter.condition.withLock {
            if policy.arm(deadline: deadline, target: target) { waiter.condition.signal() }
        }
    }

    /// Stops guarding. After it returns, the watchdog will not act on the old target.
    ///
    /// - Returns: whether the deadline passed while the target was guarded (the watchdog acted).
    @discardableResult
    public func disarm() -> Bool {
        waiter.condition.withLock { policy.disarm() }
    }

    private func loop() {
        let condition = waiter.condition
        condition.lock()
        while !stopping {
            switch policy.next(now: clock.nanoseconds()) {
            case .wait(let until):
                clock.wait(waiter, until: until)
            case .preempt(let target):
                target.preemptor?.preempt()
            case .giveUp(let target):
                condition.unlock()
                onUnpreemptible(target)
                condition.lock()
            }
        }
        thread = nil
        condition.unlock()
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
