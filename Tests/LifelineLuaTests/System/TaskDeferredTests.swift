import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Why a pending task request did not run: `taskDeferred`, once per request and reason, on the
// virtual clock with a real Lua plugin.

private let manifest = """
    [background]
    identifiers = ["com.example.refresh", "com.example.clean"]
    """

/// Runs plugin "p" under `scenario`.
private func run(
    _ source: String, _ scenario: String, policy: TaskPolicy = .earliest, until: HostTime? = nil
) throws -> Recorder {
    try withPluginFolder(["p/init.lua": source, "p/plugin.toml": manifest]) { dir in
        var configuration = HostConfiguration(profile: .ios13)
        configuration.taskPolicy = policy
        return try Simulation.run(
            scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir), configuration: configuration, until: until)
    }
}

/// A plugin that submits one request at launch, with `options` (Lua table fields), and completes
/// the task it gets at once.
private func submitter(_ options: String) -> String {
    """
    lifeline.tasks.register("com.example.clean", function(task) task:setTaskCompleted(true) end)
    lifeline.on("didFinishLaunching", function()
      lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing", \(options)}
    end)
    """
}

private let shown: Set<String> = ["taskDeferred", "systemTaskStarted"]

private func lines(_ recorder: Recorder) -> [String] { LifelineTesting.lines(recorder, only: shown) }

@Suite struct TaskDeferredTests {
    @Test func aRequestWaitingForPower_saysEarliestBeginWithItsTime_thenPower_andRunsWhenCharging() throws {
        let recorder = try run(
            submitter("earliestBegin = 60, requiresPower = true"), "0s launch\n10s background\n5m charging on")
        #expect(
            lines(recorder) == [
                "0 taskDeferred plugin=p identifier=com.example.clean reason=earliestBegin until=60",
                "60 taskDeferred plugin=p identifier=com.example.clean reason=requiresExternalPower",
                "300 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            ])
    }

    @Test func aRequestWaitingForANetwork_saysSo() throws {
        let recorder = try run(
            submitter("requiresNetwork = true"), "0s launch\n1s network off\n2s background\n1m network on")
        #expect(
            lines(recorder) == [
                // Due one tick after its submission, while the app is in the foreground.
                "0.001 taskDeferred plugin=p identifier=com.example.clean reason=appInForeground",
                // Its own requirement comes first: it outlasts the app's state.
                "1 taskDeferred plugin=p identifier=com.example.clean reason=requiresNetworkConnectivity",
                "60 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            ])
    }

    @Test func aRequestHeldByTheForeground_andThenByAForceQuit() throws {
        let recorder = try run(submitter("earliestBegin = 5"), "0s launch\n1m force-quit\n2m launch\n3m background")
        #expect(
            lines(recorder) == [
                "0 taskDeferred plugin=p identifier=com.example.clean reason=earliestBegin until=5",
                "5 taskDeferred plugin=p identifier=com.example.clean reason=appInForeground",
                "60 taskDeferred plugin=p identifier=com.example.clean reason=userForceQuit",
                // The launch submits it again: a new request, told anew.
                "120 taskDeferred plugin=p identifier=com.example.clean reason=earliestBegin until=125",
                "125 taskDeferred plugin=p identifier=com.example.clean reason=appInForeground",
                "180 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            ])
    }

    @Test func theTaskPolicy_holdsARequest_manualUntilRunTasks_delayUntilItsTime() throws {
        let manual = try run(submitter("earliestBegin = 5"), "0s launch\n1s background\n1m run-tasks", policy: .manual)
        #expect(
            lines(manual) == [
                "0 taskDeferred plugin=p identifier=com.example.clean reason=taskPolicy",
                "60 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            ])
        // A deferral is told when the requests are evaluated: the memory warning's step is one.
        let delayed = try run(
            submitter("earliestBegin = 5"), "0s launch\n1s background\n10s memory-warning", policy: .delayed(30))
        #expect(
            lines(delayed) == [
                "0 taskDeferred plugin=p identifier=com.example.clean reason=earliestBegin until=35",
                "10 taskDeferred plugin=p identifier=com.example.clean reason=taskPolicy until=35",
                "35 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            ])
    }

    @Test func aRequestDueAtOnce_inTheBackground_isNeverDeferred() throws {
        // Every request waits one clock tick after its submission: that is no reason to report.
        let source = """
            lifeline.tasks.register("com.example.clean", function(task) task:setTaskCompleted(true) end)
            lifeline.on("didEnterBackground", function()
              lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing"}
            end)
            """
        let recorder = try run(source, "0s launch\n1s background")
        #expect(lines(recorder) == ["1.001 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1"])
    }

    @Test func aRequestEvaluatedAThousandTimesForOneReason_givesOneEvent() throws {
        // Every step asks for an evaluation: 2,000 network changes in the background, with the
        // phone never charging, hold the request back 2,000 times for the same reason.
        var scenario = "0s launch\n1s background\n"
        for i in 0..<1000 {
            scenario += "\(2 + 2 * i)s network off\n\(3 + 2 * i)s network on\n"
        }
        let recorder = try run(submitter("requiresPower = true"), scenario)
        let deferred = recorder.timeline.filter { $0.event == "taskDeferred" }
        #expect(deferred.map(line) == [
            "0.001 taskDeferred plugin=p identifier=com.example.clean reason=requiresExternalPower"
        ])
    }

    @Test func aResubmittedRequest_isToldAgain_theReplacedOneNoMore() throws {
        let source = """
            lifeline.tasks.register("com.example.clean", function(task) task:setTaskCompleted(true) end)
            local function submit()
              lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing", requiresPower = true}
            end
            lifeline.on("didFinishLaunching", submit)
            lifeline.on("didReceiveMemoryWarning", submit)
            """
        let recorder = try run(source, "0s launch\n2s memory-warning\n3s memory-warning")
        #expect(
            lines(recorder) == [
                "0.001 taskDeferred plugin=p identifier=com.example.clean reason=requiresExternalPower",
                "2.001 taskDeferred plugin=p identifier=com.example.clean reason=requiresExternalPower",
                "3.001 taskDeferred plugin=p identifier=com.example.clean reason=requiresExternalPower",
            ])
    }

    @Test func everyDeferralIsAReportEvent_andTheSameInputGivesTheSameReport() throws {
        let scenario = "0s launch\n10s background\n1m network off\n2m charging on\n3m network on"
        let source = submitter("earliestBegin = 30, requiresPower = true, requiresNetwork = true")
        let first = try run(source, scenario)
        let second = try run(source, scenario)
        #expect(first.report().serialized(pretty: true) == second.report().serialized(pretty: true))
        let deferred = first.timeline.filter { $0.event == "taskDeferred" }
        #expect(deferred.count == 3)
        for event in deferred { #expect(ReportEvents.admits(event), "\(line(event))") }
    }
}
