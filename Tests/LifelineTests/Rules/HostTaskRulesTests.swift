import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 4, T1–T9, through the host in virtual time. Each test checks the recorded timeline and the
// termination, as `lifeline simulate` would report them.

// MARK: - T1. Begin

@Test func t1_beginInEveryNotification_returnsPositiveUniqueIDs() throws {
    let ids = Shared<[Int]>([])
    let states = Shared<[AppState]>([])
    let p = swiftPlugin("p") { context in
        for name in LifecycleEventName.allCases {
            context.on(name) { _ in
                states.append(context.state)
                ids.append(context.beginBackgroundTask(name.rawValue))
            }
        }
    }
    let recorder = try simulate("0s launch\n1s memory-warning\n2s background\n3s foreground\n4s terminate", [p])
    // didFinishLaunching, didBecomeActive, memory warning, willResignActive, didEnterBackground,
    // willEnterForeground, didBecomeActive, willTerminate.
    #expect(ids.value.count == 8)
    #expect(ids.value.allSatisfy { $0 > 0 })
    #expect(Set(ids.value).count == ids.value.count)
    #expect(Set(states.value) == [.inactive, .active, .background])
    #expect(lines(recorder, only: ["taskBegan"]).count == 8)
    #expect(recorder.termination == nil)
}

@Test func t1_taskBegan_recordsPluginTaskAndName() throws {
    let p = swiftPlugin("saver") { context in
        context.on(.didEnterBackground) { _ in
            let named = context.beginBackgroundTask("save")
            let unnamed = context.beginBackgroundTask()
            context.after(1) {
                context.endBackgroundTask(named)
                context.endBackgroundTask(unnamed)
            }
        }
    }
    let recorder = try simulate("0s launch\n2s background", [p])
    #expect(
        lines(recorder, only: taskEvents) == [
            "2 taskBegan plugin=saver task=1 name=save",
            "2 taskBegan plugin=saver task=2",
            "3 taskEnded plugin=saver task=1 expired=false",
            "3 taskEnded plugin=saver task=2 expired=false",
            "3 suspended",
        ])
}

@Test func t1_ids_areNeverReusedAcrossRelaunches() throws {
    let ids = Shared<[Int]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didFinishLaunching) { _ in
            let id = context.beginBackgroundTask("boot")
            ids.append(id)
            context.endBackgroundTask(id)
        }
    }
    _ = try simulate("0s launch\n1s terminate\n2s launch\n3s kill\n4s launch", [p])
    #expect(ids.value.count == 3)
    #expect(ids.value == ids.value.sorted())
    #expect(Set(ids.value).count == 3)
    #expect(ids.value.allSatisfy { $0 > 0 })
}

@Test func t1_beginAfterTheAppEnded_returnsZero() throws {
    let saved = Shared<PluginContext?>(nil)
    let early = Shared(0)
    let p = swiftPlugin("p") { context in
        saved.value = context
        // Positive control: the same context, while the app runs, begins a real task.
        early.value = context.beginBackgroundTask("early")
        context.endBackgroundTask(early.value)
    }
    let h = Harness([p])
    h.at(0, .launch)
    h.at(1, .terminate)
    h.run(until: 10)
    let context = try #require(saved.value)
    #expect(early.value > 0)
    #expect(context.beginBackgroundTask("late") == 0)
    #expect(lines(h.recorder, only: ["taskBegan"]) == ["0 taskBegan plugin=p task=\(early.value) name=early"])
}

// MARK: - T2. The budget

@Test func t2_taskBegunInForeground_budgetStartsAtBackgroundEntry() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didFinishLaunching) { _ in _ = context.beginBackgroundTask("early") }
    }
    let recorder = try simulate("0s launch\n10s background", [p])
    #expect(
        lines(recorder, only: taskEvents) == [
            "0 taskBegan plugin=p task=1 name=early",
            "35 taskExpiring plugin=p task=1",
            "40 terminated kind=backgroundTaskTimeout code=0x2182bad2",
        ])
}

@Test func t2_budget_restartsFullOnEachEntryIntoBackground() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didFinishLaunching) { _ in _ = context.beginBackgroundTask("long") }
    }
    let recorder = try simulate("0s launch\n2s background\n20s foreground\n30s background", [p])
    #expect(
        lines(recorder, only: taskEvents) == [
            "0 taskBegan plugin=p task=1 name=long",
            "55 taskExpiring plugin=p task=1",
            "60 terminated kind=backgroundTaskTimeout code=0x2182bad2",
        ])
}

