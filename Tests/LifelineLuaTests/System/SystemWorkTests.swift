import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// System-scheduled work from Lua: BGTaskScheduler's tasks, background fetch, silent pushes and the
// completion of transfer events, in virtual time, with real Lua plugins.

private let permitted = """
    [background]
    identifiers = ["com.example.refresh", "com.example.refresh2", "com.example.clean", "com.example.clean2"]
    """

/// Runs plugin "p" (`source`, its plugin.toml permitting the identifiers above) under `scenario`.
private func run(
    _ source: String, _ scenario: String, profile: Profile = .ios13, policy: TaskPolicy = .earliest,
    manifest: String = permitted, until: HostTime? = nil
) throws -> Recorder {
    try withPluginFolder(["p/init.lua": source, "p/plugin.toml": manifest]) { dir in
        var configuration = HostConfiguration(profile: profile)
        configuration.taskPolicy = policy
        return try Simulation.run(
            scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir), configuration: configuration, until: until)
    }
}

private let systemEvents: Set<String> = [
    "systemTaskSubmitted", "systemTaskCancelled", "systemTaskStarted", "systemTaskExpiring", "systemTaskCompleted",
    "systemTaskDropped", "relaunch", "resumed", "suspended", "performFetch", "fetchCompleted", "pushCompleted",
    "didReceiveRemoteNotification", "terminated", "charging", "network", "runTasks", "didFinishLaunching",
    "transferEventsCompleted", "transferEventsTimedOut", "didFinishTransferEvents",
]

/// The lines the plugins logged, in order.
private func logged(_ recorder: Recorder) -> [String] {
    recorder.timeline.filter { $0.event == "log" }.compactMap { $0.fields.first { $0.0 == "message" }?.1.stringValue }
}

private func lines(_ recorder: Recorder) -> [String] { LifelineTesting.lines(recorder, only: systemEvents) }

/// A plugin that registers `com.example.refresh` and completes each run after `after` seconds.
private func refresher(after: Double = 1, earliest: Double = 60) -> String {
    """
    lifeline.tasks.register("com.example.refresh", function(task)
      print("run " .. task.identifier .. " " .. task.kind .. " " .. task.id)
      lifeline.after(\(after), function() task:setTaskCompleted(true) end)
    end)
    lifeline.on("didFinishLaunching", function()
      lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = \(earliest)}
    end)
    """
}

@Test func aRefreshTask_runsAtItsEarliestBegin_inTheBackground_andTheAppIsSuspendedWhenItCompletes() throws {
    let recorder = try run(refresher(), "0s launch\n10s background")
    #expect(
        lines(recorder) == [
            "0 didFinishLaunching",
            "0 systemTaskSubmitted plugin=p identifier=com.example.refresh kind=refresh earliestBegin=60 requiresNetwork=false requiresPower=false replaced=false",
            "10 suspended",
            "60 resumed reason=systemTask",
            "60 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
            "61 systemTaskCompleted plugin=p identifier=com.example.refresh kind=refresh task=1 success=true",
            "61 suspended",
        ])
    #expect(recorder.pluginErrorCount == 0)
    #expect(recorder.termination == nil)
}

@Test func aTaskDueWhileTheAppIsInTheForeground_waitsUntilItLeaves() throws {
    let recorder = try run(refresher(), "0s launch\n100s background")
    let started = lines(recorder).filter { $0.contains("systemTaskStarted") }
    #expect(started == ["100 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1"])
}

@Test func aTaskDueAfterTheAppEnded_relaunchesItInTheBackground() throws {
    let recorder = try run(refresher(), "0s launch\n10s terminate")
    let got = lines(recorder)
    #expect(got.contains("60 relaunch reason=systemTask"))
    #expect(got.contains("60 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1"))
    // The relaunched app's init.lua submitted the refresh again; it replaced the one that ran.
    #expect(got.filter { $0.contains("systemTaskSubmitted") }.count == 2)
}

