import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// Operation queues, from Swift (`context.queue`, `context.backgroundQueue`). Everything
// runs in virtual time on the host's clock: the times below are the scenario's seconds.

private let opLines: Set<String> = ["opStarted", "opFinished", "opDropped", "opReplaced"]
private let taskLines: Set<String> = ["taskBegan", "taskExpiring", "taskEnded", "suspended", "terminated"]

/// An `opStarted` line, as `lines` prints it.
private func started(_ t: String, _ op: Int, _ name: String, queue: String = "q", plugin: String = "p") -> String {
    "\(t) opStarted plugin=\(plugin) queue=\(queue) op=\(op) name=\(name)"
}

/// How an operation finished, for `finished`.
private enum How { case normally, timedOut, cancelled, expired, failed }

/// An `opFinished` line, as `lines` prints it.
private func finished(
    _ t: String, _ op: Int, _ name: String, _ how: How = .normally, queue: String = "q", plugin: String = "p"
) -> String {
    "\(t) opFinished plugin=\(plugin) queue=\(queue) op=\(op) name=\(name) result=\(how == .normally ? "finished" : "\(how)")"
}

// MARK: - Order and concurrency

@Test func serialQueue_runsOperationsOneAtATime_inTheOrderAdded() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        seen.append("maxConcurrent \(q.maxConcurrent)")
        context.on(.didFinishLaunching) { _ in
            for (name, seconds) in [("a", 3.0), ("b", 1.0), ("c", 2.0)] {
                q.add(name: name) { _ in
                    seen.append("\(name) start \(context.now)")
                    try await context.sleep(seconds: seconds)
                    seen.append("\(name) end \(context.now)")
                }
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "maxConcurrent 1", "a start 0.0", "a end 3.0", "b start 3.0", "b end 4.0", "c start 4.0", "c end 6.0",
        ])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), finished("3", 1, "a"), started("3", 2, "b"), finished("4", 2, "b"),
            started("4", 3, "c"), finished("6", 3, "c"),
        ])
}

@Test func maxConcurrentTwo_runsTwoAtOnce_andStartsTheThirdWhenOneFinishes() throws {
    let seen = Shared<[String]>([])
    let running = Shared(0)
    let peak = Shared(0)
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q", maxConcurrent: 2)
        context.on(.didFinishLaunching) { _ in
            for (name, seconds) in [("a", 2.0), ("b", 3.0), ("c", 2.0)] {
                q.add(name: name) { _ in
                    let now = running.mutate { n -> Int in
                        n += 1
                        return n
                    }
                    peak.mutate { $0 = max($0, now) }
                    seen.append("\(name) start \(context.now)")
                    try await context.sleep(seconds: seconds)
                    running.mutate { $0 -= 1 }
                }
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(peak.value == 2)
    #expect(seen.value == ["a start 0.0", "b start 0.0", "c start 2.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), started("0", 2, "b"), finished("2", 1, "a"), started("2", 3, "c"),
            finished("3", 2, "b"), finished("4", 3, "c"),
        ])
}

@Test func queue_maxConcurrentBelowOneOrAnEmptyName_throwsAndAMismatchedMaxConcurrentThrows() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        for (name, limit) in [("q", 0), ("", 1), ("q", 1), ("q", 2)] as [(String, Int)] {
            do throws(QueueError) {
                let q = try context.queue(name, maxConcurrent: limit)
                seen.append("'\(name)' \(limit): got maxConcurrent \(q.maxConcurrent)")
            } catch {
                seen.append("'\(name)' \(limit): \(error.message)")
            }
        }
        seen.append("background: \(context.backgroundQueue.name) \(context.backgroundQueue.maxConcurrent)")
    }
    _ = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "'q' 0: maxConcurrent must be an integer >= 1",
            "'' 1: a queue's name must not be empty",
            "'q' 1: got maxConcurrent 1",
            "'q' 2: queue 'q' already exists with maxConcurrent = 1, not 2",
            "background: background 4",
        ])
}

// MARK: - Uniqueness policies

@Test func uniqueIgnore_runsBothOperationsOfTheSameName() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            for i in 1...2 {
                let op = q.add(name: "x", unique: .ignore) { _ in
                    seen.append("x\(i) start \(context.now)")
                    try await context.sleep(seconds: 1)
                }
                seen.append("added x\(i): \(op != nil)")
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["added x1: true", "added x2: true", "x1 start 0.0", "x2 start 1.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "x"), finished("1", 1, "x"), started("1", 2, "x"), finished("2", 2, "x"),
        ])
}

