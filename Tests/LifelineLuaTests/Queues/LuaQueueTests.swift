import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Operation queues from Lua (lifeline.queue), in virtual time.

/// The queue events of a run, as "event name@seconds" with the flags that are set
/// ("opFinished b@2 cancelled"), and the queues' own tasks ("taskBegan queue q@0").
private func queueEvents(_ recorder: Recorder) -> [String] {
    var queueTasks: Set<Int64> = []
    return recorder.timeline.compactMap { e in
        let at = "@\(ReportNumber.seconds(e.time))"
        switch e.event {
        case "opStarted", "opFinished", "opDropped", "opReplaced":
            var line = e.event + " " + (e["name"]?.stringValue ?? "#\(e["op"]!.serialized())") + at
            if let result = e["result"]?.stringValue, result != "finished" { line += " " + result }
            return line
        case "taskBegan":
            guard let name = e["name"]?.stringValue, name.hasPrefix("queue "), case .int(let id)? = e["task"] else {
                return nil
            }
            queueTasks.insert(id)
            return "taskBegan \(name)" + at
        case "taskEnded":
            guard case .int(let id)? = e["task"], queueTasks.contains(id) else { return nil }
            return "taskEnded" + (e["expired"] == .bool(true) ? " expired" : "") + at
        case "suspended", "terminated":
            return e.event + at
        default:
            return nil
        }
    }
}

private func run(_ source: String, scenario: String = "0s launch") throws -> Recorder {
    let recorder = try simulate(plugins(["p": source]), scenario: scenario)
    return recorder
}

@Test func queue_plainFunction_runsOnALaterTurnAndFinishesWhenItReturns() throws {
    let source = """
        local q = lifeline.queue('q')
        local op = q:add(function() mark('ran') end)
        mark('added finished=' .. tostring(op:isFinished()) .. ' count=' .. q:count())
        lifeline.after(1, function() mark('later finished=' .. tostring(op:isFinished()) .. ' count=' .. q:count()) end)
        """
    let recorder = try run(source)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["added finished=false count=1", "ran", "later finished=true count=0"])
    #expect(queueEvents(recorder) == ["taskBegan queue q@0", "opStarted #1@0", "opFinished #1@0", "taskEnded@0"])
}

@Test func queue_serial_runsInOrderOneAtATime() throws {
    let source = """
        local q = lifeline.queue('q')
        for i, d in ipairs({3, 1, 2}) do
          q:add{name = 'op' .. i, run = function() lifeline.sleep(d) end}
        end
        """
    let recorder = try run(source)
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue q@0", "opStarted op1@0", "opFinished op1@3", "opStarted op2@3", "opFinished op2@4",
            "opStarted op3@4", "opFinished op3@6", "taskEnded@6",
        ])
}

@Test func queue_maxConcurrentTwo_runsTwoAtOnce() throws {
    let source = """
        local q = lifeline.queue('q', {maxConcurrent = 2})
        for i = 1, 3 do q:add{name = 'op' .. i, run = function() lifeline.sleep(1) end} end
        """
    let recorder = try run(source)
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue q@0", "opStarted op1@0", "opStarted op2@0", "opFinished op1@1", "opFinished op2@1",
            "opStarted op3@1", "opFinished op3@2", "taskEnded@2",
        ])
}

