import CLua
import CLuaShims
import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 6.4: everything the host does to a plugin's state happens inside a protected call and
// leaves the main state's stack as it found it: empty between calls, whether the code returned,
// raised, ran out of memory or was stopped.

private let handlers = """
    lifeline.on("didBecomeActive", function(e) local t = {e.name, e.time, e.state}; return t, 1, 2, 3 end)
    lifeline.on("willResignActive", function() error("boom") end)
    lifeline.on("didReceiveMemoryWarning", function()
      local t, i = {}, 0
      while true do i = i + 1; t[i] = string.rep("x", 1024) .. i end
    end)
    lifeline.on("didEnterBackground", function() lifeline.after("bad", nil) end)
    lifeline.on("willEnterForeground", function() local function f() return 1 + f() end; f() end)
    """

/// Launches a host with plugin "p" running `source`, and calls `body` with the host and the
/// plugin's main state.
private func withLaunchedPlugin(
    _ source: String, memoryLimit: Int = PluginManifest.defaultMemoryLimit, _ body: (LifelineHost, LuaPlugin, OpaquePointer) throws -> Void
) throws {
    try withPluginFolder(["p/init.lua": source]) { dir in
        let box = PluginBox()
        let host = makeHost([capturingDescriptor(name: "p", directory: dir + "/p", memoryLimit: memoryLimit, box: box)])
        defer { host.shutdown() }
        try host.perform(.launch)
        #expect(host.loadError == nil)
        let plugin = try #require(box.plugin)
        let L = try #require(plugin.state)
        try body(host, plugin, L)
    }
}

@Test func stack_isEmptyAfterLoading() throws {
    try withLaunchedPlugin(handlers) { _, _, L in
        // launch ran init.lua and the didBecomeActive handler.
        #expect(lua_gettop(L) == 0)
    }
}

@Test func stack_isEmptyAfterASuccessfulHandler() throws {
    try withLaunchedPlugin(handlers) { host, _, L in
        try host.perform(.resign)
        try host.perform(.activate)  // didBecomeActive returns four values; none may stay behind
        #expect(lua_gettop(L) == 0)
        #expect(pluginErrors(host.recorder).count == 1)  // the resign handler's
    }
}

@Test func stack_isEmptyAfterAFailingHandler() throws {
    try withLaunchedPlugin(handlers) { host, _, L in
        try host.perform(.resign)
        #expect(lua_gettop(L) == 0)
        #expect(pluginErrors(host.recorder).map(\.message).first?.contains("boom") == true)
    }
}

@Test func stack_isEmptyAfterAMemoryError() throws {
    try withLaunchedPlugin(handlers) { host, _, L in
        try host.perform(.memoryWarning)
        #expect(lua_gettop(L) == 0)
        #expect(pluginErrors(host.recorder).first?.message.contains("memory") == true)
    }
}

@Test func stack_isEmptyAfterABridgedFunctionRaises() throws {
    try withLaunchedPlugin(handlers) { host, _, L in
        try host.perform(.background)
        #expect(lua_gettop(L) == 0)
        #expect(pluginErrors(host.recorder).last?.message.contains("bad argument #1 to 'lifeline.after'") == true)
    }
}

@Test func stack_isEmptyAfterUnboundedRecursion() throws {
    try withLaunchedPlugin(handlers) { host, _, L in
        try host.perform(.background)
        try host.perform(.foreground)
        #expect(lua_gettop(L) == 0)
        #expect(pluginErrors(host.recorder).count == 3)  // resign, background, foreground
    }
}