@Test(arguments: [LifecycleEventName.didFinishLaunching, .didBecomeActive, .willResignActive, .willEnterForeground])
func t2_backgroundTimeRemaining_inForeground_isGreatestFiniteMagnitude(_ event: LifecycleEventName) throws {
    let seen = Shared<[Double]>([])
    let p = swiftPlugin("p") { context in
        context.on(event) { _ in seen.append(context.backgroundTimeRemaining) }
    }
    _ = try simulate("0s launch\n1s background\n2s foreground", [p])
    #expect(!seen.value.isEmpty)
    #expect(seen.value.allSatisfy { $0 == .greatestFiniteMagnitude })
}

@Test(arguments: Profile.all)
func t2_backgroundTimeRemaining_atEntry_isTheFullBudget(_ profile: Profile) throws {
    let seen = Shared<[Double]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in seen.append(context.backgroundTimeRemaining) }
    }
    _ = try simulate("0s launch\n7s background", [p], profile: profile)
    #expect(seen.value == [profile.budget])
}

@Test func t2_backgroundTimeRemaining_countsDownOnlyInBackground() throws {
    let seen = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("work")
            context.after(10) {
                seen.append("\(context.now) \(context.backgroundTimeRemaining)")
                context.endBackgroundTask(id)
            }
            context.after(22.5) { seen.append("\(context.now) \(context.backgroundTimeRemaining)") }
        }
    }
    // Second stay: the task's timer reads 20 s left, 10 s after entry, as in the first stay.
    _ = try simulate("0s launch\n1s background\n50s foreground\n60s background\n100s foreground", [p])
    // The timer at 22.5 s after entry falls due while suspended and fires on foreground.
    #expect(seen.value == ["11.0 20.0", "50.0 1.7976931348623157e+308", "70.0 20.0", "100.0 1.7976931348623157e+308"])
}

@Test func t2_launchInBackground_startsTheBudget() throws {
    let remaining = Shared<[Double]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didFinishLaunching) { _ in
            remaining.append(context.backgroundTimeRemaining)
            _ = context.beginBackgroundTask("fetch")
        }
    }
    let recorder = try simulate("5s launch background", [p])
    #expect(remaining.value == [30])
    #expect(
        lines(recorder, only: taskEvents) == [
            "5 taskBegan plugin=p task=1 name=fetch",
            "30 taskExpiring plugin=p task=1",
            "35 terminated kind=backgroundTaskTimeout code=0x2182bad2",
        ])
}

// MARK: - T3. Expiration

@Test func t3_expiration_signalsEveryActiveTaskInBeginOrder_withOrWithoutHandler() throws {
    let handled = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var a = 0
            var c = 0
            a = context.beginBackgroundTask("a") {
                handled.append("a@\(context.now)")
                context.endBackgroundTask(a)
            }
            let b = context.beginBackgroundTask("b")  // no handler
            c = context.beginBackgroundTask("c") {
                handled.append("c@\(context.now)")
                context.endBackgroundTask(c)
            }
            context.after(26) { context.endBackgroundTask(b) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    #expect(handled.value == ["a@26.0", "c@26.0"])
    #expect(
        lines(recorder, only: taskEvents) == [
            "1 taskBegan plugin=p task=1 name=a",
            "1 taskBegan plugin=p task=2 name=b",
            "1 taskBegan plugin=p task=3 name=c",
            "26 taskExpiring plugin=p task=1",
            "26 taskEnded plugin=p task=1 expired=true",
            "26 taskExpiring plugin=p task=2",
            "26 taskExpiring plugin=p task=3",
            "26 taskEnded plugin=p task=3 expired=true",
            "27 taskEnded plugin=p task=2 expired=true",
            "27 suspended",
        ])
    #expect(recorder.termination == nil)
}

