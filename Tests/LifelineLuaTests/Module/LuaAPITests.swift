import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 6.2: the `lifeline` module as a plugin sees it.

private let allEvents = LifecycleEventName.allCases.map(\.rawValue)

// MARK: - Argument checking

/// A call with a wrong argument, the function its message must name, and the argument's number.
struct BadCall: Sendable, CustomTestStringConvertible {
    var call: String
    var function: String
    var argument: Int
    var testDescription: String { call }
}

@Test(arguments: [
    BadCall(call: "lifeline.on(1, function() end)", function: "lifeline.on", argument: 1),
    BadCall(call: "lifeline.on()", function: "lifeline.on", argument: 1),
    BadCall(call: "lifeline.on('didEnterBackground')", function: "lifeline.on", argument: 2),
    BadCall(call: "lifeline.on('didEnterBackground', 'not a function')", function: "lifeline.on", argument: 2),
    BadCall(call: "lifeline.beginBackgroundTask(42)", function: "lifeline.beginBackgroundTask", argument: 1),
    BadCall(call: "lifeline.beginBackgroundTask({})", function: "lifeline.beginBackgroundTask", argument: 1),
    BadCall(call: "lifeline.beginBackgroundTask('n', 42)", function: "lifeline.beginBackgroundTask", argument: 2),
    BadCall(call: "lifeline.endBackgroundTask('x')", function: "lifeline.endBackgroundTask", argument: 1),
    BadCall(call: "lifeline.endBackgroundTask()", function: "lifeline.endBackgroundTask", argument: 1),
    BadCall(call: "lifeline.endBackgroundTask(1.5)", function: "lifeline.endBackgroundTask", argument: 1),
    BadCall(call: "lifeline.after('soon', function() end)", function: "lifeline.after", argument: 1),
    BadCall(call: "lifeline.after(1)", function: "lifeline.after", argument: 2),
    BadCall(call: "lifeline.after(1, {})", function: "lifeline.after", argument: 2),
    BadCall(call: "lifeline.after(-1, function() end)", function: "lifeline.after", argument: 1),
    BadCall(call: "lifeline.after(0/0, function() end)", function: "lifeline.after", argument: 1),
    BadCall(call: "lifeline.after(math.huge, function() end)", function: "lifeline.after", argument: 1),
])
func api_wrongArgument_raisesErrorNamingFunctionAndArgument(_ bad: BadCall) throws {
    // The call sits on line 1 of init.lua, so the message points there, as luaL_check* does.
    let result = try marksOf("local ok, err = pcall(function() \(bad.call) end); mark(tostring(ok)); mark(err)")
    #expect(result.count == 2)
    #expect(result.first == "false")
    let message = result.last ?? ""
    #expect(message.contains("bad argument #\(bad.argument) to '\(bad.function)'"), "message: \(message)")
    #expect(message.contains("init.lua:1:"), "message: \(message)")
}

