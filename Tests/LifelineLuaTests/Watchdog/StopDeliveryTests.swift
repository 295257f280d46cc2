import CLua
import CLuaShims
import Foundation
import Synchronization
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 5 W4: the watchdog never touches a running lua_State from its own thread. It sets a flag
// and signals the thread that runs the state; that thread's signal handler, or the next call
// into the state, arms the hook. These tests drive a plugin's state directly, with no host.

/// A plugin's state with `source` run in it as plain Lua (no host: `lifeline.*` is not called).
private func bareState(_ source: String) throws -> LuaPlugin {
    let plugin = try LuaPlugin(name: "p", directory: "/nonexistent", memoryLimit: 64 << 20)
    let L = try #require(plugin.state)
    try #require(luaL_loadstring(L, source) == LUA_OK)
    try #require(lua_pcallk(L, 0, 0, 0, 0, nil) == LUA_OK)
    return plugin
}

/// A registry reference to the global function `name`.
private func ref(_ plugin: LuaPlugin, _ name: String) throws -> Int32 {
    let L = try #require(plugin.state)
    lua_getglobal(L, name)
    defer { lifeline_pop(L, 1) }
    return lifeline_ref_function(L, -1)
}

/// Asks `plugin` to stop from a thread of its own, as the watchdog does, and waits until it has.
private func preemptFromAnotherThread(_ plugin: LuaPlugin) {
    let preemptor = plugin.preemptor
    let done = DispatchSemaphore(value: 0)
    Thread {
        preemptor?.preempt()
        done.signal()
    }.start()
    done.wait()
}

@Test func stop_askedFromAnotherThreadBetweenCalls_leavesTheStateUntouched() throws {
    let plugin = try bareState("function spin() while true do end end")
    let L = try #require(plugin.state)
    let spin = try ref(plugin, "spin")
    // The watchdog's side while no call runs: only a flag is set.
    preemptFromAnotherThread(plugin)
    #expect(lua_gethook(L) == nil, "another thread installed a hook in the state")
    // The next call into the state arms the hook as it starts, and the loop is stopped.
    guard case .preempted(let traceback) = plugin.call(ref: spin, event: nil) else {
        Issue.record("the pending stop did not reach the next call")
        return
    }
    #expect(traceback.contains("stack traceback"), "traceback: \(traceback)")
    plugin.resetPreemption()
    #expect(lua_gethook(L) == nil)
    #expect(lua_gettop(L) == 0)
}

@Test func stop_signalOutsideAnyCall_doesNothing() throws {
    let plugin = try bareState("n = 0; function count() n = n + 1; return n end")
    let L = try #require(plugin.state)
    let signo = lifeline_stop_signal()
    try #require(signo != 0, "no real-time signal was free")
    // With no stop asked, then with one asked: this thread runs no Lua now, so the handler finds
    // no state to arm.
    #expect(pthread_kill(pthread_self(), signo) == 0)
    #expect(lua_gethook(L) == nil)
    preemptFromAnotherThread(plugin)
    #expect(pthread_kill(pthread_self(), signo) == 0)
    #expect(lua_gethook(L) == nil)
    plugin.resetPreemption()
    // The state works as before.
    #expect(plugin.call(ref: try ref(plugin, "count"), event: nil) == .returned)
    #expect(lua_gettop(L) == 0)
}

@Test func stop_landingInsideALongCCall_stopsTheCodeWhenItReturnsToLua() throws {
    // string.find with this pattern backtracks for a long time inside one C function, where no
    // hook can run. The signal lands there; the hook it arms must still be set when the C call
    // returns, so the very next Lua instruction stops, and `reached` stays false.
    let plugin = try bareState("""
        reached = false
        function slow()
          local found = string.find(string.rep('a', N), string.rep('.-', 6) .. 'b')
          reached = true
        end
        """)
    let L = try #require(plugin.state)
    let slow = try ref(plugin, "slow")
    // The length at which the C call takes at least 0.2 s on this machine.
    var n = 16, seconds = 0.0
    while seconds < 0.2 && n < 200 {
        n += 2
        lua_pushinteger(L, lua_Integer(n))
        lua_setglobal(L, "N")
        let t0 = Monotonic.nanoseconds()
        #expect(plugin.call(ref: slow, event: nil) == .returned)
        seconds = Double(Monotonic.nanoseconds() - t0) / 1e9
    }
    lua_pushboolean(L, 0)
    lua_setglobal(L, "reached")
    let gaveUp = Atomic<Bool>(false)
    let dog = Watchdog(stopGrace: 60) { _ in gaveUp.store(true, ordering: .relaxed) }
    defer { dog.shutdown() }
    // The deadline falls a quarter of the way into the C call.
    let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: plugin.preemptor))
    dog.open(deadline: Monotonic.nanoseconds() + UInt64(seconds / 4 * 1e9), handler: "test", limit: 0, time: .zero)
    dog.enter(slot)
    let outcome = plugin.call(ref: slow, event: nil)
    let fired = dog.leave()
    plugin.resetPreemption()
    #expect(fired)
    guard case .preempted(let traceback) = outcome else {
        Issue.record("not stopped: \(outcome)")
        return
    }
    // Line 4 is the first Lua after the C call on line 3.
    #expect(traceback.contains("]:4:"), "traceback: \(traceback)")
    lua_getglobal(L, "reached")
    #expect(lua_toboolean(L, -1) == 0, "Lua code after the C call ran")
    lifeline_pop(L, 1)
    let unstoppable = gaveUp.load(ordering: .relaxed)
    #expect(!unstoppable)
}

