/// The watchdog's decisions (W1–W4) as a pure value: it takes the time and says what to do. The
/// `Watchdog` thread carries them out; tests drive the policy with plain numbers.
///
/// Times are CLOCK_MONOTONIC nanoseconds.
public struct WatchdogPolicy: Sendable {
    /// What the watchdog's thread must do next.
    public enum Action: Sendable {
        /// Sleep until this time (nil: until woken).
        case wait(until: UInt64?)
        /// The deadline passed with stoppable code running: ask it to stop (W2).
        case preempt(WatchdogTarget)
        /// The deadline passed with code that cannot be stopped (Swift, W3), or stopped code
        /// has not unwound within the grace (Lua stuck inside one C call).
        case giveUp(WatchdogTarget)
    }

    /// How long stopped code has to unwind before it counts as unstoppable.
    public let stopGrace: UInt64
    private var deadline: UInt64?
    private var target: WatchdogTarget?
    /// Whether the watchdog acted since the last `arm`.
    public private(set) var fired = false
    /// Whether the deadline now running is the grace after a stop.
    private var escalating = false

    public init(stopGrace: UInt64) { self.stopGrace = stopGrace }

    /// Guards `target` until `deadline`. Returns whether the thread must be woken: only when the
    /// deadline moved earlier, so the handlers of one event, which share a deadline, wake nothing.
    public mutating func arm(deadline: UInt64, target: WatchdogTarget) -> Bool {
        let wake = self.deadline.map { deadline < $0 } ?? true
        self.deadline = deadline
        self.target = target
        fired = false
        escalating = false
        return wake
    }

    /// Stops guarding; returns whether the watchdog acted on this arming. The deadline stays, so
    /// re-arming with the same one needs no wake-up; at it, the thread finds no target and waits.
    public mutating func disarm() -> Bool {
        target = nil
        return fired
    }

    /// What to do at `now`.
    public mutating func next(now: UInt64) -> Action {
        guard let d = deadline else { return .wait(until: nil) }
        if now < d { return .wait(until: d) }
        deadline = nil
        guard let guarded = target else { return .wait(until: nil) }
        fired = true
        if guarded.preemptor != nil && !escalating {
            escalating = true
            deadline = now &+ stopGrace
            return .preempt(guarded)
        }
        target = nil
        return .giveUp(guarded)
    }
}