@Test func api_handleCancelWithWrongSelf_raisesArgumentError() throws {
    let source = """
        local h = lifeline.after(1, function() end)
        local ok, err = pcall(function() h.cancel(42) end)
        mark(tostring(ok)); mark(err)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("bad argument #1 to 'cancel'") == true, "message: \(result.last ?? "none")")
}

@Test func api_wrongArgumentInAHandler_isAPluginErrorAtTheCall() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          lifeline.after("later", function() end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("init.lua:2: bad argument #1 to 'lifeline.after'") == true)
}

// MARK: - lifeline.on

@Test func api_onUnknownEvent_raisesErrorListingTheValidNames() throws {
    let result = try marksOf("local ok, err = pcall(function() lifeline.on('didExplode', function() end) end); mark(err)")
    let message = try #require(result.first)
    #expect(message.contains("bad argument #1 to 'lifeline.on'"))
    #expect(message.contains("didExplode"))
    for name in allEvents { #expect(message.contains(name), "missing \(name) in: \(message)") }
}

@Test func api_onUnknownEventWhileLoading_isALoadFailure() throws {
    let error = try #require(try simulationError(plugins(["p": "lifeline.on('didLaunch', function() end)"])))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("didLaunch"))
    #expect(error.message.contains("didFinishLaunching"))
}

@Test func api_on_returnsAHandleWithCancel() throws {
    let source = "local h = lifeline.on('didBecomeActive', function() end); mark(type(h)); mark(type(h.cancel))"
    #expect(try marksOf(source) == ["userdata", "function"])
}

@Test func api_onEveryEvent_isAccepted() throws {
    let source = """
        for _, name in ipairs({\(allEvents.map { "'\($0)'" }.joined(separator: ", "))}) do
          lifeline.on(name, function(e) mark(e.name) end)
        end
        """
    let result = try marksOf(
        source, scenario: "0s launch\n1s memory-warning\n2s background\n3s foreground\n4s terminate")
    #expect(
        result == [
            "didFinishLaunching", "didBecomeActive", "didReceiveMemoryWarning", "willResignActive",
            "didEnterBackground", "willEnterForeground", "didBecomeActive", "willTerminate",
        ])
}

@Test func api_eventTable_hasNameTimeAndState() throws {
    let source = """
        lifeline.on("didEnterBackground", function(e)
          mark(e.name .. "|" .. string.format("%g", e.time) .. "|" .. e.state .. "|" .. type(e.time))
        end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n2.5s background") == ["didEnterBackground|2.5|background|number"])
}

@Test func api_eventTable_isFreshForEachHandler() throws {
    // One handler changing its event table does not change what the next one sees.
    let source = """
        lifeline.on("didEnterBackground", function(e) e.name = "changed" end)
        lifeline.on("didEnterBackground", function(e) mark(e.name) end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["didEnterBackground"])
}

@Test func api_handlers_runInRegistrationOrder() throws {
    let source = """
        lifeline.on("didBecomeActive", function() mark("first") end)
        lifeline.on("didBecomeActive", function() mark("second") end)
        """
    #expect(try marksOf(source) == ["first", "second"])
}

@Test func api_onHandleCancel_stopsDelivery() throws {
    let source = """
        local h = lifeline.on("didEnterBackground", function() mark("delivered") end)
        h:cancel()
        lifeline.on("didEnterBackground", function() mark("other") end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["other"])
}

@Test func api_onHandleCancelInsideTheHandler_stopsLaterDeliveries() throws {
    let source = """
        local h
        h = lifeline.on("didEnterBackground", function() mark("once"); h:cancel() end)
        """
    let result = try marksOf(source, scenario: "0s launch\n1s background\n2s foreground\n3s background")
    #expect(result == ["once"])
}

@Test func api_onHandleCancelTwice_isHarmless() throws {
    let source = """
        local h = lifeline.on("didEnterBackground", function() mark("delivered") end)
        h:cancel(); h:cancel()
        mark("ok")
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["ok"])
}

// MARK: - lifeline.state

@Test func api_state_followsTheNotification() throws {
    let source = """
        for _, name in ipairs({"didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"}) do
          lifeline.on(name, function(e) mark(e.name .. "=" .. lifeline.state()) end)
        end
        """
    let result = try marksOf(source, scenario: "0s launch\n1s resign\n2s background")
    #expect(
        result == [
            "didFinishLaunching=inactive", "didBecomeActive=active", "willResignActive=inactive",
            "didEnterBackground=background",
        ])
}

@Test func api_state_equalsTheEventStateForEveryEvent() throws {
    let source = """
        for _, name in ipairs({\(allEvents.map { "'\($0)'" }.joined(separator: ", "))}) do
          lifeline.on(name, function(e) mark(tostring(lifeline.state() == e.state) .. ":" .. e.name) end)
        end
        """
    let result = try marksOf(
        source, scenario: "0s launch\n1s memory-warning\n2s background\n3s foreground\n4s terminate")
    #expect(result.count == 8)
    #expect(result.allSatisfy { $0.hasPrefix("true:") }, "\(result)")
}

@Test func api_state_isInactiveWhileLoading() throws {
    #expect(try marksOf("mark(lifeline.state())") == ["inactive"])
}

@Test func api_state_isBackgroundWhenLaunchedInTheBackground() throws {
    let source = """
        mark("load=" .. lifeline.state())
        lifeline.on("didFinishLaunching", function(e) mark(e.state .. "=" .. lifeline.state()) end)
        """
    #expect(try marksOf(source, scenario: "0s launch background") == ["load=background", "background=background"])
}

@Test func api_state_isActiveInATimerWhileActive() throws {
    #expect(try marksOf("lifeline.after(1, function() mark(lifeline.state()) end)") == ["active"])
}

// MARK: - lifeline.now and lifeline.after

@Test func api_now_followsTheVirtualClock() throws {
    let source = """
        mark(string.format("%g", lifeline.now()))
        for _, name in ipairs({"didEnterBackground", "willEnterForeground", "didReceiveMemoryWarning"}) do
          lifeline.on(name, function(e) mark(string.format("%g", lifeline.now())) end)
        end
        """
    let result = try marksOf(source, scenario: "0s launch\n5s background\n65s foreground\n90.25s memory-warning")
    #expect(result == ["0", "5", "65", "90.25"])
}

@Test func api_now_equalsTheEventTime() throws {
    let source = "lifeline.on('didEnterBackground', function(e) mark(tostring(e.time == lifeline.now())) end)"
    #expect(try marksOf(source, scenario: "0s launch\n12.345s background") == ["true"])
}

@Test func api_after_firesAtTheVirtualTime() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.after(2.5, function() mark(string.format('%g', lifeline.now())) end)"]))
    let events = markEvents(recorder)
    #expect(events.map(\.mark) == ["2.5"])
    #expect(events.first?.time == .seconds(2.5))
}

@Test func api_afterFromAHandler_countsFromTheHandlersTime() throws {
    let source = """
        lifeline.on("willResignActive", function()
          lifeline.after(1.5, function() mark(string.format("%g", lifeline.now())) end)
        end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n3s resign") == ["4.5"])
}

@Test func api_afterZero_runsAfterTheCallerReturns_oneResolutionStepLater() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.after(0, function() mark('timer') end); mark('caller')"]))
    let events = markEvents(recorder)
    #expect(events.map(\.mark) == ["caller", "timer"])
    #expect(events.map(\.time) == [.zero, .seconds(0.001)])
}

@Test func api_zeroDelayTimerLoop_isEndedByUntil() throws {
    // Each zero-delay timer fires 1 ms later, so virtual time moves on and `until` ends the run.
    let recorder = try simulate(
        plugins(["p": """
            local n = 0
            local function f() n = n + 1; if n % 500 == 0 then mark(n) end; lifeline.after(0, f) end
            f()
            """]),
        scenario: "0s launch", until: .seconds(2))
    #expect(recorder.termination == nil)
    // The loop really ran, one call per millisecond of virtual time, until the end.
    let events = markEvents(recorder)
    #expect(events.map(\.mark) == ["500", "1000", "1500", "2000"])
    #expect(events.map(\.time) == [.seconds(0.499), .seconds(0.999), .seconds(1.499), .seconds(1.999)])
}

@Test func api_afterTimers_fireInTimeOrder() throws {
    let source = """
        lifeline.after(3, function() mark("3") end)
        lifeline.after(1, function() mark("1") end)
        lifeline.after(2, function() mark("2") end)
        """
    #expect(try marksOf(source) == ["1", "2", "3"])
}

@Test func api_afterHandleCancel_stopsTheTimer() throws {
    let source = """
        local h = lifeline.after(3, function() mark("fired") end)
        mark(type(h))
        h:cancel()
        lifeline.after(5, function() mark("other") end)
        """
    #expect(try marksOf(source) == ["userdata", "other"])
}

@Test func api_afterHandleCancelAfterFiring_isHarmless() throws {
    let source = """
        local h
        h = lifeline.after(1, function() mark("fired") end)
        lifeline.after(2, function() h:cancel(); h:cancel(); mark("cancelled late") end)
        """
    #expect(try marksOf(source) == ["fired", "cancelled late"])
}

@Test func api_afterDueWhileSuspended_firesWhenBackInTheForeground() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.after(10, function() mark(string.format('%g', lifeline.now())) end)"]),
        scenario: "0s launch\n2s background\n60s foreground")
    let events = markEvents(recorder)
    #expect(events.map(\.mark) == ["60"])
    #expect(events.first?.time == .seconds(60))
}