@Test func afterAForceQuit_theSystemLaunchesTheAppForNothing_untilTheUserLaunchesIt() throws {
    let recorder = try run(refresher(), "0s launch\n10s force-quit\n200s launch\n210s background")
    let got = lines(recorder)
    #expect(!got.contains { $0.contains("relaunch") })
    // The request due at 60 s waited for the user; the launch at 200 s submitted it again.
    #expect(got.contains("260 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1"))
}

@Test func aMissingSetTaskCompleted_callsTheExpirationHandler_thenTerminatesTheApp() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task)
          task.expirationHandler = function() print("expiring") end
        end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        """
    let recorder = try run(source, "0s launch\n1s background")
    #expect(
        lines(recorder).suffix(3) == [
            "1 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
            "26 systemTaskExpiring plugin=p identifier=com.example.refresh kind=refresh task=1",
            "31 terminated kind=completionTimeout code=0x8badf00d",
        ])
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .completionTimeout)
    #expect(termination.plugin == "p")
    #expect(termination.reason == "plugin 'p' did not complete its refresh task 'com.example.refresh' within 30 s")
    #expect(recorder.timeline.contains { $0.event == "log" && $0.fields.contains { $0.1 == .string("expiring") } })
}

@Test func anExpirationHandlerThatCompletesTheTask_savesTheApp() throws {
    let source = """
        lifeline.tasks.register("com.example.clean", function(task)
          task.expirationHandler = function() task:setTaskCompleted(false) end
        end)
        lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing"}
        """
    let recorder = try run(source, "0s launch\n1s background")
    #expect(recorder.termination == nil)
    #expect(
        lines(recorder).suffix(3) == [
            "176 systemTaskExpiring plugin=p identifier=com.example.clean kind=processing task=1",
            "176 systemTaskCompleted plugin=p identifier=com.example.clean kind=processing task=1 success=false",
            "176 suspended",
        ])
}

@Test func theTaskLimits_comeFromTheProfile() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task) end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        """
    let recorder = try run(source, "0s launch\n1s background", profile: profile { $0.refreshTaskLimit = 10 })
    #expect(recorder.termination?.time == .seconds(11))
    #expect(recorder.termination?.reason.hasSuffix("within 10 s") == true)
}

@Test func anIdentifierPluginTomlDoesNotPermit_isRefusedAtRegisterAndSubmit() throws {
    let source = """
        print(pcall(lifeline.tasks.register, "com.other", function() end))
        print(pcall(lifeline.tasks.submit, {identifier = "com.other", kind = "refresh"}))
        """
    let recorder = try run(source, "0s launch")
    let got = logged(recorder)
    #expect(got.count == 2)
    #expect(got.allSatisfy { $0.contains("false") && $0.contains("'com.other' is not a permitted identifier") })
    #expect(got.allSatisfy { $0.contains("[background] identifiers") })
}

@Test func aRegistrationAfterLaunchEnded_isAnError_butOneInDidFinishLaunchingIsNot() throws {
    let source = """
        lifeline.on("didFinishLaunching", function()
          lifeline.tasks.register("com.example.refresh", function() end)
        end)
        lifeline.on("didBecomeActive", function()
          local ok, err = pcall(lifeline.tasks.register, "com.example.clean", function() end)
          print(ok, err)
        end)
        """
    let recorder = try run(source, "0s launch")
    let said = logged(recorder)
    #expect(said.count == 1)
    #expect(said[0].hasPrefix("false"))
    #expect(said[0].contains("after the app finished launching"))
    #expect(recorder.pluginErrorCount == 0)
}