@Test func t3_tasksOfSeveralPlugins_expireInBeginOrder() throws {
    let order = Shared<[String]>([])
    func plugin(_ name: String, beginAt delay: Double) -> PluginDescriptor {
        swiftPlugin(name) { context in
            context.on(.didEnterBackground) { _ in
                context.after(delay) {
                    var id = 0
                    id = context.beginBackgroundTask(name) {
                        order.append(name)
                        context.endBackgroundTask(id)
                    }
                }
            }
        }
    }
    // Keeps the app awake until the others have begun their tasks.
    let keeper = swiftPlugin("keeper") { context in
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("keeper") {
                order.append("keeper")
                context.endBackgroundTask(id)
            }
        }
    }
    // "a" loads first but begins its task last.
    let recorder = try simulate(
        "0s launch\n0s background", [plugin("a", beginAt: 3), plugin("b", beginAt: 1), plugin("c", beginAt: 2), keeper])
    #expect(order.value == ["keeper", "b", "c", "a"])
    #expect(
        lines(recorder, only: ["taskExpiring"]) == [
            "25 taskExpiring plugin=keeper task=1", "25 taskExpiring plugin=b task=2",
            "25 taskExpiring plugin=c task=3", "25 taskExpiring plugin=a task=4",
        ])
}

@Test(arguments: Profile.all)
func t3_expirationMoment_isBudgetMinusLead(_ profile: Profile) throws {
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("t") { context.endBackgroundTask(id) }
        }
    }
    let recorder = try simulate("0s launch\n10s background", [p], profile: profile)
    let at = ReportNumber.seconds(10 + profile.budget - profile.expirationLead)
    #expect(lines(recorder, only: ["taskExpiring"]) == ["\(at) taskExpiring plugin=p task=1"])
}

@Test func t3_taskBegunAfterTheExpirationMoment_handlerRunsAtOnceWithItsIDKnown() throws {
    let log = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            // Keeps the app awake past the expiration moment (26 s), without a handler.
            let keeper = context.beginBackgroundTask("keeper")
            context.after(26.5) {
                let late = Shared(0)
                late.value = context.beginBackgroundTask("late") {
                    log.append("handler@\(context.now) sees id \(late.value)")
                    context.endBackgroundTask(late.value)
                }
                log.append("begin returned \(late.value)")
            }
            context.after(27) { context.endBackgroundTask(keeper) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    // Never from inside beginBackgroundTask: the caller holds the id before the handler runs.
    #expect(log.value == ["begin returned 2", "handler@27.5 sees id 2"])
    #expect(
        lines(recorder, only: taskEvents) == [
            "1 taskBegan plugin=p task=1 name=keeper",
            "26 taskExpiring plugin=p task=1",
            "27.5 taskBegan plugin=p task=2 name=late",
            "27.5 taskExpiring plugin=p task=2",
            "27.5 taskEnded plugin=p task=2 expired=true",
            "28 taskEnded plugin=p task=1 expired=true",
            "28 suspended",
        ])
}

@Test func t3_taskBegunInsideAnExpirationHandler_isSignalledOnTheNextTurn() throws {
    let log = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var first = 0
            first = context.beginBackgroundTask("first") {
                var second = 0
                second = context.beginBackgroundTask("second") {
                    log.append("second's handler")
                    context.endBackgroundTask(second)
                }
                log.append("first's handler began \(second)")
                context.endBackgroundTask(first)
            }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [p])
    #expect(log.value == ["first's handler began 2", "second's handler"])
    #expect(
        lines(recorder, only: ["taskExpiring", "taskEnded", "suspended"]) == [
            "25 taskExpiring plugin=p task=1",
            "25 taskEnded plugin=p task=1 expired=true",
            "25 taskExpiring plugin=p task=2",
            "25 taskEnded plugin=p task=2 expired=true",
            "25 suspended",
        ])
}

@Test func t3_taskEndedBeforeTheExpirationMoment_isNotSignalled() throws {
    let called = Shared(false)
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("quick") { called.value = true }
            let keeper = context.beginBackgroundTask("keeper")
            context.after(5) { context.endBackgroundTask(id) }
            context.after(27) { context.endBackgroundTask(keeper) }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [p])
    #expect(called.value == false)
    #expect(lines(recorder, only: ["taskExpiring"]) == ["25 taskExpiring plugin=p task=2"])
}