@Test func queue_uniqueIgnore_runsBoth() throws {
    let source = """
        local q = lifeline.queue('q')
        local a = q:add{name = 'r', run = function() lifeline.sleep(1) end}
        local b = q:add{name = 'r', unique = 'ignore', run = function() end}
        mark(tostring(a ~= nil and b ~= nil))
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["true"])
    #expect(queueEvents(recorder).filter { $0.hasPrefix("op") } == [
        "opStarted r@0", "opFinished r@1", "opStarted r@1", "opFinished r@1",
    ])
}

@Test func queue_uniqueDrop_dropsTheNewOneWhilePendingOrRunning() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'r', run = function() lifeline.sleep(2) end}
        mark('pending: ' .. tostring(q:add{name = 'r', unique = 'drop', run = function() mark('never') end}))
        lifeline.after(1, function()
          mark('running: ' .. tostring(q:add{name = 'r', unique = 'drop', run = function() mark('never') end}))
        end)
        lifeline.after(3, function()
          mark('after: ' .. type(q:add{name = 'r', unique = 'drop', run = function() mark('ran again') end}))
        end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["pending: nil", "running: nil", "after: userdata", "ran again"])
    #expect(
        queueEvents(recorder).filter { $0.hasPrefix("op") } == [
            "opDropped r@0", "opStarted r@0", "opDropped r@1", "opFinished r@2", "opStarted r@3", "opFinished r@3",
        ])
}

@Test func queue_uniqueReplace_pending_takesTheOldOnesPlace() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'first', run = function() lifeline.sleep(1) end}
        local old = q:add{name = 'r', run = function() mark('old ran') end}
        q:add{name = 'last', run = function() mark('last ran') end}
        q:add{name = 'r', unique = 'replace', run = function() mark('new ran') end}
        mark('old cancelled=' .. tostring(old:isCancelled()) .. ' finished=' .. tostring(old:isFinished()))
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["old cancelled=true finished=true", "new ran", "last ran"])
    #expect(
        queueEvents(recorder).filter { $0.hasPrefix("op") } == [
            "opReplaced r@0", "opFinished r@0 cancelled", "opStarted first@0", "opFinished first@1",
            "opStarted r@1", "opFinished r@1", "opStarted last@1", "opFinished last@1",
        ])
}

@Test func queue_uniqueReplace_running_cancelsItAndTheNewOneRunsNext() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'r', run = function()
          local ok, err = pcall(lifeline.sleep, 10)
          mark('old: ' .. tostring(ok) .. ' ' .. tostring(err.kind))
        end}
        q:add{name = 'other', run = function() mark('other ran') end}
        lifeline.after(1, function()
          q:add{name = 'r', unique = 'replace', run = function() mark('new ran at ' .. lifeline.now()) end}
        end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["old: false cancelled", "new ran at 1.0", "other ran"])
    #expect(
        queueEvents(recorder).filter { $0.hasPrefix("op") } == [
            "opStarted r@0", "opReplaced r@1", "opFinished r@1 cancelled", "opStarted r@1",
            "opFinished r@1", "opStarted other@1", "opFinished other@1",
        ])
}

@Test func queue_addSequential_keepsTheOrderAcrossWaits_evenOnAConcurrentQueue() throws {
    let source = """
        local q = lifeline.queue('q', {maxConcurrent = 3})
        local ops = q:addSequential({
          {name = 'a', run = function() lifeline.sleep(3); mark('a') end},
          {name = 'b', run = function() lifeline.sleep(1); mark('b') end},
          function() lifeline.sleep(2); mark('c') end,
        })
        mark(#ops .. ' ' .. ops[1].name .. ' ' .. tostring(ops[3].name))
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["3 a nil", "a", "b", "c"])
    let times = markEvents(recorder).map { ReportNumber.seconds($0.time) }
    #expect(times == ["0", "3", "4", "6"])
}

@Test func queue_addSequentialWithWait_returnsOnceAllFinished() throws {
    let source = """
        local q = lifeline.queue('q')
        lifeline.background('driver', function()
          local ops = q:addSequential({
            function() lifeline.sleep(1) end,
            function(op) lifeline.sleep(1); op:finish() end,
          }, {wait = true})
          mark('waited until ' .. lifeline.now() .. ', finished=' .. tostring(ops[2]:isFinished()))
        end)
        """
    let recorder = try run(source)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["waited until 2.0, finished=true"])
}

@Test func queue_timeout_callsOnTimeoutWithTheOperationAndStopsIt() throws {
    let source = """
        local q = lifeline.queue('q')
        local op
        op = q:add{name = 'slow', timeout = 2,
          onTimeout = function(o) mark('onTimeout same=' .. tostring(o == op) .. ' at ' .. lifeline.now()) end,
          run = function(o)
            local ok, err = pcall(lifeline.sleep, 100)
            mark('sleep raised ' .. err.kind .. ', cancelled=' .. tostring(o:isCancelled()))
          end}
        lifeline.after(5, function()
          mark('finish after timeout: ' .. tostring(op:finish()) .. ', cancelled=' .. tostring(op:isCancelled()))
        end)
        """
    let recorder = try run(source)
    #expect(
        marks(recorder) == [
            "onTimeout same=true at 2.0", "sleep raised cancelled, cancelled=true",
            "finish after timeout: false, cancelled=true",
        ])
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue q@0", "opStarted slow@0", "opFinished slow@2 timedOut", "taskEnded@2",
        ])
}

@Test func queue_operationTakingOp_finishesOnlyWithFinish() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'async', run = function(op)
          lifeline.after(3, function() mark('finish: ' .. tostring(op:finish())) end)
        end}
        q:add{name = 'next', run = function() mark('next at ' .. lifeline.now()) end}
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["finish: true", "next at 3.0"])
    #expect(queueEvents(recorder).contains("opFinished async@3"))
}