// MARK: - backgroundTimeRemaining

@Test func api_backgroundTimeRemaining_isHugeInTheForeground() throws {
    let source = """
        mark(tostring(lifeline.backgroundTimeRemaining() == math.huge))
        lifeline.on("didBecomeActive", function() mark(tostring(lifeline.backgroundTimeRemaining() == math.huge)) end)
        """
    #expect(try marksOf(source) == ["true", "true"])
}

@Test(arguments: [(Profile.ios13, "30"), (Profile.ios7, "180"), (Profile.ios6, "600")])
func api_backgroundTimeRemaining_isTheFullBudgetOnEntry(_ profile: Profile, _ expected: String) throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          mark(string.format("%g", lifeline.backgroundTimeRemaining()))
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background", profile: profile)
    #expect(marks(recorder) == [expected])
}

@Test func api_backgroundTimeRemaining_countsDownInTheBackground() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          local id = lifeline.beginBackgroundTask("keep")
          lifeline.after(10, function()
            mark(string.format("%g", lifeline.backgroundTimeRemaining()))
            lifeline.endBackgroundTask(id)
          end)
        end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["20"])
}

@Test func api_backgroundTimeRemaining_isHugeAgainAfterForeground() throws {
    let source = """
        lifeline.on("didBecomeActive", function(e)
          if e.time > 0 then mark(tostring(lifeline.backgroundTimeRemaining() == math.huge)) end
        end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background\n5s foreground") == ["true"])
}

// MARK: - Background tasks

@Test func api_beginBackgroundTask_returnsDistinctPositiveIDs() throws {
    let source = """
        local a = lifeline.beginBackgroundTask("a")
        local b = lifeline.beginBackgroundTask("b")
        mark(math.type(a) .. "," .. math.type(b) .. "," .. tostring(a > 0) .. "," .. tostring(b > 0)
          .. "," .. tostring(b ~= a))
        mark(a); mark(b)
        lifeline.endBackgroundTask(a); lifeline.endBackgroundTask(b)
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(recorder.pluginErrorCount == 0)
    let shown = marks(recorder)
    #expect(shown.first == "integer,integer,true,true,true")
    // The ids Lua got are those of the tasks the host began under those names.
    let began = recorder.timeline.filter { $0.event == "taskBegan" }
    let id = { (name: String) in began.first { $0["name"]?.stringValue == name }?["task"] }
    #expect(shown.dropFirst().map { JSONValue.int(Int64($0) ?? -1) } == [id("a"), id("b")].compactMap { $0 })
    #expect(shown.count == 3)
}

