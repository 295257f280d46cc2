import Testing

@testable import Lifeline
@testable import LifelineRules

/// A queue built alone on a virtual clock: its operation timeout and its background task, with
/// no host and no plugin code. The operation's body is a stand-in that records what the queue
/// tells it.
@Suite struct HostQueueAloneTests {
    /// Code that runs until it is told to stop, then ends (as a well-behaved async operation).
    final class StoppableBody: QueueOperationBody {
        var events: [String] = []
        let now: () -> Double
        init(now: @escaping () -> Double) { self.now = now }
        func start(_ operation: QueueOperation) { events.append("start at \(now())") }
        func stop(_ operation: QueueOperation, because reason: QueueOperation.StopReason) {
            events.append("stop \(reason) at \(now())")
            operation.codeEnded(failed: false)
        }
        func finished(_ operation: QueueOperation) { events.append("finished at \(now())") }
    }

    private func queue(_ stage: ComponentStage) -> HostQueue {
        HostQueue(
            name: "uploads", maxConcurrent: 1, session: stage.session, caller: stage.caller,
            tasks: TaskRuntime(session: stage.session, caller: stage.caller))
    }

    @Test func operationPastItsTimeout_getsOnTimeoutThenStops_andTheQueueEndsItsTask() {
        let stage = ComponentStage()
        let queue = queue(stage)
        let saver = stage.launch(["saver"])[0]
        let body = StoppableBody { stage.session.now.seconds }
        let op = QueueOperation(
            id: 1, name: "upload", timeout: 5, finishesWhenCodeEnds: false, plugin: saver, onTimeout: {
                body.events.append("onTimeout at \(stage.session.now.seconds)")
                return .returned
            }, body: body)
        stage.executor.schedule(at: .seconds(1)) { queue.add(op) }
        stage.run(until: 60)

        #expect(body.events == ["start at 1.0", "onTimeout at 6.0", "stop timedOut at 6.0", "finished at 6.0"])
        #expect(op.isFinished && op.stopReason == .timedOut)
        #expect(!queue.holdsTask && queue.count == 0)
        #expect(stage.timeline(only: ["taskBegan", "opStarted", "opFinished", "taskEnded"]) == [
            "1 taskBegan plugin=saver task=1 name=queue uploads",
            "1 opStarted plugin=saver queue=uploads op=1 name=upload",
            "6 opFinished plugin=saver queue=uploads op=1 name=upload result=timedOut",
            "6 taskEnded plugin=saver task=1 expired=false",
        ])
        #expect(stage.requests.isEmpty)
    }

    @Test func operationThatEndsBeforeItsTimeout_isNotTimedOut() {
        let stage = ComponentStage()
        let queue = queue(stage)
        let saver = stage.launch(["saver"])[0]
        let body = StoppableBody { stage.session.now.seconds }
        var timeouts = 0
        let op = QueueOperation(
            id: 1, name: "upload", timeout: 5, finishesWhenCodeEnds: false, plugin: saver, onTimeout: {
                timeouts += 1
                return .returned
            }, body: body)
        stage.executor.schedule(at: .seconds(1)) { queue.add(op) }
        stage.executor.schedule(at: .seconds(4)) { op.finish() }
        stage.run(until: 60)

        #expect(timeouts == 0)
        #expect(op.isFinished && op.stopReason == nil)
        #expect(body.events == ["start at 1.0", "finished at 4.0"])
    }

    @Test func operationOfAPluginNoLongerCurrent_getsNoTask() {
        let stage = ComponentStage()
        let queue = queue(stage)
        let saver = stage.launch(["saver"])[0]
        stage.session.unload(saver)
        let body = StoppableBody { stage.session.now.seconds }
        queue.add(
            QueueOperation(
                id: 1, name: nil, timeout: 5, finishesWhenCodeEnds: false, plugin: saver, onTimeout: nil, body: body))
        #expect(!queue.holdsTask)
    }
}