@Test func uniqueDrop_dropsTheNewOperationWhileOneOfTheSameNameIsPendingOrRunning_theFirstStillRuns() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        func addX(_ label: String) {
            let op = q.add(name: "x", unique: .drop) { _ in
                seen.append("\(label) start \(context.now)")
                try await context.sleep(seconds: 3)
                seen.append("\(label) end \(context.now)")
            }
            seen.append("\(label): " + (op.map { "op \($0.id)" } ?? "nil"))
        }
        context.on(.didFinishLaunching) { _ in
            addX("first")  // op 1, runs from 0 to 3
            addX("whilePending")  // op 2: op 1 has not started yet
            context.after(1) { addX("whileRunning") }  // op 3: op 1 runs
            context.after(4) { addX("afterwards") }  // op 4: op 1 has finished
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "first: op 1", "whilePending: nil", "first start 0.0", "whileRunning: nil", "first end 3.0",
            "afterwards: op 4", "afterwards start 4.0", "afterwards end 7.0",
        ])
    #expect(
        lines(recorder, only: opLines) == [
            "0 opDropped plugin=p queue=q op=2 name=x existing=1", started("0", 1, "x"),
            "1 opDropped plugin=p queue=q op=3 name=x existing=1", finished("3", 1, "x"),
            started("4", 4, "x"), finished("7", 4, "x"),
        ])
}

@Test func uniqueReplace_pendingOperation_isReplacedInItsPlace_andNeverStarts() throws {
    let seen = Shared<[String]>([])
    let old = Shared<QueueOperation?>(nil)
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "blocker") { _ in try await context.sleep(seconds: 2) }  // op 1
            old.value = q.add(name: "x") { _ in seen.append("old x ran") }  // op 2
            q.add(name: "y") { _ in  // op 3
                seen.append("y start \(context.now)")
                try await context.sleep(seconds: 1)
            }
            let new = q.add(name: "x", unique: .replace) { _ in  // op 4
                seen.append("new x start \(context.now)")
                try await context.sleep(seconds: 1)
            }
            seen.append("replace returned op \(new?.id ?? 0)")
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["replace returned op 4", "new x start 2.0", "y start 3.0"])
    #expect(old.value?.isFinished == true)
    #expect(old.value?.stopReason == .cancelled)
    #expect(
        lines(recorder, only: opLines) == [
            "0 opReplaced plugin=p queue=q op=4 name=x replaced=2", finished("0", 2, "x", .cancelled),
            started("0", 1, "blocker"), finished("2", 1, "blocker"), started("2", 4, "x"), finished("3", 4, "x"),
            started("3", 3, "y"), finished("4", 3, "y"),
        ])
}

@Test func uniqueReplace_runningOperation_isCancelled_itsSleepThrows_andTheNewOneRunsNext() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "x") { _ in  // op 1
                seen.append("old x start \(context.now)")
                do {
                    try await context.sleep(seconds: 100)
                    seen.append("old x woke")
                } catch {
                    seen.append("old x \(type(of: error)) at \(context.now)")
                    throw error
                }
            }
            q.add(name: "y") { _ in seen.append("y start \(context.now)") }  // op 2
            context.after(2) {
                q.add(name: "x", unique: .replace) { _ in  // op 3
                    seen.append("new x start \(context.now)")
                    try await context.sleep(seconds: 1)
                }
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == ["old x start 0.0", "old x CancellationError at 2.0", "new x start 2.0", "y start 3.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "x"), "2 opReplaced plugin=p queue=q op=3 name=x replaced=1",
            finished("2", 1, "x", .cancelled), started("2", 3, "x"), finished("3", 3, "x"), started("3", 2, "y"),
            finished("3", 2, "y"),
        ])
    #expect(recorder.pluginErrorCount == 0)
}

// MARK: - Sequences