@Test func t3_foregroundBeforeTheMoment_cancelsExpiration() throws {
    let called = Shared(false)
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("t") {
                called.value = true
                context.endBackgroundTask(id)
            }
        }
    }
    let recorder = try simulate("0s launch\n1s background\n10s foreground", [p])
    #expect(called.value == false)
    #expect(lines(recorder, only: ["taskExpiring", "terminated"]).isEmpty)
    // Positive control: left in the background, the same task reaches the moment at 26 s.
    let control = try simulate("0s launch\n1s background", [p])
    #expect(called.value == true)
    #expect(lines(control, only: ["taskExpiring"]) == ["26 taskExpiring plugin=p task=1"])
}

// MARK: - T4. Handlers end their tasks

@Test func t4_handlerThatDoesNotEndItsTask_appIsTerminatedAtBudgetEnd() throws {
    let calls = Shared(0)
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            _ = context.beginBackgroundTask("stubborn") { calls.mutate { $0 += 1 } }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    #expect(calls.value == 1)
    #expect(
        lines(recorder, only: taskEvents) == [
            "1 taskBegan plugin=p task=1 name=stubborn",
            "26 taskExpiring plugin=p task=1",
            "31 terminated kind=backgroundTaskTimeout code=0x2182bad2",
        ])
    #expect(recorder.termination?.kind == .backgroundTaskTimeout)
}

@Test func t4_handlersReturnWithTasksActive_logIOSWarning() throws {
    let logs = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("stubborn") {} }
    }
    _ = try simulate("0s launch\n1s background", [p], logger: capturingLogger(logs))
    #expect(
        logs.value.contains {
            $0.contains("background task still not ended after expiration handlers were called")
                || $0.contains("Background task still not ended after expiration handlers were called")
        })
}

@Test func t4_handlersEndTheirTasks_noWarningAndNoTermination() throws {
    let logs = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("polite") { context.endBackgroundTask(id) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p], logger: capturingLogger(logs))
    #expect(!logs.value.contains { $0.lowercased().contains("still not ended") })
    #expect(recorder.termination == nil)
    #expect(recorder.exitCode == 0)
    // Positive control: a handler that leaves its task running gets the warning, in the same logs.
    let rude = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("rude") {} }
    }
    let control = try simulate("0s launch\n1s background", [rude], logger: capturingLogger(logs))
    #expect(logs.value.contains { $0.lowercased().contains("still not ended") })
    #expect(control.termination?.kind == .backgroundTaskTimeout)
}

// MARK: - T5. Time runs out

@Test func t5_budgetRunsOut_terminatesWithBackgroundTaskTimeout() throws {
    let p = swiftPlugin("uploader") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("upload") }
    }
    let recorder = try simulate("0s launch\n2s background", [p])
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .backgroundTaskTimeout)
    #expect(termination.kind.code == "0x2182bad2")
    #expect(termination.plugin == "uploader")
    #expect(termination.time == .seconds(32))
    #expect(termination.traceback == nil)
    #expect(recorder.exitCode == 1)
    #expect(lines(recorder).last == "32 terminated kind=backgroundTaskTimeout code=0x2182bad2")
    #expect(recorder.report()["outcome"] == .string("terminated"))
}

@Test func t5_reason_namesEveryTaskLeft() throws {
    let a = swiftPlugin("alpha") { context in
        context.on(.didEnterBackground) { _ in
            _ = context.beginBackgroundTask("upload")
            let done = context.beginBackgroundTask("done")
            context.after(1) { context.endBackgroundTask(done) }
        }
    }
    let b = swiftPlugin("beta") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask() }
    }
    let recorder = try simulate("0s launch\n0s background", [a, b])
    let reason = try #require(recorder.termination?.reason)
    #expect(reason.contains("alpha"))
    #expect(reason.contains("task 1"))
    #expect(reason.contains("upload"))
    #expect(reason.contains("beta"))
    #expect(reason.contains("task 3"))
    #expect(!reason.contains("task 2"), "the task that ended is not named")
    #expect(!reason.contains("'done'"))
}

@Test func t5_taskEndedInTimeByItsHandler_noTermination() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("t") { context.after(4.9) { context.endBackgroundTask(id) } }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [p])
    #expect(recorder.termination == nil)
    #expect(lines(recorder, only: ["taskEnded", "suspended"]) == ["29.9 taskEnded plugin=p task=1 expired=true", "29.9 suspended"])
}

// MARK: - T6. Ending an unknown id

