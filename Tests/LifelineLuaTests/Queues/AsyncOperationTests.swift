import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// An operation is asynchronous when it says so (`async = true`), not because its run function
// happens to take a parameter. The old form still works, and warns once per plugin with the fix.

/// "opFinished NAME@SECONDS [result]" for each finished operation.
private func finishes(_ recorder: Recorder) -> [String] {
    recorder.timeline.compactMap { e in
        guard e.event == "opFinished" else { return nil }
        var line = "\(e["name"]?.stringValue ?? "?")@\(ReportNumber.seconds(e.time))"
        if let result = e["result"]?.stringValue, result != "finished" { line += " " + result }
        return line
    }
}

/// The plugin's warning lines.
private func warnings(_ recorder: Recorder) -> [String] {
    recorder.timeline.compactMap { e in
        guard e.event == "log", e["level"]?.stringValue == "warning" else { return nil }
        return e["message"]?.stringValue
    }
}

@Test func asyncTrue_runWithoutAParameter_finishesOnlyWithFinish() throws {
    let source = """
        local q = lifeline.queue('q')
        local op
        op = q:add{name = 'later', async = true, run = function()
          lifeline.after(3, function() op:finish() end)
        end}
        q:add{name = 'next', run = function() end}
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(finishes(recorder) == ["later@3", "next@3"])
    #expect(warnings(recorder).isEmpty)
}

@Test func asyncFalse_runTakingOp_finishesWhenItReturns_andGetsTheOperation() throws {
    let source = """
        local q = lifeline.queue('q')
        local handle
        handle = q:add{name = 'sync', async = false, run = function(op)
          lifeline.sleep(1)
          mark('same:' .. tostring(op == handle) .. ',' .. op.name)
        end}
        q:add{name = 'next', run = function() end}
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["same:true,sync"])
    // It finished when run returned, at 1 s: not at its 10 s timeout.
    #expect(finishes(recorder) == ["sync@1", "next@1"])
    #expect(warnings(recorder).isEmpty)
}

@Test func oldForm_runTakingAParameter_staysAsynchronous_andWarnsOncePerPlugin() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'first', run = function(op)
          lifeline.after(2, function() op:finish() end)
        end}
        q:add{name = 'second', run = function(op) op:finish() end}
        q:add(function(op) op:finish() end)
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(finishes(recorder) == ["first@2", "second@2", "?@2"])
    let said = warnings(recorder)
    #expect(said.count == 1, "\(said)")
    // Where the function is, which operation, why, and the fix.
    #expect(
        said.first?.hasSuffix(
            "/p/init.lua:2: operation 'first': run takes a parameter, so it is treated as asynchronous: it "
                + "finishes only when op:finish() is called or its timeout passes, not when run returns; "
                + "say async = true (or async = false) in q:add{…}") == true, "\(said)")
    let warning = recorder.timeline.first { $0.event == "log" && $0["level"]?.stringValue == "warning" }
    #expect(warning?["plugin"]?.stringValue == "p")
}

@Test func oldForm_eachPluginIsWarned_andABareFunctionGetsItsOwnFix() throws {
    let files = plugins([
        "a": "lifeline.queue('a'):add(function(op) op:finish() end)",
        "b": "lifeline.queue('b'):addSequential({{name = 'x', run = function(...) end, timeout = 1}})",
    ])
    let recorder = try simulate(files)
    let lines = recorder.timeline.filter { $0.event == "log" && $0["level"]?.stringValue == "warning" }
    #expect(lines.map { $0["plugin"]?.stringValue ?? "" } == ["a", "b"])
    #expect(
        lines.first?["message"]?.stringValue?.hasSuffix(
            "/a/init.lua:1: an operation: run takes a parameter, so it is treated as asynchronous: it finishes only when "
                + "op:finish() is called or its timeout passes, not when run returns; "
                + "add it as q:add{run = fn, async = true} (or async = false)") == true)
    // b's vararg run is asynchronous too: it ends at its timeout.
    #expect(finishes(recorder).contains("x@1 timedOut"))
}

@Test func explicitAsync_neverWarns_evenWithAParameter() throws {
    let source = """
        local q = lifeline.queue('q')
        q:add{name = 'a', async = true, run = function(op) op:finish() end}
        q:addSequential({{name = 'b', async = false, run = function(op) end}})
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(warnings(recorder).isEmpty)
    #expect(finishes(recorder) == ["a@0", "b@0"])
}

@Test func asyncThatIsNotABoolean_isRefused() throws {
    let source = """
        local ok, err = pcall(function() lifeline.queue('q'):add{async = 'yes', run = function() end} end)
        mark(tostring(ok) .. ':' .. tostring(err))
        """
    let got = try marksOf(source)
    #expect(got.count == 1)
    #expect(got.first?.contains("false:") == true)
    #expect(got.first?.contains("bad argument #1 to 'add' (field 'async' must be a boolean)") == true, "\(got)")
}