/// Lua that exercises what a stop can interrupt: calls and returns (the CallInfo list grows and
/// shrinks), coroutines made, resumed and collected, pcall, errors, string and table building,
/// garbage collection steps, and calls that leave the VM for C (lua-cjson) and for Swift
/// (lifeline.now and the others that need no running app).
private let stressSource = """
    local function rec(d) if d == 0 then return 0 end return 1 + rec(d - 1) end
    function work(n)
      local total = 0
      for i = 1, n do
        total = total + rec(i % 40)
        local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
        total = total + co(i) + co(i)
        local ok, s = pcall(function() if i % 7 == 0 then error('x') end return string.rep('ab', i % 64) end)
        if ok then total = total + #s end
        local t = {}
        for j = 1, i % 20 do t[j] = j end
        total = total + #table.concat(t, ',')
        if i % 16 == 0 then collectgarbage('step') end
        total = total + lifeline.now() + #lifeline.state()
        if lifeline.backgroundTimeRemaining() < 0 then total = total + 1 end
        local js = lifeline.json.encode({i, 'x', {a = i}})
        total = total + #js + #lifeline.json.decode(js)
      end
      return total
    end
    function once() return work(math.random(1, 60)) end
    """

@Test func stop_manyShortCallsWithATinyLimit_stopsLandAnywhereAndTheStateStaysSound() throws {
    let plugin = try bareState(stressSource)
    let L = try #require(plugin.state)
    let once = try ref(plugin, "once")
    let gaveUp = Atomic<Int>(0)
    let dog = Watchdog(stopGrace: 30) { _ in gaveUp.add(1, ordering: .relaxed) }
    defer { dog.shutdown() }
    let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: plugin.preemptor))

    // How long a call takes here, unguarded, so that deadlines fall inside the calls.
    var total: UInt64 = 0
    for _ in 0..<50 {
        let t0 = Monotonic.nanoseconds()
        #expect(plugin.call(ref: once, event: nil) == .returned)
        total += Monotonic.nanoseconds() - t0
    }
    let mean = max(total / 50, 1_000)

    var returned = 0, stopped = 0, late = 0
    var generator = SystemRandomNumberGenerator()
    let calls = 3000
    for _ in 0..<calls {
        // Anywhere from before the call starts to well after a typical call has ended.
        let deadline = Monotonic.nanoseconds() + UInt64.random(in: 0...(2 * mean), using: &generator)
        dog.open(deadline: deadline, handler: "stress", limit: 0, time: .zero)
        dog.enter(slot)
        let outcome = plugin.call(ref: once, event: nil)
        let fired = dog.leave()
        plugin.resetPreemption()
        switch outcome {
        case .returned:
            if fired { late += 1 } else { returned += 1 }
        case .preempted(let traceback):
            stopped += 1
            #expect(fired, "stopped without the watchdog firing")
            #expect(traceback.contains("stack traceback"), "traceback: \(traceback)")
        case .raised(let message, _):
            Issue.record("raised: \(message)")
        }
        #expect(lua_gettop(L) == 0)
        #expect(lua_gethook(L) == nil, "a hook outlived its call")
    }
    let unstoppable = gaveUp.load(ordering: .relaxed)
    #expect(unstoppable == 0, "a stop never landed")
    #expect(stopped > calls / 20, "only \(stopped) of \(calls) calls were stopped")
    #expect(returned > calls / 20, "only \(returned) of \(calls) calls ran to the end")
    // The state is whole: an unguarded call gives the same answer as a fresh state would.
    lua_getglobal(L, "work")
    lua_pushinteger(L, 100)
    #expect(lua_pcallk(L, 1, 1, 0, 0, nil) == LUA_OK)
    let fresh = try bareState(stressSource)
    let F = try #require(fresh.state)
    lua_getglobal(F, "work")
    lua_pushinteger(F, 100)
    #expect(lua_pcallk(F, 1, 1, 0, 0, nil) == LUA_OK)
    #expect(lua_tointegerx(L, -1, nil) == lua_tointegerx(F, -1, nil))
    lifeline_pop(L, 1)
    lifeline_pop(F, 1)
    print("stop stress: \(calls) calls, mean \(mean / 1000) µs: \(stopped) stopped, \(returned) returned, \(late) returned late")
}