@Test func aSecondRegistrationOfAnIdentifier_isAnError() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function() end)
        lifeline.tasks.register("com.example.refresh", function() end)
        """
    let error = try #require(try simulationErrorOf(source))
    #expect(error.message.contains("a handler for 'com.example.refresh' is registered already"))
}

/// The error that loading plugin "p" fails with, or nil.
private func simulationErrorOf(_ source: String, profile: Profile = .ios13) throws -> LifelineError? {
    do {
        _ = try run(source, "0s launch", profile: profile)
        return nil
    } catch let error as LifelineError {
        return error
    }
}

@Test func aDoubleSubmit_replacesTheRequest_andItRunsOnce() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 30}
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 50}
        local pending = lifeline.tasks.pending()
        print(#pending, pending[1].identifier, pending[1].kind, pending[1].earliestBegin)
        """
    let recorder = try run(source, "0s launch\n1s background")
    let got = lines(recorder)
    #expect(got.filter { $0.contains("replaced=true") }.count == 1)
    #expect(got.filter { $0.contains("systemTaskStarted") } == [
        "50 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
    ])
    #expect(recorder.timeline.contains { $0.event == "log" && $0.fields.contains { $0.1 == .string("1\tcom.example.refresh\trefresh\t50.0") } })
}

@Test func pendingRequests_followApplesLimits_oneRefreshAndTenProcessing() throws {
    let source = """
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        print(pcall(lifeline.tasks.submit, {identifier = "com.example.refresh2", kind = "refresh"}))
        local ids = {}
        for i = 1, 10 do ids[i] = "com.example.p" .. i end
        """
    // Ten processing identifiers permitted, and an eleventh.
    let names = (1...11).map { "\"com.example.p\($0)\"" }.joined(separator: ", ")
    let manifest = "[background]\nidentifiers = [\"com.example.refresh\", \"com.example.refresh2\", \(names)]\n"
    let processing = """
        for i = 1, 10 do lifeline.tasks.submit{identifier = "com.example.p" .. i, kind = "processing"} end
        print(pcall(lifeline.tasks.submit, {identifier = "com.example.p11", kind = "processing"}))
        print(#lifeline.tasks.pending())
        """
    let recorder = try run(source + "\n" + processing, "0s launch", policy: .manual, manifest: manifest)
    let said = logged(recorder)
    #expect(said.count == 3)
    #expect(said[0].hasPrefix("false") && said[0].contains("too many pending refresh requests"))
    #expect(said[1].hasPrefix("false") && said[1].contains("too many pending processing requests"))
    #expect(said[2] == "11")
}

