import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// A plain event (name, time and state) reaches a plugin's handlers in one table per event name,
// refilled for each call, so that a handler call allocates nothing (docs/lua-api.md). What a
// handler may still rely on: each call sees the event as it is now, never what an earlier handler
// wrote; a field it adds, or a metatable it sets, makes the table its own.

@Test func eventTable_ofTheSameKind_isOneTable_refilledForEachEvent() throws {
    let source = """
        local kept
        lifeline.on("didReceiveMemoryWarning", function(e)
          if kept then mark(tostring(rawequal(kept, e)) .. "|" .. string.format("%g", kept.time)) end
          kept = e
        end)
        """
    // The table kept from the first warning shows the second one's time: documented, not a copy.
    #expect(try marksOf(source, scenario: "0s launch\n1s memory-warning\n2.5s memory-warning") == ["true|2.5"])
}

@Test func eventTable_ofAnotherKind_isAnotherTable() throws {
    let source = """
        local seen
        lifeline.on("willResignActive", function(e) seen = e end)
        lifeline.on("didEnterBackground", function(e) mark(tostring(rawequal(seen, e)) .. "|" .. seen.name) end)
        """
    #expect(try marksOf(source, scenario: "0s launch\n1s background") == ["false|willResignActive"])
}

@Test func eventTable_aFieldAHandlerAdds_isNeverSeenByALaterCall() throws {
    let source = """
        local kept
        lifeline.on("didReceiveMemoryWarning", function(e)
          mark("extra=" .. tostring(e.extra) .. "|" .. string.format("%g", e.time))
          if not kept then e.extra = "mine"; kept = e end
          mark("kept=" .. tostring(kept.extra) .. "|" .. string.format("%g", kept.time))
        end)
        lifeline.on("didReceiveMemoryWarning", function(e) mark("next=" .. tostring(e.extra)) end)
        """
    // The table the first handler changed stays its own (its time is not refilled); every later
    // call gets a table with no `extra`.
    #expect(
        try marksOf(source, scenario: "0s launch\n1s memory-warning\n2s memory-warning") == [
            "extra=nil|1", "kept=mine|1", "next=nil",
            "extra=nil|2", "kept=mine|1", "next=nil",
        ])
}

@Test func eventTable_aFieldSetWithRawsetOrRemoved_isRefilled() throws {
    let source = """
        lifeline.on("didReceiveMemoryWarning", function(e)
          mark(e.name .. "|" .. tostring(e.state) .. "|" .. string.format("%g", e.time))
          e.name = "changed"; e.state = nil; e.time = nil
        end)
        """
    #expect(
        try marksOf(source, scenario: "0s launch\n1s memory-warning\n2s memory-warning") == [
            "didReceiveMemoryWarning|active|1", "didReceiveMemoryWarning|active|2",
        ])
}

@Test func eventTable_aMetatableAHandlerSets_staysOnItsTable_andTheNextEventGetsAPlainOne() throws {
    let source = """
        local kept
        lifeline.on("didReceiveMemoryWarning", function(e)
          mark("foo=" .. tostring(e.foo))
          if not kept then
            kept = setmetatable(e, {__index = function() return "from the handler's metatable" end})
          end
        end)
        lifeline.on("didEnterBackground", function() mark("kept.foo=" .. tostring(kept.foo)) end)
        """
    #expect(
        try marksOf(source, scenario: "0s launch\n1s memory-warning\n2s memory-warning\n3s background") == [
            "foo=nil", "foo=nil", "kept.foo=from the handler's metatable",
        ])
}

@Test func eventTable_pairsShowsTheThreeFields_asBefore() throws {
    let source = """
        lifeline.on("didReceiveMemoryWarning", function(e)
          local keys = {}
          for k in pairs(e) do keys[#keys + 1] = k end
          table.sort(keys)
          mark(table.concat(keys, ","))
        end)
        """
    #expect(
        try marksOf(source, scenario: "0s launch\n1s memory-warning\n2s memory-warning") == [
            "name,state,time", "name,state,time",
        ])
}

@Test func handlerCall_ofAPlainEvent_allocatesNothing_onceItsKindWasSeen() throws {
    let source = """
        local calls = 0
        lifeline.on('didReceiveMemoryWarning', function(e) if e.name then calls = calls + 1 end end)
        lifeline.on('didEnterBackground', function() mark(calls) end)
        """
    try withPluginFolder(plugins(["p": source])) { dir in
        let executor = MainExecutor(clock: VirtualClock())
        let host = LifelineHost(
            configuration: HostConfiguration(), plugins: try LuaPluginLoader.descriptors(in: dir), executor: executor)
        defer { host.shutdown() }
        try host.perform(.launch)
        executor.run(shouldStop: { false }, afterJob: host.afterJob)
        let plugin = try #require(host.pluginCodes.first?.code as? LuaPlugin)
        try host.perform(.memoryWarning)  // the first of its kind makes the table
        let before = plugin.allocationCount
        for _ in 0..<1000 { try host.perform(.memoryWarning) }
        #expect(plugin.allocationCount - before == 0)
        // The handler did run each time.
        try host.perform(.background)
        executor.run(shouldStop: { false }, afterJob: host.afterJob)
        #expect(marks(host.recorder) == ["1001"])
        #expect(host.recorder.pluginErrorCount == 0)
    }
}