@Test(arguments: [0, 42, -3])
func t6_endUnknownID_returnsFalseAndRecordsEndUnknownTask(_ id: Int) throws {
    let result = Shared<Bool?>(nil)
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in result.value = context.endBackgroundTask(id) }
    }
    let recorder = try simulate("0s launch", [p])
    #expect(result.value == false)
    #expect(lines(recorder, only: ["endUnknownTask"]) == ["0 endUnknownTask plugin=p task=\(id)"])
    #expect(recorder.termination == nil)
    #expect(recorder.exitCode == 0)
}

@Test func t6_endAnEndedTask_returnsFalseAndRecordsEndUnknownTask() throws {
    let results = Shared<[Bool]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("t")
            results.append(context.endBackgroundTask(id))
            results.append(context.endBackgroundTask(id))
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    #expect(results.value == [true, false])
    #expect(
        lines(recorder, only: taskEvents) == [
            "1 taskBegan plugin=p task=1 name=t",
            "1 taskEnded plugin=p task=1 expired=false",
            "1 endUnknownTask plugin=p task=1",
            "1 suspended",
        ])
}

@Test func t6_endUnknownID_logsIOSWarning() throws {
    let logs = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in context.endBackgroundTask(77) }
    }
    _ = try simulate("0s launch", [p], logger: capturingLogger(logs))
    #expect(
        logs.value.contains {
            $0.contains("no background task exists with identifier 77, or it may have already been ended")
        })
}

// MARK: - T7. Suspension

@Test func t7_noTaskAfterDidEnterBackground_suspendedAtOnce() throws {
    let p = swiftPlugin("p") { context in context.on(.didEnterBackground) { _ in } }
    let recorder = try simulate("0s launch\n3s background", [p])
    #expect(Array(eventNames(recorder).suffix(2)) == ["didEnterBackground", "suspended"])
    #expect(lines(recorder, only: ["suspended"]) == ["3 suspended"])
}

@Test func t7_lastTaskEnds_suspended() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let a = context.beginBackgroundTask("a")
            let b = context.beginBackgroundTask("b")
            context.after(5) { context.endBackgroundTask(a) }
            context.after(8) { context.endBackgroundTask(b) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    #expect(
        lines(recorder, only: ["taskEnded", "suspended"]) == [
            "6 taskEnded plugin=p task=1 expired=false",
            "9 taskEnded plugin=p task=2 expired=false",
            "9 suspended",
        ])
}

@Test func t7_handlerStillRunning_delaysSuspensionUntilItReturns() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            // The only task ends, then the same handler begins another: no suspension in between.
            let first = context.beginBackgroundTask("first")
            context.endBackgroundTask(first)
            let second = context.beginBackgroundTask("second")
            context.after(4) { context.endBackgroundTask(second) }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [p])
    #expect(lines(recorder, only: ["suspended"]) == ["5 suspended"])
}

@Test func t7_timersDoNotFireWhileSuspended_andFireOnForeground() throws {
    let log = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didFinishLaunching) { _ in
            context.after(5) { log.append("timer@\(context.now) \(context.state.rawValue)") }
        }
        context.on(.willEnterForeground) { _ in log.append("willEnterForeground@\(context.now)") }
    }
    let recorder = try simulate("0s launch\n1s background\n20s foreground", [p])
    #expect(log.value == ["willEnterForeground@20.0", "timer@20.0 active"])
    #expect(lines(recorder, only: ["suspended"]) == ["1 suspended"])
}

@Test func t7_timersHeldWhileSuspended_fireInTheirOrder() throws {
    let log = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.after(9) { log.append("nine@\(context.now)") }
            context.after(3) { log.append("three@\(context.now)") }
            context.after(6) { log.append("six@\(context.now)") }
            context.after(100) { log.append("hundred@\(context.now)") }
        }
    }
    _ = try simulate("0s launch\n1s background\n30s foreground", [p])
    // Due at 4, 7 and 10 s while suspended: all three at the foreground, in their order; the
    // fourth at its own time.
    #expect(log.value == ["three@30.0", "six@30.0", "nine@30.0", "hundred@101.0"])
}

@Test func t7_timerDueInBackgroundWithATask_firesOnTime() throws {
    let log = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("t")
            context.after(3) {
                log.append("timer@\(context.now) \(context.state.rawValue)")
                context.endBackgroundTask(id)
            }
        }
    }
    _ = try simulate("0s launch\n1s background", [p])
    #expect(log.value == ["timer@4.0 background"])
}

