import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Background work from Lua: lifeline.background, the waiting calls, and task handles.

/// The task events of a run, as "event:task[:expired]" strings (marks left out).
private func taskEvents(_ recorder: Recorder) -> [String] {
    let marks = Set(
        recorder.timeline.compactMap { e -> Int64? in
            guard e.event == "taskBegan", e["name"]?.stringValue?.hasPrefix("mark:") == true,
                case .int(let id)? = e["task"]
            else { return nil }
            return id
        })
    return recorder.timeline.compactMap { e in
        guard ["taskBegan", "taskExpiring", "taskEnded"].contains(e.event), case .int(let id)? = e["task"],
            !marks.contains(id)
        else { return nil }
        if e.event == "taskEnded", case .bool(let expired)? = e["expired"] { return "taskEnded:\(id):\(expired)" }
        return "\(e.event):\(id)"
    }
}

private func eventNames(_ recorder: Recorder) -> [String] { recorder.timeline.map(\.event) }

@Test func background_immediateReturn_endsItsTaskOnTheNextTurn() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local t = lifeline.background('quick', function(task) mark('ran:' .. task.id) end)
          mark('done:' .. tostring(t:done()))
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    // fn runs on the turn after lifeline.background, so the handle is not done yet when it returns.
    #expect(marks(recorder) == ["done:false", "ran:1"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
    #expect(eventNames(recorder).last == "suspended")
}

@Test func background_passesTheTaskAndTheExtraArguments() throws {
    let source = """
        local t
        t = lifeline.background('args', function(task, a, b, c)
          mark(tostring(task == t) .. ',' .. tostring(a) .. ',' .. tostring(b) .. ',' .. tostring(c))
        end, 1, 'two', nil)
        """
    #expect(try marksOf(source) == ["true,1,two,nil"])
}

@Test func background_fnRaises_recordsPluginErrorThenEndsTheTask() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.background('boom', function()
            lifeline.sleep(1)
            error('upload failed')
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("init.lua:4: upload failed") == true, "\(errors)")
    #expect(errors.first?.traceback.contains("stack traceback:") == true)
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
    let names = eventNames(recorder)
    #expect(names.firstIndex(of: "pluginError")! < names.lastIndex(of: "taskEnded")!)
    #expect(names.last == "suspended")
}

@Test func background_sleepWaitsOnTheHostClock() throws {
    let source = """
        lifeline.background('nap', function()
          mark('before:' .. lifeline.now())
          lifeline.sleep(2.5)
          mark('after:' .. lifeline.now())
        end)
        """
    #expect(try marksOf(source) == ["before:0.0", "after:2.5"])
}

@Test func background_expiresDuringAWait_theWaitRaisesARecognisableError() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.background('long', function()
            local ok, err = pcall(lifeline.sleep, 100)
            mark(tostring(ok) .. ',' .. tostring(err.expired) .. ',' .. err.kind .. ',' .. tostring(err))
            mark('at:' .. lifeline.now())
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n2s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    // ios13: the budget is 30 s and expiration comes 5 s before its end, at 2 + 25 s.
    #expect(marks(recorder) == ["false,true,expired,background task 1 expired", "at:27.0"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskExpiring:1", "taskEnded:1:true"])
    #expect(recorder.termination == nil)
    #expect(eventNames(recorder).last == "suspended")
}

@Test func background_uncaughtExpiration_endsTheTaskWithoutAPluginError() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.background('long', function() lifeline.sleep(100); mark('never') end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n2s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder).isEmpty)
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskExpiring:1", "taskEnded:1:true"])
}