@Test func cancel_removesAPendingRequest_once() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task) print("ran") end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 10}
        print(lifeline.tasks.cancel("com.example.refresh"), lifeline.tasks.cancel("com.example.refresh"), #lifeline.tasks.pending())
        """
    let recorder = try run(source, "0s launch\n1s background")
    #expect(lines(recorder).contains("0 systemTaskCancelled plugin=p identifier=com.example.refresh"))
    #expect(!lines(recorder).contains { $0.contains("systemTaskStarted") })
    #expect(recorder.timeline.contains { $0.fields.contains { $0.1 == .string("true\tfalse\t0") } })
}

@Test func conditions_power_andNetwork_holdARequestUntilTheyAreMet() throws {
    let source = """
        lifeline.tasks.register("com.example.clean", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.register("com.example.refresh", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing", requiresPower = true}
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", requiresNetwork = true}
        """
    let recorder = try run(source, "0s network off\n0s launch\n1s background\n50s charging on\n70s network on")
    let started = lines(recorder).filter { $0.contains("systemTaskStarted") }
    #expect(
        started == [
            "50 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            "70 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=2",
        ])
}

@Test func theManualPolicy_runsTasksOnlyOnRunTasks_pickedByKindOrIdentifier() throws {
    let source = """
        lifeline.tasks.register("com.example.clean", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.register("com.example.refresh", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.register("com.example.clean2", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing"}
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 3600}
        lifeline.tasks.submit{identifier = "com.example.clean2", kind = "processing"}
        """
    let recorder = try run(
        source, "0s launch\n1s background\n100s run-tasks refresh\n200s run-tasks com.example.clean2\n300s run-tasks",
        policy: .manual)
    let started = lines(recorder).filter { $0.contains("systemTaskStarted") }
    #expect(
        started == [
            "100 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
            "200 systemTaskStarted plugin=p identifier=com.example.clean2 kind=processing task=2",
            "300 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=3",
        ])
}

@Test func theDelayPolicy_runsATaskThatLongAfterItsEarliestBegin() throws {
    let recorder = try run(refresher(), "0s launch\n1s background", policy: .delayed(120))
    #expect(lines(recorder).contains("180 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1"))
}

@Test func aRequestWithNoHandlerInThisLaunch_isDropped() throws {
    let source = """
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 5}
        """
    let recorder = try run(source, "0s launch\n1s background")
    #expect(lines(recorder).contains("5 systemTaskDropped plugin=p identifier=com.example.refresh reason=noHandler"))
}

@Test func aProfileWithoutBGTaskScheduler_refusesTheCalls_andTheSteps() throws {
    let source = """
        print(pcall(lifeline.tasks.register, "com.example.refresh", function() end))
        """
    let recorder = try run(source, "0s launch", profile: .ios7)
    let said = logged(recorder)
    #expect(said.count == 1 && said[0].contains("profile ios7 lacks it"))
    #expect(throws: LifelineError.self) { try run("", "0s launch\n1s run-tasks", profile: .ios7) }
    do {
        _ = try run("", "0s launch\n1s background\n2s fetch", profile: .ios6)
        Issue.record("a fetch under ios6 ran")
    } catch let error as LifelineError {
        #expect(error.message == "t.scenario:3: 'fetch' needs background fetch and silent pushes, which profile ios6 lacks (they came with iOS 7); run it with --profile ios13")
    }
}

@Test func submitChecksItsArguments() throws {
    let source = """
        local function try(t) local ok, err = pcall(lifeline.tasks.submit, t); print(err) end
        try(nil)
        try({kind = "refresh"})
        try({identifier = "com.example.refresh", kind = "sometimes"})
        try({identifier = "com.example.refresh", kind = "refresh", earliestBegin = "soon"})
        try({identifier = "com.example.refresh", kind = "refresh", earliestBegin = -1})
        try({identifier = "com.example.refresh", kind = "refresh", requiresPower = "yes"})
        """
    let recorder = try run(source, "0s launch")
    let said = logged(recorder)
    #expect(said.count == 6)
    #expect(said[0].contains("bad argument #1 to 'lifeline.tasks.submit' (table expected"))
    #expect(said[1].contains("field 'identifier' is required"))
    #expect(said[2].contains("field 'kind' must be refresh or processing"))
    #expect(said[3].contains("field 'earliestBegin' must be a number of seconds"))
    #expect(said[4].contains("earliestBegin must be a number of seconds, from 0 to 10 years"))
    #expect(said[5].contains("field 'requiresPower' must be a boolean"))
}

// MARK: - Fetch and silent pushes

@Test func aFetch_wakesTheSuspendedApp_andItsCompletionLetsItSuspendAgain() throws {
    let source = """
        lifeline.on("performFetch", function(event)
          lifeline.after(2, function() print(event.complete("newData"), event.complete("noData")) end)
        end)
        """
    let recorder = try run(source, "0s launch\n1s background\n10s fetch")
    #expect(
        lines(recorder).suffix(5) == [
            "1 suspended", "10 resumed reason=fetch", "10 performFetch",
            "12 fetchCompleted plugin=p result=newData", "12 suspended",
        ])
    // The second call is harmless: false, with a warning.
    #expect(recorder.timeline.contains { $0.fields.contains { $0.1 == .string("true\tfalse") } })
}

@Test func aFetchCompletionNeverCalled_terminatesTheApp() throws {
    let recorder = try run("lifeline.on('performFetch', function() end)", "0s launch\n1s background\n10s fetch")
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .completionTimeout)
    #expect(termination.time == .seconds(40))
    #expect(termination.reason == "plugin 'p' did not call the completion of performFetch within 30 s")
}

@Test func aFetchWhileTheAppIsInTheForeground_isDropped_andAfterItEnded_relaunchesIt() throws {
    let source = "lifeline.on('performFetch', function(e) e.complete('noData') end)"
    let recorder = try run(source, "0s launch\n5s fetch\n10s terminate\n20s fetch")
    let got = lines(recorder)
    #expect(got.contains("5 performFetch dropped=true"))
    #expect(got.suffix(5) == [
        "20 relaunch reason=fetch", "20 didFinishLaunching", "20 performFetch",
        "20 fetchCompleted plugin=p result=noData", "20 suspended",
    ])
}

@Test func aFetchWithNoHandler_holdsNothing() throws {
    let recorder = try run("", "0s launch\n1s background\n10s fetch")
    #expect(lines(recorder).suffix(3) == ["10 resumed reason=fetch", "10 performFetch", "10 suspended"])
}

@Test func theCompletionChecksItsResult() throws {
    let source = """
        lifeline.on("performFetch", function(event)
          print(pcall(event.complete, "maybe"))
          print(pcall(event.complete))
          print(pcall(event.complete, 42))
          event:complete("failed")
        end)
        """
    let recorder = try run(source, "0s launch\n1s background\n10s fetch")
    let said = logged(recorder)
    #expect(said.count == 3)
    #expect(said[0].contains("'maybe' is not a result; the results are newData, noData, failed"))
    #expect(said[1].contains("the completion takes a result: newData, noData, failed"))
    #expect(said[2].contains("string or boolean expected"))
    #expect(lines(recorder).contains("10 fetchCompleted plugin=p result=failed"))
    #expect(recorder.termination == nil)
}

@Test func aSilentPush_carriesItsPayload_andNeedsItsCompletion() throws {
    let source = """
        lifeline.on("didReceiveRemoteNotification", function(event)
          print(event.payload.aps["content-available"], event.payload.feed)
          event.complete("newData")
        end)
        """
    let recorder = try run(
        source, "0s launch\n1s background\n5s push\n10s push {\"aps\":{\"content-available\":1},\"feed\":\"news\"}")
    let said = logged(recorder)
    #expect(said == ["1\tnil", "1\tnews"])
    #expect(lines(recorder).filter { $0.contains("pushCompleted") }.count == 2)
}

@Test func eachPluginGetsACompletionOfItsOwn_andOneThatMissesItNamesThatPlugin() throws {
    try withPluginFolder([
        "a/init.lua": "lifeline.on('performFetch', function(e) e.complete('newData') end)",
        "b/init.lua": "lifeline.on('performFetch', function(e) end)",
    ]) { dir in
        let recorder = try Simulation.run(
            scenario: try Scenario.parse("0s launch\n1s background\n10s fetch", fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir),
            configuration: HostConfiguration())
        #expect(lines(recorder).contains("10 fetchCompleted plugin=a result=newData"))
        #expect(recorder.termination?.plugin == "b")
    }
}

@Test func aCompletionKeptPastItsLaunch_completesNothing() throws {
    let source = """
        lifeline.on("performFetch", function(e)
          saved = e.complete
          e.complete("newData")
        end)
        lifeline.on("didFinishLaunching", function()
          if saved then print(saved("noData")) end
        end)
        """
    // One state per launch: a saved completion cannot outlive it, so the global is nil after a
    // relaunch; within a launch, a second call is false.
    let recorder = try run(source, "0s launch\n1s background\n10s fetch\n20s fetch")
    #expect(recorder.termination == nil)
    #expect(lines(recorder).filter { $0.contains("fetchCompleted") }.count == 2)
}

// MARK: - The completion of transfer events

/// Plugin "p" downloads a small file at launch and handles its events; `complete` says whether
/// it calls the completion of `didFinishTransferEvents`.
private func transferEventsRun(complete: Bool) throws -> Recorder {
    let source = """
        lifeline.on("didFinishLaunching", function()
          lifeline.transfers.download{url = "http://example.org/a.bin", to = "a.bin"}
        end)
        lifeline.on("transferDidFinish", function() end)
        lifeline.on("didFinishTransferEvents", function(event)
          \(complete ? "event.complete()" : "-- the completion is never called")
        end)
        """
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sys-transfers-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try withPluginFolder([
        "p/init.lua": source, "p/plugin.toml": "[permissions]\nnetwork = [\"example.org:*\"]\n",
    ]) { pluginDir in
        var configuration = HostConfiguration()
        configuration.database = try StateDatabase.open(stateDirectory: dir)
        return try Simulation.run(
            scenario: try Scenario.parse(
                "0s http GET example.org/a.bin -> 200 size=1KB rate=1MB/s\n0s launch\n1s background",
                fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: pluginDir), configuration: configuration)
    }
}

@Test func transferEvents_completed_letTheAppSuspendAtOnce() throws {
    let recorder = try transferEventsRun(complete: true)
    let got = lines(recorder)
    #expect(got.contains { $0.hasSuffix("transferEventsCompleted plugin=p") })
    #expect(got.last == "1 suspended")
}

@Test func transferEvents_neverCompleted_keepTheAppAwakeUntilTheLimit_thenItIsSuspended() throws {
    let recorder = try transferEventsRun(complete: false)
    // The profile's 30 s count from the delivery of the batch.
    let delivered = try #require(recorder.timeline.first { $0.event == "didFinishTransferEvents" }).time
    let end = ReportNumber.seconds(delivered.adding(seconds: 30))
    #expect(lines(recorder).suffix(2) == ["\(end) transferEventsTimedOut plugin=p", "\(end) suspended"])
    #expect(recorder.termination == nil)
}

@Test func afterAForceQuit_neitherAFetchNorAPushLaunchesTheApp() throws {
    let source = "lifeline.on('performFetch', function(e) e.complete('noData') end)"
    let recorder = try run(source, "0s launch\n5s force-quit\n10s fetch\n20s push\n30s launch\n40s background\n50s fetch")
    let got = lines(recorder)
    #expect(got.contains("10 performFetch dropped=true"))
    #expect(got.contains("20 didReceiveRemoteNotification dropped=true"))
    #expect(got.contains("50 fetchCompleted plugin=p result=noData"))
}

@Test func aTaskThatSubmitsItselfAgainWithNoDelay_stillMovesTimeOn_andUntilEndsIt() throws {
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task)
          task:setTaskCompleted(true)
          lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        """
    let recorder = try run(source, "0s launch\n1s background", until: .seconds(1.05))
    let started = recorder.timeline.filter { $0.event == "systemTaskStarted" }
    // One run per clock tick (1 ms) from 1 s to the end: about fifty, not an endless loop at 1 s.
    #expect(started.count >= 40 && started.count <= 51)
    #expect(Set(started.map(\.time)).count == started.count)
}

// MARK: - Requests outlive the host

@Test func pendingRequests_areKeptInTheStateDir_andAHostStartedAgainRunsThem() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sys-ledger-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    func host(_ source: String, _ scenario: String) throws -> Recorder {
        try withPluginFolder(["p/init.lua": source, "p/plugin.toml": permitted]) { pluginDir in
            var configuration = HostConfiguration()
            configuration.database = try StateDatabase.open(stateDirectory: dir)
            return try Simulation.run(
                scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
                plugins: try LuaPluginLoader.descriptors(in: pluginDir), configuration: configuration,
                until: .seconds(5))
        }
    }
    // The first host submits two requests, cancels one, and ends long before they are due.
    _ = try host(
        """
        lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing", earliestBegin = 600, requiresPower = true}
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh", earliestBegin = 60}
        lifeline.tasks.submit{identifier = "com.example.refresh2", kind = "processing", earliestBegin = 60}
        lifeline.tasks.cancel("com.example.refresh2")
        """, "0s launch")
    // The second one submits nothing: it finds them, in order, and runs the one that is due.
    let second = try withPluginFolder([
        "p/init.lua": """
            for _, r in ipairs(lifeline.tasks.pending()) do
              print(r.identifier, r.kind, r.earliestBegin, r.requiresPower)
            end
            lifeline.tasks.register("com.example.refresh", function(task) task:setTaskCompleted(true) end)
            """,
        "p/plugin.toml": permitted,
    ]) { pluginDir in
        var configuration = HostConfiguration()
        configuration.database = try StateDatabase.open(stateDirectory: dir)
        return try Simulation.run(
            scenario: try Scenario.parse("0s launch\n1s background", fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: pluginDir), configuration: configuration,
            until: .seconds(100))
    }
    #expect(logged(second) == ["com.example.clean\tprocessing\t600.0\ttrue", "com.example.refresh\trefresh\t60.0\tfalse"])
    #expect(lines(second).contains("60 systemTaskCompleted plugin=p identifier=com.example.refresh kind=refresh task=1 success=true"))
    // What ran is gone from the state dir; what waits for power is still there.
    let ledger = SystemTaskLedger(database: try StateDatabase.open(stateDirectory: dir))
    #expect(try ledger.all().map(\.request.identifier) == ["com.example.clean"])
}

// MARK: - What a handler does to the requests and to itself

@Test func aHandlerThatCancelsAnotherDueRequest_isObeyed() throws {
    let source = """
        lifeline.tasks.register("com.example.clean", function(task)
          print("cancelled", lifeline.tasks.cancel("com.example.clean2"))
          task:setTaskCompleted(true)
        end)
        lifeline.tasks.register("com.example.clean2", function(task) task:setTaskCompleted(true) end)
        lifeline.tasks.submit{identifier = "com.example.clean", kind = "processing", earliestBegin = 10}
        lifeline.tasks.submit{identifier = "com.example.clean2", kind = "processing", earliestBegin = 10}
        """
    let recorder = try run(source, "0s launch\n1s background")
    #expect(logged(recorder) == ["cancelled\ttrue"])
    #expect(lines(recorder).filter { $0.contains("systemTaskStarted") } == [
        "10 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
    ])
}