@Test func addSequential_runsStrictlyOneAfterAnother_acrossWaits_onAConcurrentQueue() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q", maxConcurrent: 3)
        context.on(.didFinishLaunching) { _ in
            let ops = q.addSequential([
                .async(name: "a") { _ in  // op 1
                    seen.append("a start \(context.now)")
                    try await context.sleep(seconds: 3)
                    seen.append("a end \(context.now)")
                },
                .async(name: "b") { _ in  // op 2
                    seen.append("b start \(context.now)")
                    try await context.sleep(seconds: 1)
                    seen.append("b end \(context.now)")
                },
                .sync(name: "c") { _ in seen.append("c at \(context.now)") },  // op 3
                .async(name: "d") { _ in  // op 4
                    seen.append("d start \(context.now)")
                    try await context.sleep(seconds: 2)
                    seen.append("d end \(context.now)")
                },
            ])
            seen.append("sequence ops \(ops.map(\.id))")
            // Not part of the sequence: it runs beside it, the queue is concurrent.
            q.add(name: "z") { _ in  // op 5
                seen.append("z start \(context.now)")
                try await context.sleep(seconds: 1)
                seen.append("z end \(context.now)")
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "sequence ops [1, 2, 3, 4]", "a start 0.0", "z start 0.0", "z end 1.0", "a end 3.0", "b start 3.0",
            "b end 4.0", "c at 4.0", "d start 4.0", "d end 6.0",
        ])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), started("0", 5, "z"), finished("1", 5, "z"), finished("3", 1, "a"),
            started("3", 2, "b"), finished("4", 2, "b"), started("4", 3, "c"), finished("4", 3, "c"),
            started("4", 4, "d"), finished("6", 4, "d"),
        ])
}

// MARK: - Timeouts

@Test func timeout_callsOnTimeoutAtTheTimeout_cancelsTheCode_finishesTimedOut_andALaterFinishChangesNothing() throws
{
    let seen = Shared<[String]>([])
    let slow = Shared<QueueOperation?>(nil)
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            slow.value = q.add(
                name: "slow", timeout: 5,
                onTimeout: { op in seen.append("onTimeout at \(context.now) cancelled=\(op.isCancelled)") }
            ) { _ in
                do {
                    try await context.sleep(seconds: 100)
                    seen.append("slow woke")
                } catch {
                    seen.append("slow \(type(of: error)) at \(context.now)")
                    throw error
                }
            }
            q.add(name: "next") { _ in seen.append("next start \(context.now)") }
            context.after(8) {
                if let op = slow.value { seen.append("finish at 8: \(op.finish())") }
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "onTimeout at 5.0 cancelled=true", "slow CancellationError at 5.0", "next start 5.0", "finish at 8: false",
        ])
    #expect(slow.value?.stopReason == .timedOut)
    #expect(slow.value?.isFinished == true)
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "slow"), finished("5", 1, "slow", .timedOut), started("5", 2, "next"),
            finished("5", 2, "next"),
        ])
    #expect(recorder.pluginErrorCount == 0)
}

@Test func timeout_default_isTenSeconds() throws {
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "slow") { _ in try await context.sleep(seconds: 100) }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(QueueOperation.defaultTimeout == 10)
    #expect(lines(recorder, only: opLines) == [started("0", 1, "slow"), finished("10", 1, "slow", .timedOut)])
}

// MARK: - Sync operations that finish later

@Test func syncOperation_notFinishingOnReturn_finishesOnlyWhenATimerCallsFinish() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.addOperation(name: "upload", finishesOnReturn: false) { op in
                seen.append("upload ran at \(context.now)")
                context.after(3) {
                    seen.append("finish: \(op.finish())")
                    seen.append("finish again: \(op.finish())")
                }
            }
            q.add(name: "next") { _ in seen.append("next start \(context.now)") }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["upload ran at 0.0", "finish: true", "finish again: false", "next start 3.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "upload"), finished("3", 1, "upload"), started("3", 2, "next"), finished("3", 2, "next"),
        ])
}

@Test func syncOperation_notFinishingOnReturn_neverFinished_finishesAtItsTimeout() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.addOperation(
                name: "upload", timeout: 4, finishesOnReturn: false,
                onTimeout: { _ in seen.append("onTimeout at \(context.now)") }
            ) { _ in seen.append("upload ran at \(context.now)") }
            q.add(name: "next") { _ in seen.append("next start \(context.now)") }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["upload ran at 0.0", "onTimeout at 4.0", "next start 4.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "upload"), finished("4", 1, "upload", .timedOut), started("4", 2, "next"),
            finished("4", 2, "next"),
        ])
}