@Test func background_cleanupPastTheGrace_isClosedAndItsToBeClosedVariablesRun() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.background('stubborn', function()
            local guard <close> = setmetatable({}, {__close = function() mark('closed:' .. lifeline.now()) end})
            pcall(lifeline.sleep, 100)
            mark('cleaning:' .. lifeline.now())
            lifeline.sleep(10)  -- longer than the 1 s expiration-handler limit
            mark('never')
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n2s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["cleaning:27.0", "closed:28.0"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskExpiring:1", "taskEnded:1:true"])
    let ended = recorder.timeline.last { $0.event == "taskEnded" && $0["task"] == .int(1) }
    #expect(ended?.time == .seconds(28))
    #expect(recorder.termination == nil)
}

@Test func background_cleanupWithinTheGrace_mayWaitAgain() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.background('tidy', function()
            pcall(lifeline.sleep, 100)
            lifeline.sleep(0.5)
            mark('tidied:' .. lifeline.now())
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n2s background")
    #expect(marks(recorder) == ["tidied:27.5"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskExpiring:1", "taskEnded:1:true"])
}

@Test func background_cancelWhileWaiting_raisesCancelledAndEndsTheTaskNotExpired() throws {
    let source = """
        local t = lifeline.background('job', function()
          local ok, err = pcall(lifeline.sleep, 100)
          mark(tostring(ok) .. ',' .. tostring(err.cancelled) .. ',' .. err.kind)
        end)
        lifeline.after(3, function() t:cancel(); mark('cancelled:' .. tostring(t:done())) end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["cancelled:false", "false,true,cancelled"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
    let ended = recorder.timeline.last { $0.event == "taskEnded" && $0["task"] == .int(1) }
    #expect(ended?.time == .seconds(3))
}

@Test func background_cancelBeforeItStarts_neverRunsFn() throws {
    let source = """
        local t = lifeline.background('job', function() mark('ran') end)
        t:cancel()
        mark('done:' .. tostring(t:done()))
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["done:true"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
}

@Test func background_cancellingItself_makesTheNextWaitRaise() throws {
    let source = """
        lifeline.background('self', function(task)
          task:cancel()
          mark('still running')
          local ok, err = pcall(lifeline.sleep, 1)
          mark(tostring(ok) .. ',' .. err.kind)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["still running", "false,cancelled"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
}

@Test func background_waitOnAnotherTask_returnsWhatBecameOfIt() throws {
    let source = """
        local good = lifeline.background('good', function() lifeline.sleep(1) end)
        local bad = lifeline.background('bad', function() lifeline.sleep(2); error('nope', 0) end)
        lifeline.background('waiter', function()
          mark('good:' .. tostring(good:wait()) .. '@' .. lifeline.now())
          local ok, err = bad:wait()
          mark('bad:' .. tostring(ok) .. ',' .. err.kind .. ',' .. err.message .. '@' .. lifeline.now())
          -- A finished task answers at once, from its handle.
          local ok2, err2 = bad:wait()
          mark('again:' .. tostring(ok2) .. ',' .. err2.message)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["good:true@1.0", "bad:false,error,nope@2.0", "again:false,nope"])
    #expect(recorder.pluginErrorCount == 1)
}

@Test func background_waitOnAnExpiredTask_saysExpired() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local slow = lifeline.background('slow', function() lifeline.sleep(100) end)
          lifeline.background('watcher', function()
            local ok, err = pcall(slow.wait, slow)
            -- The watcher's own wait is interrupted too: both tasks expire at once.
            mark(tostring(ok) .. ',' .. err.kind)
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(marks(recorder) == ["false,expired"])
    #expect(
        taskEvents(recorder) == [
            "taskBegan:1", "taskBegan:2", "taskExpiring:1", "taskExpiring:2", "taskEnded:1:true", "taskEnded:2:true",
        ])
}

@Test func background_taskWaitingForItself_isAnError() throws {
    let source = """
        lifeline.background('loop', function(task)
          local ok, err = pcall(task.wait, task)
          mark(tostring(ok) .. ':' .. err)
        end)
        """
    let result = try marksOf(source)
    #expect(result.count == 1)
    #expect(result.first?.contains("false:") == true)
    #expect(result.first?.contains("a task cannot wait for itself") == true, "\(result)")
}

// MARK: - Waiting calls outside a host-run coroutine

struct Misuse: Sendable, CustomTestStringConvertible {
    var code: String
    var expected: String
    var testDescription: String { code }
}

@Test(arguments: [
    Misuse(code: "lifeline.sleep(1)", expected: "lifeline.sleep waits, so it must be called from inside a function"),
    Misuse(
        code: "lifeline.http.request{url = 'http://127.0.0.1/'}",
        expected: "lifeline.http.request waits, so it must be called from inside"),
    Misuse(
        code: "local t = lifeline.background('x', function() lifeline.sleep(1) end); t:wait()",
        expected: "task:wait waits, so it must be called from inside"),
])
func waitingCall_outsideBackground_raisesErrorThatSaysToUseBackground(_ misuse: Misuse) throws {
    let result = try marksOf("local ok, err = pcall(function() \(misuse.code) end); mark(tostring(ok)); mark(err)")
    #expect(result.first == "false")
    #expect(result.last?.contains(misuse.expected) == true, "\(result)")
    #expect(result.last?.contains("lifeline.background") == true)
}

@Test func waitingCall_inACoroutineOfThePluginsOwn_isRefused() throws {
    let source = """
        lifeline.background('outer', function()
          local co = coroutine.wrap(function() return pcall(lifeline.sleep, 1) end)
          local ok, err = co()
          mark(tostring(ok)); mark(err)
        end)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("a coroutine of your own") == true, "\(result)")
}

@Test func waitingCall_insideACFunctionThatCannotYield_isRefused() throws {
    let source = """
        lifeline.background('sorter', function()
          local ok, err = pcall(table.sort, {3, 1, 2}, function(a, b) lifeline.sleep(1); return a < b end)
          mark(tostring(ok)); mark(err)
        end)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("cannot wait here") == true, "\(result)")
}

