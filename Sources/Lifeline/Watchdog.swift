#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Something the watchdog can stop while it runs: Lua code, stopped inside the VM (W2).
///
/// `preempt()` is called from the watchdog's thread.
public protocol Preemptible: Sendable {
    func preempt()
}

/// What the watchdog is guarding right now.
public struct WatchdogTarget: Sendable {
    /// The plugin whose code is running.
    public var plugin: String
    /// What it is running: an event name, "expiration handler", "timer", "load".
    public var handler: String
    /// The limit in seconds, as the profile gives it.
    public var limit: Double
    /// How to stop it; nil for Swift code, which cannot be stopped (W3).
    public var preemptor: (any Preemptible)?
    /// The host's time when the code was called (virtual in simulate).
    public var time: HostTime

    public init(plugin: String, handler: String, limit: Double, preemptor: (any Preemptible)?, time: HostTime) {
        self.plugin = plugin
        self.handler = handler
        self.limit = limit
        self.preemptor = preemptor
        self.time = time
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
    private var deadline: UInt64?
    private var target: WatchdogTarget?
    /// Whether the watchdog acted on the current arming.
    private var fired = false
    /// Whether the target was asked to stop and the deadline now running is the grace after it.
    private var escalating = false
    /// How long stopped code has to unwind before the watchdog treats it as unstoppable: Lua
    /// code stuck inside one C call (a huge string.find) never reaches the hook.
    private let stopGrace: UInt64
    private var stopping = false
    private var thread: Thread?
    /// Called on the watchdog's thread when a deadline passes with Swift code running (W3).
    private let onUnpreemptible: @Sendable (WatchdogTarget) -> Void

    /// - Parameter onUnpreemptible: what to do when Swift code overruns; called on the watchdog's
    ///   thread while the main executor is still inside that code.
    public init(stopGrace: Double = 1, onUnpreemptible: @escaping @Sendable (WatchdogTarget) -> Void = { _ in }) {
        self.onUnpreemptible = onUnpreemptible
        self.stopGrace = UInt64(max(0, stopGrace) * 1e9)
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
            let wake = self.deadline.map { deadline < $0 } ?? true
            self.deadline = deadline
            self.target = target
            fired = false
            escalating = false
            if wake { condition.signal() }
        }
    }

    /// Stops guarding. After it returns, the watchdog will not act on the old target.
    ///
    /// - Returns: whether the deadline passed while the target was guarded (the watchdog acted).
    @discardableResult
    public func disarm() -> Bool {
        // The deadline stays: re-arming with the same one (the next handler of the same event)
        // then needs no wake-up, and the thread, waking at it, finds no target and does nothing.
        condition.withLock {
            target = nil
            return fired
        }
    }

    private func loop() {
        condition.lock()
        while !stopping {
            guard let d = deadline else {
                condition.wait(until: nil)
                continue
            }
            if Monotonic.nanoseconds() < d {
                condition.wait(until: d)
                continue
            }
            // The deadline passed with the target still running.
            let guarded = target
            deadline = nil
            if let guarded {
                fired = true
                if let p = guarded.preemptor, !escalating {
                    p.preempt()
                    // If the code has not unwound by the end of the grace, it cannot be stopped.
                    escalating = true
                    deadline = Monotonic.nanoseconds() &+ stopGrace
                } else {
                    target = nil
                    condition.unlock()
                    onUnpreemptible(guarded)
                    condition.lock()
                }
            }
        }
        thread = nil
        condition.unlock()
    }
}
