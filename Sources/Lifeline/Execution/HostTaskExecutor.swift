import Synchronization

/// Runs a Swift plugin's async code on the main executor, as iOS runs an app's main-actor code on
/// the main thread. Each plugin context has one: a task started with it as its preference
/// (a plugin context's `task`) runs every slice of its nonisolated code as a job of the main executor,
/// so it may use the plugin's context, which is main-executor only.
///
/// Jobs are posted through the clock's inbox and run at the time they arrive. In simulate that is
/// virtual time, and as long as the task waits only on the host (sleeps, requests, tasks) every
/// post comes from the main executor itself, so runs stay deterministic.
///
/// Each slice runs under the watchdog, with the "other transitions" limit (W1, W3: Swift code is
/// not stopped, but an overrun is detected and ends the app).
///
/// A queued slice counts as a handler that is still running: the app is not suspended while one
/// waits to run (T7), so async work started by a handler gets to begin its background task. A
/// task that waits on the host (a sleep, a request) is not queued meanwhile.
public final class HostTaskExecutor: TaskExecutor {
    /// Slices posted and not yet run, across every plugin of a host.
    final class Queue: Sendable {
        private let count = Atomic<Int>(0)
        var isEmpty: Bool { count.load(ordering: .acquiring) == 0 }
        func add() { count.add(1, ordering: .releasing) }
        func remove() { count.subtract(1, ordering: .releasing) }
    }

    private let clock: any HostClock
    private let queue: Queue
    /// Runs one slice (the closure given) on the main executor, under the watchdog.
    private let runSlice: @Sendable (_ slice: @escaping () -> Void) -> Void

    init(
        clock: any HostClock, queue: Queue, runSlice: @escaping @Sendable (_ slice: @escaping () -> Void) -> Void
    ) {
        self.clock = clock
        self.queue = queue
        self.runSlice = runSlice
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.add()
        clock.post { [self] in
            queue.remove()
            runSlice { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }
}
