/// Runs Swift plugins' async code on the main executor, as iOS runs an app's main-actor code on
/// the main thread. A task started with this executor as its preference (`PluginContext.task`)
/// runs every slice of its nonisolated code as a job of the main executor, so it may use the
/// plugin's context, which is main-executor only.
///
/// Jobs are posted through the clock's inbox and run at the time they arrive. In simulate that is
/// virtual time, and as long as the task waits only on the host (sleeps, requests, tasks) every
/// post comes from the main executor itself, so runs stay deterministic.
public final class HostTaskExecutor: TaskExecutor {
    private let clock: any HostClock

    init(clock: any HostClock) { self.clock = clock }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        clock.post { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}
