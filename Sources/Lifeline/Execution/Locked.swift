#if canImport(Glibc)
import Glibc
#endif

/// A value that several threads share, behind a pthread mutex.
///
/// Synchronization's `Mutex` waits with a raw futex on Linux, which ThreadSanitizer cannot see:
/// every access it guards would read as a race, and `scripts/test --sanitize=thread` could not
/// tell a real race from those. A pthread mutex is one that ThreadSanitizer knows.
///
/// Threading: any thread.
public final class Locked<Value>: @unchecked Sendable {
    // The mutex already makes every access exclusive, and a nested `withLock` on one thread would
    // deadlock before two accesses could overlap: the runtime's exclusivity check on each access
    // would only repeat it, at a cost on every call.
    @exclusivity(unchecked) private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with the value and `item`, which it is given to keep (moved, not copied),
    /// holding the lock.
    public func withLock<Item, R>(moving item: consuming Item, _ body: (inout Value, consuming Item) -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&value, item)
    }
}