@Test func stack_isEmptyAfterTimerAndExpirationCallbacks() throws {
    let source = """
        lifeline.after(1, function() return 1, 2 end)
        lifeline.after(2, function() error("timer fails") end)
        lifeline.on("didEnterBackground", function()
          local id
          id = lifeline.beginBackgroundTask("t", function() lifeline.endBackgroundTask(id); return "x" end)
        end)
        """
    try withLaunchedPlugin(source) { host, _, L in
        host.executor.run(until: .seconds(5), shouldStop: { false }, afterJob: host.afterJob)
        #expect(lua_gettop(L) == 0)
        try host.perform(.background)
        host.executor.run(until: .seconds(60), shouldStop: { false }, afterJob: host.afterJob)
        #expect(lua_gettop(L) == 0)
        #expect(host.recorder.timeline.contains { $0.event == "taskEnded" && $0["expired"] == .bool(true) })
        #expect(pluginErrors(host.recorder).count == 1)
    }
}

// MARK: - Calls made directly on a LuaPlugin

/// A LuaPlugin on `source` (not started), with a registry reference to the function `source` returns.
private func withDirectFunction(_ source: String, _ body: (LuaPlugin, OpaquePointer, Int32) throws -> Void) throws {
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 4 << 20)
        defer { plugin.close() }
        let L = try #require(plugin.state)
        #expect(luaL_loadstring(L, source) == LUA_OK)
        lua_callk(L, 0, 1, 0, nil)  // stack: fn
        let ref = luaL_ref(L, lifeline_registryindex())  // stack: (empty)
        #expect(lua_gettop(L) == 0)
        try body(plugin, L, ref)
    }
}

@Test func stack_directCallWithAnEvent_passesTheTableAndLeavesNothing() throws {
    try withDirectFunction("return function(e) assert(e.name == 'willTerminate' and e.time == 7.5 and e.state == 'active') end") {
        plugin, L, ref in
        let outcome = plugin.call(ref: ref, event: LifecycleEvent(name: .willTerminate, time: 7.5, state: .active))
        #expect(outcome == .returned)
        #expect(lua_gettop(L) == 0)
    }
}

@Test func stack_directCallThatRaises_splitsMessageAndTraceback() throws {
    try withDirectFunction("return function() error('direct failure') end") { plugin, L, ref in
        let outcome = plugin.call(ref: ref, event: nil)
        guard case .raised(let message, let traceback) = outcome else {
            Issue.record("expected .raised, got \(outcome)")
            return
        }
        #expect(message.contains("direct failure"))
        #expect(!message.contains("stack traceback"))
        #expect(traceback.hasPrefix("stack traceback:"))
        #expect(lua_gettop(L) == 0)
    }
}

@Test func stack_directCallPreempted_isReportedAsPreemptedAndLeavesNothing() throws {
    try withDirectFunction("return function() while true do end end") { plugin, L, ref in
        // A stop requested before the call hits at its first instruction: deterministic, no timing.
        plugin.preemptor?.preempt()
        let outcome = plugin.call(ref: ref, event: nil)
        guard case .preempted(let traceback) = outcome else {
            Issue.record("expected .preempted, got \(outcome)")
            return
        }
        #expect(!traceback.isEmpty)
        #expect(lua_gettop(L) == 0)
    }
}

@Test func stack_afterResetPreemption_theStateRunsAgain() throws {
    try withDirectFunction("return function() local n = 0; for i = 1, 1000 do n = n + i end end") { plugin, L, ref in
        plugin.preemptor?.preempt()
        guard case .preempted = plugin.call(ref: ref, event: nil) else {
            Issue.record("expected .preempted")
            return
        }
        plugin.resetPreemption()
        #expect(plugin.call(ref: ref, event: nil) == .returned)
        #expect(lua_gettop(L) == 0)
    }
}

@Test func stack_directCallPreemptedInsidePcall_isStillPreempted() throws {
    try withDirectFunction("return function() pcall(function() while true do end end); return 'swallowed' end") {
        plugin, L, ref in
        plugin.preemptor?.preempt()
        guard case .preempted = plugin.call(ref: ref, event: nil) else {
            Issue.record("expected .preempted")
            return
        }
        #expect(lua_gettop(L) == 0)
    }
}
