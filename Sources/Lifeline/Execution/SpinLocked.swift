import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A value that one thread uses almost always and others seldom, behind a lock that costs one
/// atomic exchange to take and one store to give back when no other thread wants it.
///
/// The recorder's state is one: the main executor records every event, and another thread reads
/// or records only when the app ends from it (a watchdog termination, a second SIGINT). A pthread
/// mutex took about 80 instructions a record for a contention that never comes then. A thread
/// that finds the lock taken spins briefly, then yields, then sleeps a little at a time: the
/// holder may be writing a long report.
///
/// The flag is an atomic with acquire and release ordering, which ThreadSanitizer sees (unlike the
/// futex of Synchronization's `Mutex`, see `Locked`).
///
/// Threading: any thread.
public final class SpinLocked<Value>: @unchecked Sendable {
    // Exclusive through the flag; see `Locked` on why the runtime's check is skipped.
    @exclusivity(unchecked) private var value: Value
    private let taken = Atomic<Bool>(false)

    public init(_ value: Value) { self.value = value }

    @inline(__always) private func lock() {
        if taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged { return }
        wait()
    }

    @inline(never) private func wait() {
        var tries = 0
        while true {
            if !taken.load(ordering: .relaxed),
                taken.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
            {
                return
            }
            tries += 1
            if tries < 100 {
                continue
            } else if tries < 200 {
                sched_yield()
            } else {
                usleep(50)
            }
        }
    }

    @inline(__always) private func unlock() { taken.store(false, ordering: .releasing) }

    /// Runs `body` with the value, holding the lock.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    /// Runs `body` with the value and `item`, which it is given to keep (moved, not copied),
    /// holding the lock.
    @inline(__always)
    public func withLock<Item, R>(moving item: consuming Item, _ body: (inout Value, consuming Item) -> R) -> R {
        lock()
        defer { unlock() }
        return body(&value, item)
    }
}
