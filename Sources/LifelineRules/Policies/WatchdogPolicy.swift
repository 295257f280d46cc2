/// The watchdog's decisions (W1–W4) as a pure value: it takes the time and who runs now, and says
/// what to do. The `Watchdog` thread carries them out; tests drive the policy with plain numbers.
///
/// Times are CLOCK_MONOTONIC nanoseconds. Who runs now is the watchdog's token: one per call
/// into plugin code, 0 when none runs, with `Self.firedBit` set once the watchdog acted on it.
/// How windows armed by their first call are stamped, and what the token holds, is in
/// WatchdogPolicy+Epoch.swift.
public struct WatchdogPolicy: Sendable {
    /// Set in a running call's token once the watchdog acted on it.
    @inlinable public static var firedBit: UInt64 { 1 }

    /// What the watchdog's thread must do next.
    public enum Action: Equatable, Sendable {
        /// Sleep until this time (nil: until woken).
        case wait(until: UInt64?)
        /// The window's deadline has passed and no call runs: sleep until a call enters, which
        /// wakes the thread, for any call of an expired window is already late (W1).
        case idle
        /// The deadline passed while this call ran: stop it, or give up on it if it cannot be
        /// stopped (W2, W3).
        case fire(token: UInt64)
        /// The call stopped at `fire` has not unwound within the grace (Lua stuck inside one C
        /// call): give up on it.
        case giveUp(token: UInt64)
    }

    /// How long stopped code has to unwind before it counts as unstoppable.
    public let stopGrace: UInt64
    /// The open window's deadline; nil before the first window.
    private var deadline: UInt64?
    /// Whether the open window's deadline has passed.
    private var expired = false
    /// The call asked to stop, and until when it has to unwind.
    private var escalation: (token: UInt64, until: UInt64)?
    /// The window the deadline belongs to, by its number in the tokens; 0 when not told.
    public internal(set) var window: UInt64 = 0
    /// The earliest the deadline may have been: the deadline itself, unless a look of the thread
    /// stamped it, up to a period late.
    public internal(set) var earliestDeadline: UInt64 = 0

    /// Whether the thread waits for a deadline that has not passed, with no stopped call to watch.
    var hasPendingDeadline: Bool { deadline != nil && !expired && escalation == nil }

    public init(stopGrace: UInt64) { self.stopGrace = stopGrace }

    /// Opens a window: the calls made in it share `deadline` (W1). Returns whether the thread must
    /// be woken: only when it sleeps past the new deadline, so windows that follow one another
    /// on a busy executor wake nothing.
    public mutating func open(deadline: UInt64, sleepingUntil: UInt64?) -> Bool {
        self.deadline = deadline
        expired = false
        return sleepingUntil.map { deadline < $0 } ?? true
    }

    /// What to do at `now`, with `running` the token of the call running now.
    public mutating func next(now: UInt64, running: UInt64) -> Action {
        if let e = escalation {
            if running == e.token | Self.firedBit {
                if now < e.until { return .wait(until: e.until) }
                escalation = nil
                return .giveUp(token: e.token)
            }
            escalation = nil  // it unwound
        }
        if !expired {
            guard let d = deadline else { return .wait(until: nil) }
            if now < d { return .wait(until: d) }
            expired = true
        }
        if running == 0 || running & Self.firedBit != 0 { return .idle }
        return .fire(token: running)
    }

    /// Notes that the call fired on was asked to stop at `now`: it has the grace to unwind.
    public mutating func stopping(_ token: UInt64, now: UInt64) {
        escalation = (token, now &+ stopGrace)
    }
}