@Test func background_bareYield_isAPluginErrorAndTheTaskEnds() throws {
    let source = """
        lifeline.background('yielder', function()
          local closer <close> = setmetatable({}, {__close = function() mark('closed') end})
          coroutine.yield(1)
          mark('never')
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["closed"])
    #expect(pluginErrors(recorder).first?.message.contains("yielded outside a waiting call") == true)
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
}

@Test(arguments: [
    BadCall(call: "lifeline.background(1, function() end)", function: "lifeline.background", argument: 1),
    BadCall(call: "lifeline.background('n')", function: "lifeline.background", argument: 2),
    BadCall(call: "lifeline.background('n', 3)", function: "lifeline.background", argument: 2),
    BadCall(call: "lifeline.http.request('http://x/')", function: "lifeline.http.request", argument: 1),
    BadCall(call: "lifeline.http.request{url = 'ftp://x/'}", function: "lifeline.http.request", argument: 1),
    BadCall(call: "lifeline.http.request{}", function: "lifeline.http.request", argument: 1),
    BadCall(
        call: "lifeline.http.request{url = 'http://x/', timeout = -1}", function: "lifeline.http.request",
        argument: 1),
    BadCall(
        call: "lifeline.http.request{url = 'http://x/', headers = {a = 1}}", function: "lifeline.http.request",
        argument: 1),
    BadCall(
        call: "lifeline.http.request{url = 'http://x/', method = 'GE T'}", function: "lifeline.http.request",
        argument: 1),
    BadCall(call: "lifeline.sleep('1')", function: "lifeline.sleep", argument: 1),
    BadCall(call: "lifeline.sleep(-1)", function: "lifeline.sleep", argument: 1),
])
func asyncAPI_wrongArgument_raisesErrorNamingFunctionAndArgument(_ bad: BadCall) throws {
    // Inside a background function, so the waiting calls get as far as checking their arguments.
    let source = """
        lifeline.background('t', function() local ok, err = pcall(function() \(bad.call) end); mark(tostring(ok)); mark(err) end)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("bad argument #\(bad.argument) to '\(bad.function)'") == true, "\(result)")
}