@Test func asyncOperation_finishCalledEarly_finishesIt_andTheNextStartsWhileItsCodeGoesOn() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "a", timeout: .infinity) { op in
                try await context.sleep(seconds: 1)
                seen.append("a finish: \(op.finish()) at \(context.now)")
                try await context.sleep(seconds: 5)
                seen.append("a code ends at \(context.now)")
            }
            q.add(name: "b") { _ in
                seen.append("b start \(context.now)")
                try await context.sleep(seconds: 1)
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["a finish: true at 1.0", "b start 1.0", "a code ends at 6.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), finished("1", 1, "a"), started("1", 2, "b"), finished("2", 2, "b"),
        ])
}

// MARK: - Cancelling

@Test func cancel_beforeStart_finishesItCancelled_withoutStartingIt() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "a") { _ in
                try await context.sleep(seconds: 2)
                seen.append("a end \(context.now)")
            }
            let b = q.add(name: "b") { _ in seen.append("b ran") }
            b?.cancel()
            seen.append("b finished=\(b?.isFinished == true) cancelled=\(b?.stopReason == .cancelled)")
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["b finished=true cancelled=true", "a end 2.0"])
    #expect(
        lines(recorder, only: opLines) == [
            finished("0", 2, "b", .cancelled), started("0", 1, "a"), finished("2", 1, "a"),
        ])
}

@Test func cancel_duringAWait_throwsCancellationInTheCode_andTheNextOneStarts() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            let a = q.add(name: "a") { _ in
                do {
                    try await context.sleep(seconds: 100)
                    seen.append("a woke")
                } catch {
                    seen.append("a \(type(of: error)) at \(context.now)")
                    throw error
                }
            }
            q.add(name: "b") { _ in seen.append("b start \(context.now)") }
            context.after(3) { a?.cancel() }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["a CancellationError at 3.0", "b start 3.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), finished("3", 1, "a", .cancelled), started("3", 2, "b"), finished("3", 2, "b"),
        ])
    #expect(recorder.pluginErrorCount == 0)
}

@Test func cancelAll_finishesPendingOnesAtOnce_andCancelsTheRunningOnes() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q", maxConcurrent: 2)
        context.on(.didFinishLaunching) { _ in
            for name in ["a", "b"] {
                q.add(name: name) { _ in
                    do {
                        try await context.sleep(seconds: 100)
                    } catch {
                        seen.append("\(name) \(type(of: error)) at \(context.now)")
                        throw error
                    }
                }
            }
            q.add(name: "c") { _ in seen.append("c ran") }
            context.after(2) { q.cancelAll() }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["a CancellationError at 2.0", "b CancellationError at 2.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("0", 1, "a"), started("0", 2, "b"), finished("2", 3, "c", .cancelled),
            finished("2", 1, "a", .cancelled), finished("2", 2, "b", .cancelled),
        ])
    #expect(lines(recorder, only: ["taskEnded"]) == ["2 taskEnded plugin=p task=1 expired=false"])
}

@Test func waitUntilFinished_returnsOnceTheOperationHasFinished() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            let a = q.add(name: "a") { _ in try await context.sleep(seconds: 3) }
            let b = q.add(name: "b") { _ in seen.append("b ran") }
            b?.cancel()
            context.task {
                guard let a, let b else { return }
                await b.waitUntilFinished()
                seen.append("b waited at \(context.now)")
                await a.waitUntilFinished()
                seen.append("a waited at \(context.now)")
            }
        }
    }
    _ = try simulate("0s launch", [plugin])
    #expect(seen.value == ["b waited at 0.0", "a waited at 3.0"])
}

// MARK: - Suspend and resume

@Test func suspend_isCounted_twoSuspendsNeedTwoResumes_andAQueueSuspendedWithNothingRunningHoldsNoTask() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.suspend()
            q.suspend()
            q.add(name: "a") { _ in
                seen.append("a start \(context.now)")
                try await context.sleep(seconds: 1)
            }
            context.after(2) { seen.append("resume 1: \(q.resume()) suspended=\(q.isSuspended)") }
            context.after(4) { seen.append("resume 2: \(q.resume()) suspended=\(q.isSuspended)") }
            context.after(6) { seen.append("resume 3: \(q.resume())") }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "resume 1: true suspended=true", "resume 2: true suspended=false", "a start 4.0", "resume 3: false",
        ])
    #expect(lines(recorder, only: opLines) == [started("4", 1, "a"), finished("5", 1, "a")])
    #expect(
        lines(recorder, only: taskLines) == [
            "4 taskBegan plugin=p task=1 name=queue q", "5 taskEnded plugin=p task=1 expired=false",
        ])
}

