/// Windows armed by their first call, and the thread that samples them (the epoch watchdog).
///
/// A call publishes a token, one atomic word: its window's number, whether that window was armed
/// lazily (its deadline is a span after its first call, stamped by whoever first sees it), and
/// its plugin's slot. Between calls the word keeps the window and drops the slot, so the thread
/// can tell windows came and went while it slept. The layout, low bits first:
///
///     bit 0        `firedBit`: the watchdog acted on this call
///     bits 1–23    the slot + 1; 0 between calls
///     bit 24       the window was armed lazily
///     bits 25–63   the window's number, from 1; 0 before the first window
extension WatchdogPolicy {
    // Inlinable, as what they serve: every call into plugin code makes and reads a token, across
    // the module boundary.
    @usableFromInline static var slotMask: UInt64 { 0xFF_FFFE }
    @usableFromInline static var lazyBit: UInt64 { 1 << 24 }
    @usableFromInline static var windowShift: UInt64 { 25 }
    /// The largest window number; numbers wrap to 1 after it (0 means none).
    public static let maxWindow: UInt64 = UInt64.max >> windowShift
    /// The most slots a token can name.
    public static let maxSlots = Int(slotMask >> 1)

    /// The token of no call, in `window`: what `running` holds between calls.
    @inlinable public static func idle(window: UInt64, lazy: Bool) -> UInt64 {
        window << windowShift | (lazy ? lazyBit : 0)
    }

    /// The token of a call of the plugin in `slot`, in the window whose idle token is `idle`.
    @inlinable public static func call(slot: Int, in idle: UInt64) -> UInt64 { idle | UInt64(slot + 1) << 1 }

    /// The window `token` belongs to.
    @inlinable public static func window(of token: UInt64) -> UInt64 { token >> windowShift }

    /// Whether `token` is a call, not the gap between two.
    @inlinable public static func isCall(_ token: UInt64) -> Bool { token & slotMask != 0 }

    /// The slot of the call `token`.
    @inlinable public static func slot(of token: UInt64) -> Int { Int(truncatingIfNeeded: (token & slotMask) >> 1) - 1 }

    /// What `parked` says while the thread sleeps and knows `window`'s deadline, which has not
    /// passed: a call of that window needs no wake-up.
    @inlinable public static func knows(_ window: UInt64) -> UInt64 { window << 1 | 1 }
    /// What `parked` says while the thread sleeps until woken: every call must wake it.
    @inlinable public static var parkedUntilWoken: UInt64 { 1 }

    /// Whether a call entering with `token` must wake the thread and stamp its window itself, the
    /// thread having said `parked` before it went to sleep. 0: it samples, and sees the call within
    /// a period; `knows(w)`: it wakes at window w's deadline, which is in time for a call of w.
    @inlinable public static func mustWake(parked: UInt64, entering token: UInt64) -> Bool {
        parked != 0 && parked != knows(window(of: token))
    }

    /// Opens window `window`, whose deadline is known exactly: opened with it, or stamped by the
    /// call that found the thread asleep. Returns whether the thread must be woken, as `open`.
    public mutating func open(window: UInt64, deadline: UInt64, sleepingUntil: UInt64?) -> Bool {
        let wake = open(deadline: deadline, sleepingUntil: sleepingUntil)
        self.window = window
        earliestDeadline = deadline
        return wake
    }

    /// Whether `token` is of a lazily armed window that has no deadline yet: the thread stamps it.
    /// Windows follow one another, so any lazy window but the one stamped last is new.
    public func needsStamp(_ token: UInt64) -> Bool {
        token & Self.lazyBit != 0 && Self.window(of: token) != window
    }

    /// Stamps the lazily armed window of `token`, which the thread saw first at `now` and had not
    /// seen when it last looked, at `lastLook`. Its deadline is `span` after `now`: late by up to
    /// the time between two looks, never early (W1 gives a call its whole limit).
    /// `earliestDeadline` is `span` after `lastLook`: how late the watchdog fired is told against it,
    /// so that the stamp's own lateness is counted too.
    public mutating func stamp(_ token: UInt64, span: UInt64, now: UInt64, lastLook: UInt64) {
        _ = open(deadline: now &+ span, sleepingUntil: nil)
        window = Self.window(of: token)
        earliestDeadline = min(lastLook, now) &+ span
    }

    /// What the thread tells callers as it parks, having been told to wait: while it sleeps until
    /// the deadline of a window that has not expired, calls of that window need not wake it.
    public var parkedWord: UInt64 {
        hasPendingDeadline && window != 0 ? Self.knows(window) : Self.parkedUntilWoken
    }
}