@Test func aTaskCompletedInsideItsHandler_releasesItsTable() throws {
    // Each run hangs 200 KB on its task table and completes at once; without the table's release
    // a few hundred runs would pass the plugin's 32 MiB cap.
    let source = """
        lifeline.tasks.register("com.example.refresh", function(task)
          task.blob = string.rep("x", 200000)
          task:setTaskCompleted(true)
          collectgarbage()
          lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        end)
        lifeline.tasks.submit{identifier = "com.example.refresh", kind = "refresh"}
        """
    let recorder = try run(source, "0s launch\n1s background", until: .seconds(1.4))
    #expect(recorder.timeline.filter { $0.event == "systemTaskCompleted" }.count >= 300)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder).first?.message ?? "")")
}

@Test func earliestBegin_isBoundedSoATimeNeverSaturates() throws {
    let source = """
        print(pcall(lifeline.tasks.submit, {identifier = "com.example.refresh", kind = "refresh", earliestBegin = 1e300}))
        """
    let recorder = try run(source, "0s launch")
    #expect(logged(recorder).first?.contains("earliestBegin must be a number of seconds, from 0 to 10 years") == true)
}

@Test func withTheNetworkOff_aPluginsRequestFailsAtOnce_andWorksAgainWhenItIsBack() throws {
    let source = """
        local function fetch()
          lifeline.background("fetch", function()
            local response, err = lifeline.http.request{url = "http://example.org/x"}
            print(response and response.status or (err.kind .. ": " .. err.message))
          end)
        end
        lifeline.on("didReceiveMemoryWarning", fetch)
        """
    let recorder = try run(
        source, "0s http GET example.org/x -> 200 ok\n0s launch\n1s network off\n2s memory-warning\n3s network on\n4s memory-warning",
        manifest: "[permissions]\nnetwork = [\"example.org:*\"]\n")
    #expect(logged(recorder) == ["connect: the device has no network", "200"])
}