// MARK: - Leaks and preemption

@Test func background_afterExpiryDuringAWait_leavesNoTaskCoroutineOrWait() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          for i = 1, 3 do
            lifeline.background('w' .. i, function() lifeline.sleep(100) end)
          end
        end)
        """
    try withPluginFolder(plugins(["p": source])) { dir in
        let box = PluginBox()
        let host = makeHost([capturingDescriptor(name: "p", directory: dir + "/p", box: box)])
        defer { host.shutdown() }
        try host.perform(.launch)
        try host.perform(.background)
        host.executor.run(until: .seconds(10), shouldStop: { false }, afterJob: host.afterJob)
        #expect(box.plugin?.liveBackgroundWorks == 3)
        #expect(host.pendingWaits == 3)
        #expect(host.activeTasks.count == 3)
        // Expiration at 25 s; everything unwinds, and the app suspends.
        host.executor.run(shouldStop: { false }, afterJob: host.afterJob)
        #expect(host.state == .suspended)
        #expect(box.plugin?.liveBackgroundWorks == 0)
        #expect(host.pendingWaits == 0)
        #expect(host.activeTasks.isEmpty)
    }
}

@Test func background_runawayLoopInsideTheCoroutine_isPreempted() throws {
    let source = """
        lifeline.background('spin', function()
          lifeline.sleep(1)
          while true do end
        end)
        """
    let recorder = try simulate(
        plugins(["p": source]), scenario: "0s launch", profile: profile(transition: 0.05), watchdogScale: 1)
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .watchdog)
    #expect(termination.reason.contains("background task 'spin'"), "\(termination.reason)")
    #expect(termination.traceback?.contains("init.lua:3") == true, "\(termination.traceback ?? "")")
}

@Test func background_report_isByteIdenticalAcrossRuns() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          for i = 1, 5 do
            lifeline.background('b' .. i, function(task, n)
              lifeline.sleep(n * 0.25)
              if n % 2 == 0 then error('even ' .. n) end
              pcall(lifeline.sleep, 100)
            end, i)
          end
        end)
        """
    let scenario = "0s launch\n1s background\n40s foreground\n41s background"
    let reports = try withPluginFolder(plugins(["p": source])) { dir in
        try (0..<2).map { _ in
            try Simulation.run(
                scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
                plugins: try LuaPluginLoader.descriptors(in: dir), configuration: HostConfiguration()
            ).report().serialized(pretty: true)
        }
    }
    #expect(reports[0] == reports[1])
    #expect(reports[0].contains("even 4"))
}

@Test func background_errorValueWhoseTostringRaises_isAPluginErrorNotACrash() throws {
    let source = """
        lifeline.background('bad', function()
          error(setmetatable({}, {__tostring = function() error('boom in __tostring') end}))
        end)
        lifeline.background('fine', function() mark('other work goes on') end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch")
    #expect(marks(recorder) == ["other work goes on"])
    #expect(pluginErrors(recorder).first?.message == "(the error object's __tostring failed)")
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskBegan:2", "taskEnded:1:false", "taskEnded:2:false"])
}

// MARK: - To-be-closed variables run on every path that ends the work

/// A `<close>` variable that marks when it closes, with the error it closed on.
private let closer = """
    local function closer(label)
      return setmetatable({}, {__close = function(_, err)
        mark(label .. ':' .. (err == nil and 'clean' or (type(err) == 'table' and err.kind or tostring(err):match('[^:]*$'))))
      end})
    end

    """

@Test func background_closeVariablesRun_whenFnRaises() throws {
    let source = closer + """
        lifeline.background('boom', function()
          local c <close> = closer('c')
          lifeline.sleep(1)
          error('broke')
        end)
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(marks(recorder) == ["c: broke"])
    #expect(pluginErrors(recorder).count == 1)
}

