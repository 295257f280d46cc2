#if canImport(Glibc)
import Glibc
#endif

/// The clock the main executor runs on: virtual in `lifeline simulate`, monotonic in `lifeline run`.
///
/// Threading: `now` and `wait` are called on the main executor only; `post` from any thread.
public protocol HostClock: AnyObject, Sendable {
    /// The time now.
    var now: HostTime { get }
    /// Waits until `deadline` (nil: no deadline) or until work is posted from outside.
    /// Returns the posted work, or nil when nothing can ever arrive (a virtual clock with no deadline).
    func wait(until deadline: HostTime?) -> [@Sendable () -> Void]?
}

/// Virtual time: waiting jumps straight to the deadline, so a 10-minute scenario takes milliseconds.
public final class VirtualClock: HostClock, @unchecked Sendable {
    // Threading: main executor only.
    private var current = HostTime.zero

    public init() {}

    public var now: HostTime { current }

    public func wait(until deadline: HostTime?) -> [@Sendable () -> Void]? {
        guard let deadline else { return nil }
        if deadline > current { current = deadline }
        return []
    }

    /// Moves the clock forward, for tests.
    public func advance(to time: HostTime) {
        if time > current { current = time }
    }
}

/// Real monotonic time since the clock was made, with an inbox for work posted by other threads
/// (signal handlers, the watchdog).
public final class MonotonicClock: HostClock, @unchecked Sendable {
    private let origin: UInt64
    // Guarded by `mutex`.
    private var inbox: [@Sendable () -> Void] = []
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        origin = Monotonic.nanoseconds()
        pthread_mutex_init(mutex, nil)
        var attr = pthread_condattr_t()
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(cond, &attr)
        pthread_condattr_destroy(&attr)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        cond.deallocate()
        mutex.deallocate()
    }

    public var now: HostTime { HostTime(nanoseconds: Int64(Monotonic.nanoseconds() - origin)) }

    /// Hands work to the main executor from any thread.
    public func post(_ work: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        inbox.append(work)
        pthread_cond_signal(cond)
        pthread_mutex_unlock(mutex)
    }

    public func wait(until deadline: HostTime?) -> [@Sendable () -> Void]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while inbox.isEmpty {
            if let deadline {
                let absolute = origin + UInt64(max(0, deadline.nanoseconds))
                if Monotonic.nanoseconds() >= absolute { break }
                var ts = Monotonic.timespec(absolute)
                pthread_cond_timedwait(cond, mutex, &ts)
            } else {
                pthread_cond_wait(cond, mutex)
            }
        }
        let work = inbox
        inbox.removeAll()
        return work
    }
}

/// The machine's monotonic clock, for the watchdog's real-time measurements (W5).
public enum Monotonic {
    /// Nanoseconds on CLOCK_MONOTONIC.
    public static func nanoseconds() -> UInt64 {
        var ts = Glibc.timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func timespec(_ ns: UInt64) -> Glibc.timespec {
        Glibc.timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    }
}
