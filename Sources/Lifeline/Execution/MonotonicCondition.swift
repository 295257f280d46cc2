#if canImport(Glibc)
import Glibc
#endif

/// A mutex and a condition variable whose timed waits run on CLOCK_MONOTONIC, so a change of the
/// wall clock can neither wake the watchdog early nor make it oversleep.
///
/// Threading: any thread; `wait` must be called with the lock held.
final class MonotonicCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
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

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func signal() { pthread_cond_signal(cond) }
    func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits, with the lock held, until signalled or until `deadline` (CLOCK_MONOTONIC
    /// nanoseconds; nil: no deadline). May wake spuriously: callers re-check their condition.
    func wait(until deadline: UInt64?) {
        guard let deadline else {
            pthread_cond_wait(cond, mutex)
            return
        }
        var ts = Monotonic.timespec(deadline)
        pthread_cond_timedwait(cond, mutex, &ts)
    }

    /// Runs `body` with the lock held.
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}