@Test func suspend_inTheBackground_endsTheQueuesTaskOnceNothingRuns_andTheAppSuspends() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didEnterBackground) { _ in
            q.add(name: "a") { _ in try await context.sleep(seconds: 2) }  // runs from 1 to 3
            q.add(name: "b") { _ in
                seen.append("b start \(context.now)")
                try await context.sleep(seconds: 1)
            }
            context.after(1) { q.suspend() }  // at 2, while a runs
        }
        context.on(.willEnterForeground) { _ in seen.append("resume: \(q.resume())") }
    }
    let recorder = try simulate("0s launch\n1s background\n40s foreground", [plugin])
    #expect(seen.value == ["resume: true", "b start 40.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("1", 1, "a"), finished("3", 1, "a"), started("40", 2, "b"), finished("41", 2, "b"),
        ])
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=queue q", "3 taskEnded plugin=p task=1 expired=false", "3 suspended",
            "40 taskBegan plugin=p task=2 name=queue q", "41 taskEnded plugin=p task=2 expired=false",
        ])
    #expect(recorder.termination == nil)
}

// MARK: - Delegates

@Test func delegates_willStartBeforeTheFirstStart_didFinishAfterTheLastFinishAndBeforeTheTaskEnds() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        // Each delegate call leaves a mark in the timeline: a task begun and ended at once.
        func mark(_ event: String) {
            seen.append("\(event) at \(context.now) holdsTask=\(q.core.holdsTask)")
            let id = context.beginBackgroundTask("\(event)-mark")
            context.endBackgroundTask(id)
        }
        q.on(.willStartOperations) { mark("will") }
        q.on(.didFinishOperations) { mark("did") }
        context.on(.didFinishLaunching) { _ in
            q.add(name: "a") { _ in try await context.sleep(seconds: 1) }
            q.add(name: "b") { _ in try await context.sleep(seconds: 2) }
            // A second stretch of work, after the queue drained.
            context.after(10) { q.add(name: "c") { _ in try await context.sleep(seconds: 1) } }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(
        seen.value == [
            "will at 0.0 holdsTask=true", "did at 3.0 holdsTask=true", "will at 10.0 holdsTask=true",
            "did at 11.0 holdsTask=true",
        ])
    #expect(
        lines(recorder, only: opLines.union(["taskBegan", "taskEnded"])) == [
            "0 taskBegan plugin=p task=1 name=queue q",
            "0 taskBegan plugin=p task=2 name=will-mark", "0 taskEnded plugin=p task=2 expired=false",
            started("0", 1, "a"), finished("1", 1, "a"), started("1", 2, "b"), finished("3", 2, "b"),
            "3 taskBegan plugin=p task=3 name=did-mark", "3 taskEnded plugin=p task=3 expired=false",
            "3 taskEnded plugin=p task=1 expired=false",
            "10 taskBegan plugin=p task=4 name=queue q",
            "10 taskBegan plugin=p task=5 name=will-mark", "10 taskEnded plugin=p task=5 expired=false",
            started("10", 3, "c"), finished("11", 3, "c"),
            "11 taskBegan plugin=p task=6 name=did-mark", "11 taskEnded plugin=p task=6 expired=false",
            "11 taskEnded plugin=p task=4 expired=false",
        ])
}

// MARK: - One background task per queue

