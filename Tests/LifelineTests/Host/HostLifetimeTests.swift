import Lifeline
import LifelineTesting
import Testing

/// A host that was shut down and dropped leaves nothing behind: not its executor, not its
/// recorder and every event it kept. A run that makes hosts one after another (a benchmark, an
/// embedder's loop, `lifeline check`) must not grow.
@Test func aHostThatWasShutDown_isFreed_withItsExecutorAndRecorder() throws {
    weak var recorder: Recorder?
    weak var executor: MainExecutor?
    weak var host: LifelineHost?
    do {
        let clock = MainExecutor(clock: VirtualClock())
        let made = LifelineHost(
            configuration: HostConfiguration(logger: quietLogger()),
            plugins: [swiftPlugin("p") { context in _ = context.on(.didReceiveMemoryWarning) { _ in } }],
            executor: clock)
        try made.perform(.launch)
        try made.perform(.memoryWarning)
        clock.run(shouldStop: { false }, afterJob: made.afterJob)
        made.shutdown()
        recorder = made.recorder
        executor = clock
        host = made
        // Positive control: while they are in use, they are there.
        #expect(recorder != nil && executor != nil && host != nil)
        #expect(eventNames(made.recorder).contains("didReceiveMemoryWarning"))
    }
    #expect(host == nil)
    #expect(executor == nil)
    #expect(recorder == nil)
}