@Test func queue_operationTakingOp_withoutFinish_endsAtItsTimeout() throws {
    let source = """
        lifeline.queue('q'):add{name = 'forgot', timeout = 4, run = function(op) end}
        """
    let recorder = try run(source)
    #expect(queueEvents(recorder).contains("opFinished forgot@4 timedOut"))
}

@Test func queue_cancelBeforeStart_neverRuns() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'first', run = function() lifeline.sleep(1) end}
        local second = q:add{name = 'second', run = function() mark('never') end}
        second:cancel()
        mark('cancelled=' .. tostring(second:isCancelled()) .. ' count=' .. q:count())
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["cancelled=true count=1"])
    #expect(
        queueEvents(recorder).filter { $0.hasPrefix("op") } == [
            "opFinished second@0 cancelled", "opStarted first@0", "opFinished first@1",
        ])
}

@Test func queue_cancelDuringAWait_raisesCancelledInTheWait() throws {
    let source = """
        local q = lifeline.queue('q')
        local op = q:add{name = 'w', run = function()
          local ok, err = pcall(lifeline.sleep, 10)
          mark(tostring(ok) .. ' ' .. err.kind .. ' ' .. tostring(err.cancelled) .. ' at ' .. lifeline.now())
        end}
        lifeline.after(2, function() op:cancel() end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["false cancelled true at 2.0"])
    #expect(queueEvents(recorder).contains("opFinished w@2 cancelled"))
}

@Test func queue_suspendAndResume_areCounted() throws {
    let source = """
        local q = lifeline.queue('q')
        q:suspend()
        q:suspend()
        q:add(function() mark('ran at ' .. lifeline.now()) end)
        lifeline.after(1, function() mark('resume ' .. tostring(q:resume()) .. ' ' .. tostring(q:isSuspended())) end)
        lifeline.after(2, function() mark('resume ' .. tostring(q:resume()) .. ' ' .. tostring(q:isSuspended())) end)
        lifeline.after(3, function() mark('resume ' .. tostring(q:resume())) end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["resume true true", "resume true false", "ran at 2.0", "resume false"])
}

@Test func queue_suspended_withNothingRunning_letsTheAppSuspend() throws {
    let source = """
        local q = lifeline.queue('q')
        lifeline.on('didEnterBackground', function()
          q:suspend()
          q:add(function() mark('ran at ' .. lifeline.now()) end)
        end)
        lifeline.on('willEnterForeground', function() q:resume() end)
        """
    let recorder = try run(source, scenario: "0s launch\n1s background\n10s foreground")
    #expect(marks(recorder) == ["ran at 10.0"])
    #expect(queueEvents(recorder).first == "suspended@1")
}

@Test func queue_delegates_willStartBeforeTheFirstOp_didFinishAfterTheLastBeforeTheTaskEnds() throws {
    let source = """
        local q = lifeline.queue('q')
        q:on('willStartOperations', function() mark('willStart') end)
        q:on('didFinishOperations', function() mark('didFinish ' .. q:count()) end)
        q:add(function() lifeline.sleep(1); mark('op1') end)
        q:add(function() mark('op2') end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["willStart", "op1", "op2", "didFinish 0"])
    let names = recorder.timeline.map { e in e.event == "taskBegan" ? (e["name"]?.stringValue ?? "") : e.event }
    let didFinish = names.firstIndex(of: "mark:didFinish 0")!
    #expect(names.lastIndex(of: "opFinished")! < didFinish)
    #expect(didFinish < names.lastIndex(of: "taskEnded")!)
    #expect(names.firstIndex(of: "mark:willStart")! < names.firstIndex(of: "opStarted")!)
}

@Test func queue_burstOfAThousandOperations_holdsExactlyOneTask() throws {
    let source = """
        local q = lifeline.queue('burst')
        lifeline.on('didEnterBackground', function()
          for i = 1, 1000 do q:add(function() end) end
        end)
        """
    let recorder = try run(source, scenario: "0s launch\n1s background")
    let events = queueEvents(recorder)
    #expect(events.filter { $0.hasPrefix("taskBegan") } == ["taskBegan queue burst@1"])
    #expect(events.filter { $0.hasPrefix("taskEnded") } == ["taskEnded@1"])
    #expect(events.filter { $0.hasPrefix("opFinished") }.count == 1000)
    #expect(events.last == "suspended@1")
}

@Test func queue_expiration_stopsTheRunningOne_keepsThePending_andResumesInTheForeground() throws {
    let source = """
        local q = lifeline.queue('q')
        lifeline.on('didEnterBackground', function()
          q:add{name = 'long', timeout = math.huge, run = function()
            local ok, err = pcall(lifeline.sleep, 100)
            mark('long: ' .. err.kind .. ' at ' .. lifeline.now())
          end}
          q:add{name = 'next', run = function() mark('next at ' .. lifeline.now()) end}
        end)
        """
    let recorder = try run(source, scenario: "0s launch\n1s background\n40s foreground")
    #expect(recorder.termination == nil)
    #expect(marks(recorder) == ["long: expired at 26.0", "next at 40.0"])
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue q@1", "opStarted long@1", "opFinished long@26 expired", "taskEnded expired@26",
            "suspended@26", "taskBegan queue q@40", "opStarted next@40", "opFinished next@40", "taskEnded@40",
        ])
}

@Test func queue_runRaises_recordsPluginError_andTheNextOneRuns() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'bad', run = function() lifeline.sleep(1); error('broken') end}
        q:add{name = 'good', run = function() mark('good ran') end}
        """
    let recorder = try run(source)
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("init.lua:2: broken") == true, "\(errors)")
    #expect(marks(recorder) == ["good ran"])
    #expect(
        queueEvents(recorder).filter { $0.hasPrefix("op") } == [
            "opStarted bad@0", "opFinished bad@1 failed", "opStarted good@1", "opFinished good@1",
        ])
}