@Test func burstOfAThousandOperations_holdsExactlyOneBackgroundTask() throws {
    let done = Shared(0)
    let running = Shared(0)
    let peak = Shared(0)
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let q = context.backgroundQueue
            for _ in 0..<1000 {
                q.add { _ in
                    let now = running.mutate { n -> Int in
                        n += 1
                        return n
                    }
                    peak.mutate { $0 = max($0, now) }
                    try await context.sleep(seconds: 0.01)
                    running.mutate { $0 -= 1 }
                    done.mutate { $0 += 1 }
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [plugin])
    #expect(done.value == 1000)
    #expect(peak.value == HostQueue.backgroundMaxConcurrent)
    // 250 rounds of four 10 ms operations.
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=queue background", "3.5 taskEnded plugin=p task=1 expired=false",
            "3.5 suspended",
        ])
    let startedLines = lines(recorder, only: ["opStarted"])
    let finishedLines = lines(recorder, only: ["opFinished"])
    #expect(startedLines.count == 1000)
    #expect(finishedLines.count == 1000)
    #expect(finishedLines.allSatisfy { $0.hasSuffix("result=finished") })
    #expect(recorder.termination == nil)
}

// MARK: - Expiration

@Test func expiration_stopsTheRunningOp_startsNoPendingOne_endsTheTask_andThePendingRunInTheForeground() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didEnterBackground) { _ in
            for name in ["a", "b", "c"] {
                q.add(name: name, timeout: .infinity) { _ in
                    seen.append("\(name) start \(context.now)")
                    do {
                        try await context.sleep(seconds: 20)
                    } catch {
                        seen.append("\(name) \(type(of: error)) at \(context.now)")
                        throw error
                    }
                }
            }
        }
    }
    // ios13: the budget is 30 s; expiration comes 25 s after entering the background, at 26.
    let recorder = try simulate("0s launch\n1s background\n40s foreground", [plugin])
    #expect(seen.value == ["a start 1.0", "b start 21.0", "b CancellationError at 26.0", "c start 40.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("1", 1, "a"), finished("21", 1, "a"), started("21", 2, "b"), finished("26", 2, "b", .expired),
            started("40", 3, "c"), finished("60", 3, "c"),
        ])
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=queue q", "26 taskExpiring plugin=p task=1",
            "26 taskEnded plugin=p task=1 expired=true", "26 suspended",
            "40 taskBegan plugin=p task=2 name=queue q", "60 taskEnded plugin=p task=2 expired=false",
        ])
    #expect(recorder.termination == nil)
    #expect(recorder.pluginErrorCount == 0)
}

// MARK: - Failures

@Test func operationThatThrows_finishesFailed_recordsAPluginError_andTheNextOneStillRuns() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.add(name: "a") { _ in
                try await context.sleep(seconds: 1)
                throw PluginFailure(text: "disk full")
            }
            q.addOperation(name: "b") { _ in throw PluginFailure(text: "bad input") }
            q.add(name: "c") { _ in seen.append("c start \(context.now)") }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(seen.value == ["c start 1.0"])
    #expect(
        lines(recorder, only: opLines.union(["pluginError"])) == [
            started("0", 1, "a"),
            "1 pluginError plugin=p message=disk full traceback=(Swift code: no traceback)",
            finished("1", 1, "a", .failed), started("1", 2, "b"),
            "1 pluginError plugin=p message=bad input traceback=(Swift code: no traceback)",
            finished("1", 2, "b", .failed), started("1", 3, "c"), finished("1", 3, "c"),
        ])
    #expect(recorder.pluginErrorCount == 2)
    #expect(recorder.termination == nil)
}

// MARK: - Sharing