@Test func t7_cancelledTimer_neverFires() throws {
    let fired = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in
            let id = context.after(1) { fired.append("cancelled@\(context.now)") }
            context.after(2) { fired.append("kept@\(context.now)") }
            context.cancelTimer(id)
        }
    }
    _ = try simulate("0s launch\n10s resign", [p])
    #expect(fired.value == ["kept@2.0"], "the timer set beside it fires; the cancelled one never")
}

// MARK: - T8. Task limit

private let limit3 = profile { $0.taskLimit = 3 }

@Test func t8_beyondTaskLimit_terminatesWithTaskLimit() throws {
    let ids = Shared<[Int]>([])
    let p = swiftPlugin("greedy") { context in
        context.on(.didEnterBackground) { _ in
            for i in 1...4 { ids.append(context.beginBackgroundTask("t\(i)")) }
        }
    }
    let recorder = try simulate("0s launch\n2s background", [p], profile: limit3)
    #expect(ids.value.count == 4)
    #expect(ids.value.prefix(3).allSatisfy { $0 > 0 })
    #expect(Set(ids.value.prefix(3)).count == 3, "three distinct tasks")
    #expect(ids.value.last == 0, "the task beyond the limit is invalid")
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .taskLimit)
    #expect(termination.kind.code == "0xbada5e47")
    #expect(termination.plugin == "greedy")
    #expect(termination.time == .seconds(2))
    #expect(termination.reason.contains("greedy"))
    #expect(recorder.exitCode == 1)
    #expect(
        lines(recorder, only: taskEvents) == [
            "2 taskBegan plugin=greedy task=1 name=t1",
            "2 taskBegan plugin=greedy task=2 name=t2",
            "2 taskBegan plugin=greedy task=3 name=t3",
            "2 terminated kind=taskLimit code=0xbada5e47",
        ])
}

@Test func t8_tasksBegunInTheForeground_countToo() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in for _ in 1...4 { _ = context.beginBackgroundTask() } }
    }
    let recorder = try simulate("0s launch", [p], profile: limit3)
    #expect(recorder.termination?.kind == .taskLimit)
}

@Test func t8_limitCountsActiveTasksNotTasksEverBegun() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in
            for _ in 1...10 {
                let id = context.beginBackgroundTask()
                context.endBackgroundTask(id)
            }
            for _ in 1...3 { _ = context.beginBackgroundTask() }
        }
    }
    let recorder = try simulate("0s launch", [p], profile: limit3)
    #expect(recorder.termination == nil)
    #expect(lines(recorder, only: ["taskBegan"]).count == 13, "all thirteen began")
    // Positive control: a fourth task active at once is one too many.
    let greedy = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in for _ in 1...4 { _ = context.beginBackgroundTask() } }
    }
    #expect(try simulate("0s launch", [greedy], profile: limit3).termination?.kind == .taskLimit)
}

@Test func t8_tasksOfSeveralPlugins_shareTheLimit() throws {
    func plugin(_ name: String, _ count: Int) -> PluginDescriptor {
        swiftPlugin(name) { context in
            context.on(.didBecomeActive) { _ in for _ in 0..<count { _ = context.beginBackgroundTask() } }
        }
    }
    let recorder = try simulate("0s launch", [plugin("a", 2), plugin("b", 2)], profile: limit3)
    #expect(recorder.termination?.kind == .taskLimit)
    #expect(recorder.termination?.plugin == "b")
}

@Test func t8_defaultLimit_is1000() throws {
    #expect(Profile.ios13.taskLimit == 1000)
    func plugin(_ count: Int) -> PluginDescriptor {
        swiftPlugin("p") { context in
            context.on(.didBecomeActive) { _ in for _ in 0..<count { _ = context.beginBackgroundTask() } }
        }
    }
    #expect(try simulate("0s launch", [plugin(1000)]).termination == nil)
    #expect(try simulate("0s launch", [plugin(1001)]).termination?.kind == .taskLimit)
}

