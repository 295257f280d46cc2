#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The clock the main executor runs on: virtual in `lifeline simulate`, monotonic in `lifeline run`.
///
/// Threading: `now` and `wait` are called on the main executor only; `post` from any thread.
public protocol HostClock: AnyObject, Sendable {
    /// The time now.
    var now: HostTime { get }
    /// Waits until `deadline` (nil: no deadline) or until work is posted from outside.
    /// Returns the posted work, or nil when nothing can ever arrive (a virtual clock with no deadline).
    func wait(until deadline: HostTime?) -> [@Sendable () -> Void]?
    /// Hands work to the main executor from any thread: `wait` returns it.
    func post(_ work: @escaping @Sendable () -> Void)
}

/// Virtual time: waiting jumps straight to the deadline, so a 10-minute scenario takes milliseconds.
///
/// Work posted to it runs at the virtual time it was posted at: `wait` hands it back before it
/// moves the clock. Posting from other threads makes a run depend on their timing; in simulate
/// everything that posts (the scripted network, Swift tasks resumed by the host) does so from the
/// main executor, so runs stay deterministic.
public final class VirtualClock: HostClock, @unchecked Sendable {
    // Threading: main executor only, but for `inbox`.
    private var current = HostTime.zero
    private let inbox = Locked<[@Sendable () -> Void]>([])

    public init() {}

    public var now: HostTime { current }

    public func post(_ work: @escaping @Sendable () -> Void) {
        inbox.withLock { $0.append(work) }
    }

    public func wait(until deadline: HostTime?) -> [@Sendable () -> Void]? {
        let posted = inbox.withLock { inbox in
            defer { inbox.removeAll() }
            return inbox
        }
        if !posted.isEmpty { return posted }
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
    private let condition = MonotonicCondition()
    // Guarded by `condition`.
    private var inbox: [@Sendable () -> Void] = []
    /// Whether `inbox` holds work, for the wait's spin to read without the lock.
    private let posted = Atomic<Bool>(false)

    public init() { origin = Monotonic.nanoseconds() }

    /// How long `wait` polls the inbox before it sleeps: work posted within this (an HTTP
    /// response on loopback, a transfer's progress) is taken without the cost of waking a
    /// sleeping thread.
    static let spin: UInt64 = 200_000

    public var now: HostTime { HostTime(nanoseconds: Int64(Monotonic.nanoseconds() - origin)) }

    /// Hands work to the main executor from any thread.
    public func post(_ work: @escaping @Sendable () -> Void) {
        condition.withLock {
            inbox.append(work)
            posted.store(true, ordering: .releasing)
            condition.signal()
        }
    }

    public func wait(until deadline: HostTime?) -> [@Sendable () -> Void]? {
        let absolute = deadline.map { origin + UInt64(max(0, $0.nanoseconds)) }
        let start = Monotonic.nanoseconds()
        let spinEnd = min(start + Self.spin, absolute ?? .max)
        while !posted.load(ordering: .acquiring) && Monotonic.nanoseconds() < spinEnd {}
        return condition.withLock {
            while inbox.isEmpty {
                if let absolute, Monotonic.nanoseconds() >= absolute { break }
                condition.wait(until: absolute)
            }
            let work = inbox
            inbox.removeAll()
            posted.store(false, ordering: .relaxed)
            return work
        }
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
