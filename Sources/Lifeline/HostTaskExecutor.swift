import Synchronization

/// Runs Swift plugins' async code on the main executor, as iOS runs an app's main-actor code on
/// the main thread. A task started with this executor as its preference (`PluginContext.task`)
/// runs every slice of its nonisolated code as a job of the main executor, so it may use the
/// plugin's context, which is main-executor only.
///
/// Jobs are posted through the clock's inbox and run at the time they arrive. In simulate that is
/// virtual time, and as long as the task waits only on the host (sleeps, requests, tasks) every
/// post comes from the main executor itself, so runs stay deterministic.
///
/// A queued slice counts as a handler that is still running: the app is not suspended while one
/// waits to run (T7), so async work started by a handler gets to begin its background task. A
/// task that waits on the host (a sleep, a request) is not queued meanwhile.
public final class HostTaskExecutor: TaskExecutor {
    private let clock: any HostClock
    private let queued = Atomic<Int>(0)

    init(clock: any HostClock) { self.clock = clock }

    /// Slices posted and not yet run.
    public var queuedJobs: Int { queued.load(ordering: .acquiring) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queued.add(1, ordering: .releasing)
        clock.post { [self] in
            queued.subtract(1, ordering: .releasing)
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