@Test func t8_preemptibleCode_isStoppedAtOnceAndTheTerminationCarriesItsTraceback() throws {
    let preemptor = RecordingPreemptor()
    let returned = Shared<[Int]>([])
    let p = rawPlugin("lua-greedy", kind: .lua, preemptor: preemptor) { context in
        context.subscribe(.didEnterBackground) { _ in
            for _ in 1...4 {
                returned.append(context.beginBackgroundTask(name: nil, expirationHandler: nil))
                // The bridge checks its stop flag after every call back into the host.
                if preemptor.count > 0 { return .preempted(traceback: "init.lua:5: in loop") }
            }
            return .returned
        }
        return .returned
    }
    let recorder = try simulate("0s launch\n1s background", [p], profile: limit3)
    #expect(preemptor.count == 1)
    #expect(returned.value == [1, 2, 3, 0])
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .taskLimit)
    #expect(termination.traceback == "init.lua:5: in loop")
}

@Test func t8_beyondTaskLimitWhileLoading_terminates() throws {
    let p = swiftPlugin("eager") { context in
        for _ in 1...4 { _ = context.beginBackgroundTask("boot") }
    }
    let recorder = try simulate("0s launch\n1s background", [p], profile: limit3)
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .taskLimit)
    #expect(termination.time == .zero)
}

// MARK: - T9. Nothing runs after termination

@Test func t9_timerSetBeforeTermination_neverFires() throws {
    let fired = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            _ = context.beginBackgroundTask("stuck")
            context.after(10) { fired.append("timer@\(context.now)") }
            context.after(40) { fired.append("timer@\(context.now)") }
        }
    }
    let h = Harness([p])
    h.at(0, .launch)
    h.at(1, .background)
    // Keep the executor going long after the termination at 31 s.
    h.run(until: 500, stopWhenStopped: false)
    #expect(h.recorder.termination?.kind == .backgroundTaskTimeout)
    #expect(fired.value == ["timer@11.0"], "the timer due before the termination fired, the one after never")
    #expect(eventNames(h.recorder).last == "terminated")
}

@Test func t9_afterTaskLimitTermination_noExpirationHandlerRuns() throws {
    let called = Shared(0)
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            for _ in 1...4 { _ = context.beginBackgroundTask { called.mutate { $0 += 1 } } }
        }
    }
    let h = Harness([p], profile: limit3)
    h.at(0, .launch)
    h.at(1, .background)
    h.run(until: 500, stopWhenStopped: false)
    #expect(h.recorder.termination?.kind == .taskLimit)
    #expect(called.value == 0)
    #expect(eventNames(h.recorder).last == "terminated")
}

@Test func t9_stepsAfterRuleTermination_areRefusedAndRunNoHandler() throws {
    let seen = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("stuck") }
        context.on(.willEnterForeground) { _ in seen.append("willEnterForeground") }
        context.on(.didBecomeActive) { _ in seen.append("didBecomeActive") }
    }
    let h = Harness([p])
    h.at(0, .launch)
    h.at(1, .background)
    h.at(100, .foreground)
    h.run(until: 500, stopWhenStopped: false)
    #expect(h.recorder.termination != nil)
    #expect(seen.value == ["didBecomeActive"], "only the launch's notification")
    #expect(h.refused.map(\.step) == [.foreground])
    #expect(h.host.state == .ended)
}

@Test func t9_timerOfAnEarlierLaunch_neverFiresInTheNextOne() throws {
    let made = Shared(0)
    let fired = Shared<[String]>([])
    let descriptor = PluginDescriptor(name: "p", kind: .swift) {
        let n = made.mutate { n -> Int in
            n += 1
            return n
        }
        return ClosurePlugin(
            name: "p", kind: .swift, preemptor: nil,
            start: { context in
                context.after(10) { fired.append("launch \(n) at \(context.now)") }
                return .returned
            }, onClose: {})
    }
    _ = try simulate("0s launch\n5s terminate\n6s launch", [descriptor])
    #expect(fired.value == ["launch 2 at 16.0"])
}

@Test func t9_timerHeldWhileSuspended_neverFiresAfterTerminate() throws {
    let fired = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let setAt = context.now
            context.after(2) { fired.append("set at \(setAt)") }
        }
    }
    // The first launch's timer falls due at 3 s while suspended; the app is then terminated.
    // The second launch's timer, due at 23 s, fires as usual.
    _ = try simulate("0s launch\n1s background\n10s terminate\n20s launch\n21s background\n22s foreground", [p])
    #expect(fired.value == ["set at 21.0"])
}