@Test func twoSwiftPlugins_shareOneQueueByName() throws {
    let seen = Shared<[String]>([])
    let first = swiftPlugin("p1") { context in
        let q = try context.queue("shared", maxConcurrent: 1)
        context.on(.didFinishLaunching) { _ in
            q.add(name: "sync") { _ in  // op 1
                seen.append("p1 sync start \(context.now)")
                try await context.sleep(seconds: 2)
                seen.append("p1 sync end \(context.now)")
            }
        }
    }
    let second = swiftPlugin("p2") { context in
        context.on(.didFinishLaunching) { _ in
            do throws(QueueError) {
                _ = try context.queue("shared", maxConcurrent: 3)
                seen.append("p2 got it with maxConcurrent 3")
            } catch {
                seen.append("p2: \(error.message)")
            }
            let q = try context.queue("shared")
            seen.append("p2 sees maxConcurrent=\(q.maxConcurrent) count=\(q.count)")
            let duplicate = q.add(name: "sync", unique: .drop) { _ in seen.append("p2 sync ran") }  // op 2
            seen.append("p2 duplicate dropped: \(duplicate == nil)")
            q.add(name: "report") { _ in  // op 3
                seen.append("p2 report start \(context.now)")
                try await context.sleep(seconds: 1)
            }
        }
    }
    let recorder = try simulate("0s launch", [first, second])
    #expect(
        seen.value == [
            "p2: queue 'shared' already exists with maxConcurrent = 1, not 3", "p2 sees maxConcurrent=1 count=1",
            "p2 duplicate dropped: true", "p1 sync start 0.0", "p1 sync end 2.0", "p2 report start 2.0",
        ])
    #expect(
        lines(recorder, only: opLines) == [
            "0 opDropped plugin=p2 queue=shared op=2 name=sync existing=1",
            started("0", 1, "sync", queue: "shared", plugin: "p1"),
            finished("2", 1, "sync", queue: "shared", plugin: "p1"),
            started("2", 3, "report", queue: "shared", plugin: "p2"),
            finished("3", 3, "report", queue: "shared", plugin: "p2"),
        ])
    #expect(
        lines(recorder, only: taskLines) == [
            "0 taskBegan plugin=p1 task=1 name=queue shared", "3 taskEnded plugin=p1 task=1 expired=false",
        ])
}

@Test func didFinishOperations_addingWork_carriesOnUnderTheSameTask() throws {
    let seen = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        var addAgain = true
        q.on(.willStartOperations) { seen.append("will at \(context.now)") }
        q.on(.didFinishOperations) {
            seen.append("did at \(context.now)")
            if addAgain {
                addAgain = false
                q.add(name: "b") { _ in try await context.sleep(seconds: 1) }
            }
        }
        context.on(.didEnterBackground) { _ in
            q.add(name: "a") { _ in try await context.sleep(seconds: 1) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [plugin])
    #expect(seen.value == ["will at 1.0", "did at 2.0", "will at 2.0", "did at 3.0"])
    #expect(
        lines(recorder, only: opLines) == [
            started("1", 1, "a"), finished("2", 1, "a"), started("2", 2, "b"), finished("3", 2, "b"),
        ])
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=queue q", "3 taskEnded plugin=p task=1 expired=false", "3 suspended",
        ])
}

@Test func longQueue_pastItsCompaction_keepsTheOrder_replacesInPlace_andCancels() throws {
    let order = Shared<[String]>([])
    let ops = Shared<[QueueOperation]>([])
    let plugin = swiftPlugin("p") { context in
        let q = Unchecked(value: try context.queue("q"))
        context.on(.didFinishLaunching) { _ in
            // n0...n1999 are ops 1...2000. More than 1,024 have started by the time n1500 runs.
            for i in 0..<2000 {
                let op = q.value.add(name: "n\(i)") { _ in
                    order.append("n\(i)")
                    if i == 1500 {
                        q.value.add(name: "n1800", unique: .replace) { _ in order.append("new n1800") }  // op 2001
                    }
                    if i == 1600 { ops.value[1700].cancel() }
                }
                if let op { ops.append(op) }
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    var expected = (0..<2000).filter { $0 != 1700 }.map { "n\($0)" }
    expected[expected.firstIndex(of: "n1800")!] = "new n1800"
    #expect(order.value == expected)
    #expect(
        lines(recorder, only: ["opReplaced"]) == ["0 opReplaced plugin=p queue=q op=2001 name=n1800 replaced=1801"])
    #expect(
        lines(recorder, only: ["opFinished"]).filter { $0.contains("result=cancelled") } == [
            finished("0", 1801, "n1800", .cancelled), finished("0", 1701, "n1700", .cancelled),
        ])
    #expect(lines(recorder, only: ["opStarted"]).count == 1999)
    #expect(lines(recorder, only: ["taskBegan", "taskEnded"]).count == 2)
}

@Test func timeout_onTimeoutThatFinishesTheOperation_stillRecordsItAsTimedOut() throws {
    let plugin = swiftPlugin("p") { context in
        let q = try context.queue("q")
        context.on(.didFinishLaunching) { _ in
            q.addOperation(name: "async-style", timeout: 2, finishesOnReturn: false, onTimeout: { op in op.finish() }) {
                _ in
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(lines(recorder, only: opLines) == [started("0", 1, "async-style"), finished("2", 1, "async-style", .timedOut)])
}