@Test func api_beginBackgroundTaskWithName_recordsTheName() throws {
    let recorder = try simulate(
        plugins(["p": "local id = lifeline.beginBackgroundTask('save'); lifeline.endBackgroundTask(id)"]))
    let began = recorder.timeline.filter { $0.event == "taskBegan" && $0["name"]?.stringValue == "save" }
    #expect(began.count == 1)
    #expect(began.first?["plugin"]?.stringValue == "p")
}

@Test func api_beginBackgroundTaskWithNameAndHandler_callsHandlerAtExpiration() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          local id
          id = lifeline.beginBackgroundTask("save", function()
            mark("expiring:" .. string.format("%g", lifeline.now()))
            lifeline.endBackgroundTask(id)
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    // ios13: budget 30 s, expiration lead 5 s, from 1 s: the handlers run at 26 s.
    #expect(marks(recorder) == ["expiring:26"])
    let saveTask = recorder.timeline.first { $0.event == "taskBegan" && $0["name"]?.stringValue == "save" }?["task"]
    let ended = recorder.timeline.first { $0.event == "taskEnded" && $0["task"] == saveTask }
    #expect(ended?["expired"] == .bool(true))
    #expect(recorder.termination == nil)
}

@Test func api_beginBackgroundTaskWithHandlerOnly_usesItAsTheExpirationHandler() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          local id
          id = lifeline.beginBackgroundTask(function()
            mark("expiring")
            lifeline.endBackgroundTask(id)
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(marks(recorder) == ["expiring"])
    let unnamed = recorder.timeline.filter { $0.event == "taskBegan" && $0["name"] == nil }
    #expect(unnamed.count == 1)
    #expect(recorder.termination == nil)
}