@Test func background_closeVariablesRun_whenCancelledWhileWaiting() throws {
    let source = closer + """
        local t = lifeline.background('long', function()
          local outer <close> = closer('outer')
          do
            local inner <close> = closer('inner')
            lifeline.sleep(10)
          end
        end)
        lifeline.after(1, function() t:cancel() end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n20s terminate")
    #expect(marks(recorder) == ["inner:cancelled", "outer:cancelled"])
    #expect(pluginErrors(recorder).isEmpty)
}

@Test func background_closeVariablesRun_whenAnExpirationGoesUncaught() throws {
    let source = closer + """
        lifeline.on('didEnterBackground', function()
          lifeline.background('forever', function()
            local c <close> = closer('c')
            while true do lifeline.sleep(5) end
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(marks(recorder) == ["c:expired"])
    #expect(pluginErrors(recorder).isEmpty)
    #expect(recorder.termination == nil)
}

@Test func background_anErrorInAClose_isReportedAndTheTaskStillEnds() throws {
    let source = """
        lifeline.background('bad close', function()
          local c <close> = setmetatable({}, {__close = function() error('close failed') end})
          error('first')
        end)
        """
    let recorder = try simulate(plugins(["p": source]))
    let messages = pluginErrors(recorder).map(\.message)
    #expect(messages.count == 2, "\(messages)")
    #expect(messages.first?.contains("first") == true)
    #expect(messages.last?.contains("close failed") == true)
    #expect(recorder.timeline.filter { $0.event == "taskEnded" }.count == 1)
}

@Test func background_cancelWhileAResumeIsQueued_runsTheRestUnderTheExpirationHandlerLimit() throws {
    // a's sleep ends first, so its resume is queued when b's timer cancels it at the same instant:
    // from then on a runs as cleanup, under the expiration handler's limit, not a slice's.
    let source = """
        local a = lifeline.background('a', function()
          local ok = pcall(lifeline.sleep, 1)
          mark('a woke: ' .. tostring(ok))
          while true do end
        end)
        lifeline.background('b', function()
          lifeline.after(1, function() a:cancel() end)
        end)
        """
    let recorder = try simulate(
        plugins(["p": source]), scenario: "0s launch\n5s terminate", profile: profile(transition: 30, expiration: 0.2))
    #expect(marks(recorder) == ["a woke: false"])
    #expect(recorder.termination?.kind == .watchdog)
    let reason = recorder.termination?.reason ?? ""
    #expect(reason.contains("0.2"), "\(reason)")
}

@Test func background_waitCycle_isAClearErrorNotAHang() throws {
    let source = """
        local a, b, c
        a = lifeline.background('a', function() lifeline.sleep(1); mark('a: ' .. tostring(b:wait())) end)
        b = lifeline.background('b', function() lifeline.sleep(1); c:wait() end)
        c = lifeline.background('c', function()
          lifeline.sleep(2)
          local ok, err = pcall(a.wait, a)
          mark('c: ' .. tostring(ok) .. ' ' .. tostring(err):match('already waits.*$'))
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n10s terminate")
    #expect(
        marks(recorder) == [
            "c: false already waits (through task:wait) for this task, so each would wait for the other forever",
            "a: true",
        ], "\(pluginErrors(recorder))")
    #expect(recorder.timeline.filter { $0.event == "taskEnded" && $0["expired"] == .bool(true) }.isEmpty)
}

@Test func background_hostRunCoroutine_cannotBeResumedOrClosedByThePlugin() throws {
    let source = """
        local co
        local t = lifeline.background('nap', function()
          co = coroutine.running()
          lifeline.sleep(5)
          mark('slept until ' .. lifeline.now())
        end)
        lifeline.after(1, function()
          mark(tostring(select(2, pcall(coroutine.resume, co, true))):match('run by the host') or 'resumed')
          mark(tostring(select(2, pcall(coroutine.close, co))):match('run by the host') or 'closed')
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n10s terminate")
    #expect(marks(recorder) == ["run by the host", "run by the host", "slept until 5.0"])
}