@Test func queue_opWait_returnsWhatBecameOfTheOperation() throws {
    let source = """
        local q = lifeline.queue('q', {maxConcurrent = 2})
        local good = q:add(function() lifeline.sleep(1) end)
        local bad = q:add{timeout = 2, run = function() lifeline.sleep(5) end}
        lifeline.background('driver', function()
          mark('good: ' .. tostring(good:wait()) .. ' at ' .. lifeline.now())
          local ok, why = bad:wait()
          mark('bad: ' .. tostring(ok) .. ' ' .. why .. ' at ' .. lifeline.now())
          mark('again: ' .. tostring(good:wait()))
        end)
        """
    let recorder = try run(source)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["good: true at 1.0", "bad: false timedOut at 2.0", "again: true"])
}

@Test func queue_background_isTheGlobalQueue() throws {
    let source = """
        local q = lifeline.queue.background
        mark(q.name .. ' ' .. tostring(lifeline.queue('background').name))
        q:add(function() mark('ran') end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["background background", "ran"])
    #expect(queueEvents(recorder).first == "taskBegan queue background@0")
}

@Test func queue_badInput_isAClearLuaError() throws {
    let cases: [(String, String)] = [
        ("lifeline.queue('q'):add{name = 'x', unique = 'sometimes', run = function() end}",
         "unknown uniqueness policy 'sometimes'; the policies are: \"ignore\", \"drop\", \"replace\""),
        ("lifeline.queue('q'):add{timeout = -1, run = function() end}", "timeout must be a number of seconds > 0"),
        ("lifeline.queue('q'):add{unique = 'drop', run = function() end}", "unique = \"drop\" needs a name"),
        ("lifeline.queue('q'):add{name = 'x'}", "field 'run' must be a function"),
        ("lifeline.queue('q'):add(42)", "an operation is a function or a table"),
        ("lifeline.queue('q', {maxConcurrent = 0})", "maxConcurrent must be an integer >= 1"),
        ("lifeline.queue('q', {maxConcurrent = 1.5})", "maxConcurrent must be an integer >= 1"),
        ("lifeline.queue('q'); lifeline.queue('q', {maxConcurrent = 2})",
         "queue 'q' already exists with maxConcurrent = 1, not 2"),
        ("lifeline.queue('q'):on('sometime', function() end)", "unknown queue event 'sometime'"),
        ("lifeline.queue('q'):addSequential({function() end, {unique = 'drop', name = 'n', run = function() end}})",
         "unique is for add, not addSequential"),
        ("lifeline.queue('q'):addSequential({function() end}, {wait = true})",
         "must be called from inside a function that lifeline.background runs"),
        ("lifeline.queue.background.add(nil, function() end)", "lifeline.queue expected"),
    ]
    for (code, expected) in cases {
        let source = "local ok, err = pcall(function() \(code) end) mark(tostring(err))"
        let recorder = try run(source)
        let message = marks(recorder).first ?? ""
        #expect(message.contains(expected), "\(code) -> \(message)")
        #expect(!queueEvents(recorder).contains { $0.hasPrefix("opStarted") }, "\(code)")
    }
}

/// A Swift plugin that adds an operation to the Lua plugin's queue, by name.
final class SharingSwiftPlugin: SwiftPlugin {
    static let name = "swift-side"
    init() {}
    func load(_ context: PluginContext) throws {
        context.after(0.5) {
            let q = try context.queue("shared")
            q.add(name: "swift-op") { _ in try await context.sleep(seconds: 1) }
        }
    }
}

@Test func queue_aSwiftOperationAndALuaOperation_shareOneQueue() throws {
    let source = """
        local q = lifeline.queue('shared')
        q:add{name = 'lua-op', run = function() lifeline.sleep(1) end}
        q:add{name = 'lua-op-2', run = function() mark('lua-op-2 at ' .. lifeline.now()) end}
        """
    let recorder = try withPluginFolder(plugins(["p": source])) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir) + [SharingSwiftPlugin.descriptor]
        return try Simulation.run(
            scenario: try Scenario.parse("0s launch", fileName: "t.scenario"), plugins: descriptors,
            configuration: HostConfiguration())
    }
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue shared@0", "opStarted lua-op@0", "opFinished lua-op@1", "opStarted lua-op-2@1",
            "opFinished lua-op-2@1", "opStarted swift-op@1", "opFinished swift-op@2", "taskEnded@2",
        ])
    #expect(marks(recorder) == ["lua-op-2 at 1.0"])
}

@Test func queue_pendingOperations_holdNoCoroutine_soTwentyFiveThousandFitTheMemoryCap() throws {
    // A coroutine costs about 1 KiB beside the host's record of the operation: 25,000 of both
    // would pass the 32 MiB cap. A pending operation holds only its handle, its function's
    // reference and the host's record.
    let source = """
        local q = lifeline.queue('many')
        local f = function() end
        for i = 1, 25000 do q:add(f) end
        mark('queued ' .. q:count())
        """
    let recorder = try run(source)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["queued 25000"])
    #expect(queueEvents(recorder).filter { $0.hasPrefix("opFinished") }.count == 25000)
}

/// The example at the top of docs/queues.md, as written there.
@Test func docsExample_queues_savesInOrderUnderOneTask() throws {
    let source = """
        local q = lifeline.queue("notes")            -- serial: one operation at a time
        q:on("didFinishOperations", function() print("all saved at", lifeline.now()) end)

        lifeline.on("didEnterBackground", function()
          for i = 1, 3 do
            q:add{name = "save-" .. i, run = function()
              local r = lifeline.http.request{method = "PUT", url = "http://127.0.0.1:8080/notes/" .. i, body = "note " .. i}
              print("saved", i, r and r.status, lifeline.now())
            end}
          end
        end)
        """
    let files = ["notes/init.lua": source, "notes/plugin.toml": "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n"]
    let recorder = try simulate(
        files, scenario: "0s   http PUT 127.0.0.1:8080/notes/* -> 204 in 1s\n0s   launch\n2s   background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(
        queueEvents(recorder) == [
            "taskBegan queue notes@2", "opStarted save-1@2", "opFinished save-1@3", "opStarted save-2@3",
            "opFinished save-2@4", "opStarted save-3@4", "opFinished save-3@5", "taskEnded@5", "suspended@5",
        ])
    let statuses = recorder.timeline.filter { $0.event == "httpResponse" }.map { $0["status"] }
    #expect(statuses == [.int(204), .int(204), .int(204)])
}

@Test func queue_uniqueDrop_anOperationUnwindingAfterACancel_doesNotBlockANewOneOfItsName() throws {
    let source = """
        local q = lifeline.queue('q', {maxConcurrent = 2})
        local old = q:add{name = 'r', run = function()
          pcall(lifeline.sleep, 100)
          lifeline.sleep(0.5)                 -- unwinds for a while after the cancel
          mark('old done at ' .. lifeline.now())
        end}
        lifeline.after(1, function()
          old:cancel()
          local new = q:add{name = 'r', unique = 'drop', run = function() mark('new ran at ' .. lifeline.now()) end}
          mark('new added: ' .. tostring(new ~= nil))
        end)
        """
    let recorder = try run(source)
    #expect(marks(recorder) == ["new added: true", "new ran at 1.0", "old done at 1.5"])
    #expect(!queueEvents(recorder).contains { $0.hasPrefix("opDropped") })
}
