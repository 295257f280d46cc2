import Foundation
import Lifeline

/// A watchdog clock that only moves when a test moves it, so that watchdog tests need no sleep:
/// `advance` returns once the watchdog's thread has seen the new time and done all it had to do
/// at it (stopped the code, given up on it), and is waiting again.
///
/// One watchdog per clock. Times are nanoseconds, starting at `start`.
///
/// With a sampling period, the watchdog's thread samples on it as on CLOCK_MONOTONIC, and each
/// move of the clock is one of its looks: a test that moves the clock by at most a period at a
/// time sees the thread look as often as it would in real time. Without (the default), every
/// window is stamped exactly by its first call.
public final class ManualWatchdogClock: WatchdogClock, @unchecked Sendable {
    public let samplingPeriod: UInt64?
    private let state = NSCondition()
    // Guarded by `state`.
    private var now: UInt64
    private var waiter: WatchdogWaiter?
    /// Bumped by every `advance`: the watchdog is settled once it waits having seen the latest.
    private var generation = 0
    /// The generation the watchdog's thread saw when it last began to wait; nil while it works.
    private var waitingAt: Int?
    /// The deadline it is waiting for (nil: none), while it waits.
    private var awaited: UInt64?

    public init(start: UInt64 = 0, samplingPeriod: UInt64? = nil) {
        now = start
        self.samplingPeriod = samplingPeriod
    }

    public func nanoseconds() -> UInt64 { state.withLock { now } }

    public func wait(_ waiter: WatchdogWaiter, until deadline: UInt64?) {
        let due = state.withLock { () -> Bool in
            self.waiter = waiter
            if let deadline, now >= deadline { return true }
            waitingAt = generation
            awaited = deadline
            state.broadcast()
            return false
        }
        if due { return }
        // The caller holds the waiter's lock until this wait releases it, and `advance` takes that
        // lock to wake it, so a wake-up cannot slip in between.
        waiter.waitUntilWoken()
        state.withLock { waitingAt = nil }
    }

    /// Moves the clock on by `seconds` and waits until the watchdog has acted on the new time.
    public func advance(by seconds: Double) {
        advance(to: nanoseconds() + UInt64(seconds * 1e9))
    }

    /// Moves the clock to `time` (never back) and waits until the watchdog has acted on it.
    /// Without a move, it still waits for the watchdog to take in what it was last told (an arm).
    public func advance(to time: UInt64) {
        let (target, waiter) = state.withLock { () -> (Int, WatchdogWaiter?) in
            now = max(now, time)
            generation += 1
            waitingAt = nil
            return (generation, self.waiter)
        }
        waiter?.wake()
        settle(target)
    }

    /// Waits until the watchdog has taken in what it was last told (a window, a call), at the current time.
    public func settle() { advance(to: nanoseconds()) }

    /// Whether the watchdog's thread comes to wait for `deadline` (nil: for nothing) within
    /// `timeout` real seconds, without waking it: shows that an arm woke the thread by itself.
    public func watchdogWaits(until deadline: UInt64?, timeout: Double = 10) -> Bool {
        let limit = Date().addingTimeInterval(timeout)
        return state.withLock {
            while waitingAt == nil || awaited != deadline {
                if !state.wait(until: limit) { return false }
            }
            return true
        }
    }

    private func settle(_ target: Int) {
        // A bound on real time, so that a broken watchdog fails its test instead of hanging it.
        let limit = Date().addingTimeInterval(30)
        state.withLock {
            while waitingAt.map({ $0 < target }) ?? true {
                if !state.wait(until: limit) { return }
            }
        }
    }
}
