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
/// Threading: `arm`/`disarm` from the main executor; `fire` runs on the watchdog's own thread.
public final class Watchdog: @unchecked Sendable {
    private let condition = MonotonicCondition()
    // Guarded by `condition`.
    private var policy: WatchdogPolicy
    private var stopping = false
    private var thread: Thread?
    /// Called on the watchdog's thread when code overruns and cannot be stopped (W3).
    private let onUnpreemptible: @Sendable (WatchdogTarget) -> Void

    /// - Parameters:
    ///   - stopGrace: real seconds that stopped code has to unwind before it counts as
    ///     unstoppable (Lua stuck inside one C call never reaches the hook).
    ///   - onUnpreemptible: what to do when code overruns and cannot be stopped; called on the
    ///     watchdog's thread while the main executor is still inside that code.
    public init(stopGrace: Double = 1, onUnpreemptible: @escaping @Sendable (WatchdogTarget) -> Void = { _ in }) {
        self.onUnpreemptible = onUnpreemptible
        self.policy = WatchdogPolicy(stopGrace: UInt64(max(0, stopGrace) * 1e9))
        let t = Thread { [unowned self] in self.loop() }
        t.name = "lifeline-watchdog"
        thread = t
        t.start()
    }

    /// Stops the thread. Call once, before dropping the watchdog.
    public func shutdown() {
        condition.withLock {
            stopping = true
            condition.signal()
        }
        while !condition.withLock({ thread == nil }) { usleep(100) }
    }

    /// Guards `target` until `deadline` (CLOCK_MONOTONIC nanoseconds).
    public func arm(deadline: UInt64, target: WatchdogTarget) {
        condition.withLock {
            if policy.arm(deadline: deadline, target: target) { condition.signal() }
        }
    }

    /// Stops guarding. After it returns, the watchdog will not act on the old target.
    ///
    /// - Returns: whether the deadline passed while the target was guarded (the watchdog acted).
    @discardableResult
    public func disarm() -> Bool {
        condition.withLock { policy.disarm() }
    }

    private func loop() {
        condition.lock()
        while !stopping {
            switch policy.next(now: Monotonic.nanoseconds()) {
            case .wait(let until):
                condition.wait(until: until)
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
