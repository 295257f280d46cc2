import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

/// SPEC 7 and 2.2 at the edges: load failures, `check`, far-off times.
@Suite struct HostEdgeTests {
    @Test func skippedPlugin_timersAndTasksFromItsLoad_neverRun() throws {
        let fired = Shared(0)
        let broken = rawPlugin("a-broken") { context in
            context.after(1, perform: { fired.mutate { $0 += 1 } })
            _ = context.beginBackgroundTask("left-behind")
            return .raised(message: "init failed", traceback: "")
        }
        let fineFired = Shared<[Double]>([])
        let fine = swiftPlugin("b-fine") { context in context.after(1) { fineFired.append(context.now) } }
        let h = Harness([broken, fine], loadFailurePolicy: .skip)
        h.at(0, .launch)
        h.at(5, .background)
        h.run(until: 60)
        #expect(fired.value == 0, "a timer of a plugin that failed to load ran")
        #expect(fineFired.value == [1], "the same timer from a plugin that loaded fires")
        #expect(h.host.activeTasks.isEmpty)
        #expect(h.recorder.termination == nil, "a task from a failed load was left dangling")
        #expect(eventNames(h.recorder).contains("suspended"))
        #expect(h.recorder.exitCode == 1, "a skipped plugin makes the run's exit code 1")
    }

    @Test func skippedPlugin_contextCallsAfterTheFailure_doNothing() throws {
        let saved = Shared<PluginContext?>(nil)
        let broken = rawPlugin("broken") { context in
            saved.value = context
            return .raised(message: "init failed", traceback: "")
        }
        // Positive control: a plugin that loaded begins real tasks in the same run.
        let fineID = Shared(0)
        let fine = swiftPlugin("fine") { context in fineID.value = context.beginBackgroundTask("kept") }
        let h = Harness([broken, fine], loadFailurePolicy: .skip)
        h.at(0, .launch)
        h.run(until: 1)
        let context = try #require(saved.value)
        #expect(context.beginBackgroundTask(name: "late", expirationHandler: nil) == 0)
        #expect(fineID.value > 0)
        #expect(h.host.activeTasks.map(\.id) == [fineID.value], "only the loaded plugin's task is active")
    }

    @Test func loadFailure_underAbort_sendsNoNotificationToThePluginsThatLoaded() throws {
        let ran = Shared(0)
        let loaded = Shared(0)
        let fine = swiftPlugin("a-fine") { context in
            loaded.mutate { $0 += 1 }
            context.on(.didFinishLaunching) { _ in ran.mutate { $0 += 1 } }
        }
        let broken = rawPlugin("b-broken") { _ in .raised(message: "cannot load", traceback: "") }
        let h = Harness([fine, broken])
        h.at(0, .launch)
        h.run(until: 10)
        #expect(h.host.loadError?.exitCode == 65)
        #expect(loaded.value == 1, "the plugin before the broken one did load")
        #expect(ran.value == 0)
        #expect(!eventNames(h.recorder).contains("didFinishLaunching"))
    }

    @Test func check_taskLimitWhileLoading_failsThatPluginOnly_andTheNextIsStillChecked() throws {
        let greedy = swiftPlugin("a-greedy") { context in
            for _ in 0..<5 { _ = context.beginBackgroundTask("t") }
        }
        let broken = rawPlugin("b-broken") { _ in .raised(message: "b cannot load", traceback: "") }
        let fine = swiftPlugin("c-fine") { _ in }
        let results = LifelineHost.check(
            configuration: HostConfiguration(profile: profile { $0.taskLimit = 3 }, logger: quietLogger()),
            plugins: [fine, broken, greedy])
        #expect(results.map(\.plugin.name) == ["a-greedy", "b-broken", "c-fine"])
        #expect(results[0].failure?.contains("more than 3 background tasks") == true)
        #expect(results[1].failure == "b cannot load")
        #expect(results[2].failure == nil)
    }

    @Test func check_stateWhileLoading_isInactive() throws {
        let seen = Shared<[AppState]>([])
        let p = swiftPlugin("p") { context in seen.append(context.state) }
        _ = LifelineHost.check(configuration: HostConfiguration(logger: quietLogger()), plugins: [p])
        #expect(seen.value == [.inactive])
    }

    @Test(arguments: ["99999999999999999999h", "999999999999992s", "1e300s"])
    func scenario_timeTooFar_isABadInput_notACrash(_ time: String) throws {
        #expect(throws: LifelineError.self) { try Scenario.parse("0s launch\n\(time) background", fileName: "t.scenario") }
    }

    @Test func hostTime_saturatesInsteadOfOverflowing() {
        #expect(HostTime.seconds(1e300) == .distantFuture)
        #expect(HostTime.seconds(.nan) == .distantFuture)
        #expect(HostTime.seconds(1.5).nanoseconds == 1_500_000_000)
    }

    @Test func recorder_withoutTimeline_stillShowsEveryEventLive() {
        let seen = Shared<[String]>([])
        let recorder = Recorder(profileName: "ios13", keepsTimeline: false) { seen.append($0.event) }
        recorder.record(TimelineEvent(time: .zero, event: "didFinishLaunching"))
        recorder.record(TimelineEvent(time: .seconds(1), event: "suspended"))
        #expect(seen.value == ["didFinishLaunching", "suspended"])
        #expect(recorder.timeline.isEmpty)
    }
}