@Test func api_beginBackgroundTaskWithNilNameAndHandler_usesTheHandler() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          local id
          id = lifeline.beginBackgroundTask(nil, function() mark("expiring"); lifeline.endBackgroundTask(id) end)
        end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["expiring"])
}

@Test func api_beginBackgroundTaskWithoutArguments_returnsAnID() throws {
    let source = "local id = lifeline.beginBackgroundTask(); mark(tostring(id > 0)); mark(tostring(lifeline.endBackgroundTask(id)))"
    #expect(try marksOf(source) == ["true", "true"])
}

@Test func api_endBackgroundTask_returnsTrueThenFalse() throws {
    let source = """
        local id = lifeline.beginBackgroundTask("t")
        mark(tostring(lifeline.endBackgroundTask(id)))
        mark(tostring(lifeline.endBackgroundTask(id)))
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(marks(recorder) == ["true", "false"])
    #expect(recorder.timeline.filter { $0.event == "endUnknownTask" }.count == 1)
    #expect(recorder.exitCode == 0)
}

@Test func api_endBackgroundTaskUnknownID_returnsFalseAndRecordsAWarning() throws {
    let recorder = try simulate(plugins(["p": "mark(tostring(lifeline.endBackgroundTask(987654)))"]))
    #expect(marks(recorder) == ["false"])
    let unknown = recorder.timeline.filter { $0.event == "endUnknownTask" }
    #expect(unknown.count == 1)
    #expect(unknown.first?["task"] == .int(987654))
    #expect(unknown.first?["plugin"]?.stringValue == "p")
}

@Test func api_taskLeftRunning_endsInABackgroundTaskTimeout() throws {
    let source = "lifeline.on('didEnterBackground', function() lifeline.beginBackgroundTask('forgotten') end)"
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(recorder.termination?.kind == .backgroundTaskTimeout)
    #expect(recorder.termination?.reason.contains("forgotten") == true)
    #expect(recorder.exitCode == 1)
}

// MARK: - lifeline.log

@Test func api_log_hasTheFourLevels() throws {
    let source = """
        local names = {}
        for k, v in pairs(lifeline.log) do names[#names + 1] = k .. "=" .. type(v) end
        table.sort(names)
        mark(table.concat(names, ","))
        """
    #expect(try marksOf(source) == ["debug=function,error=function,info=function,warning=function"])
}

@Test func api_module_hasTheDocumentedFunctions() throws {
    let source = """
        local names = {}
        for k, v in pairs(lifeline) do names[#names + 1] = k .. "=" .. type(v) end
        table.sort(names)
        mark(table.concat(names, ","))
        """
    #expect(
        try marksOf(source) == [
            "after=function,background=function,backgroundTimeRemaining=function,beginBackgroundTask=function,"
                + "config=table,endBackgroundTask=function,files=table,http=table,json=table,log=table,now=function,"
                + "on=function,profile=function,queue=table,sleep=function,state=function,store=table,tasks=table,"
                + "transfers=table"
        ])
}
