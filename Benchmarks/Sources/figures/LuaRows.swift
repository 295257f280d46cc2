// The rows that run Lua: dispatch.lua, task.lua, background.lua, watchdog.overhead,
// watchdog.latency, plugins.memory, simulate.long.
import BenchBaselines
import CLuaShims
import Foundation
import Lifeline
import LifelineLua

// MARK: dispatch.lua

let handlerSource = "function(e) local n = e.name end"

/// ns per handler call: one memory warning delivered to `plugins` plugins, each with one handler.
func hostDispatch(plugins count: Int, events: Int) -> Double {
    let (bench, dir) = dispatchHost(plugins: count)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let ns = dispatchPerHandler(bench, plugins: count, handlers: events * count)
    bench.checkClean()
    return ns
}

/// A host with `count` plugins, each with `handlerSource` for memory warnings, and their folder.
func dispatchHost(plugins count: Int) -> (BenchHost, String) {
    var sources: [String: String] = [:]
    for i in 0..<count { sources["p\(i)"] = "lifeline.on('didReceiveMemoryWarning', \(handlerSource))" }
    let dir = tempPlugins(sources)
    return (BenchHost(lua: dir), dir)
}

/// ns per handler call for memory warnings reaching every plugin of `bench`, about `handlers`
/// handler calls in all.
func dispatchPerHandler(_ bench: BenchHost, plugins: Int, handlers: Int) -> Double {
    let events = max(1, handlers / plugins)
    return nanoseconds(per: events * plugins) { for _ in 0..<events { try! bench.host.perform(.memoryWarning) } }
}

/// ns per handler call: a C loop over `states` lua_States, each lua_pcall-ing the same handler
/// with an event table like the host's.
func bareDispatch(states count: Int, rounds: Int) -> Double {
    let states = bench_states_new(Int32(count), "return " + handlerSource)!
    defer { bench_states_free(states) }
    var failed = 0
    let ns = nanoseconds(per: rounds * count) { failed = bench_states_dispatch(states, rounds) }
    precondition(failed == 0)
    return ns
}

/// Blocks the plugins' Lua states allocate per handler call once warm: 100 memory warnings to
/// 100 plugins, after a first one.
func dispatchAllocations() -> Double {
    let (bench, dir) = dispatchHost(plugins: 100)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    func allocations() -> Int { bench.host.pluginCodes.reduce(0) { $0 + (($1.code as? LuaPlugin)?.allocationCount ?? 0) } }
    bench.perform(.memoryWarning)
    let before = allocations()
    _ = dispatchPerHandler(bench, plugins: 100, handlers: 10_000)
    bench.checkClean()
    return Double(allocations() - before) / 10_000
}

func dispatchRow() -> Row {
    _ = hostDispatch(plugins: 100, events: 200)  // warm up
    let m = interleaved(rounds: 9, [
        { hostDispatch(plugins: 100, events: 2_000) }, { bareDispatch(states: 100, rounds: 2_000) },
    ])
    var row = Row(
        name: "dispatch.lua", unit: "ns/handler", value: m[0], baseline: ("C loop, 100 lua_States, lua_pcall", m[1]),
        target: "≤ 1.5", met: m[0] / m[1] <= 1.5)
    row.notes.append(("Lua allocations per handler call", formatted(dispatchAllocations())))
    return row
}

// MARK: task.lua

let taskLuaBody = "lifeline.endBackgroundTask(lifeline.beginBackgroundTask('x'))"

/// ns per `body`, run `calls` times in each of `events` memory-warning handlers of one plugin. The
/// report keeps every event, and each counts against the plugin's memory cap: the default 32 MiB is
/// reached after about 87,000 task events, well before the 200,000 of one task.lua round, so the
/// plugin gets a larger cap.
func luaHandlerLoop(_ body: String, prelude: String = "", calls: Int, events: Int) -> Double {
    let dir = tempPlugins(["p": """
        \(prelude)
        lifeline.on('didReceiveMemoryWarning', function()
          for i = 1, \(calls) do \(body) end
        end)
        """], manifest: "[limits]\nmemory = \"256MiB\"\n")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let bench = BenchHost(lua: dir)
    let ns = nanoseconds(per: calls * events) {
        for _ in 0..<events { bench.perform(.memoryWarning) }
    }
    bench.checkClean()
    return ns
}

/// ns per `body`, run `calls` times in a loop in a plain lua_State whose global `bench.empty` is an
/// empty C function.
func plainLuaLoop(_ body: String, prelude: String = "", calls: Int) -> Double {
    var error = [CChar](repeating: 0, count: 256)
    var status: Int32 = 0
    let ns = nanoseconds(per: calls) {
        status = bench_run_plain("\(prelude)\nfor i = 1, \(calls) do \(body) end", &error, 256)
    }
    precondition(status == 0, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    return ns
}

func taskLuaRow() -> Row {
    let m = interleaved(rounds: 9, [
        { luaHandlerLoop(taskLuaBody, calls: 10_000, events: 10) },
        { plainLuaLoop("bench.empty(bench.empty('x'))", calls: 1_000_000) },
    ])
    return Row(
        name: "task.lua", unit: "ns/op", value: m[0], baseline: ("two calls to an empty C function", m[1]),
        target: "≤ 4", met: m[0] / m[1] <= 4)
}

// MARK: background.lua

func backgroundLua(calls: Int, events: Int) -> Double {
    luaHandlerLoop("lifeline.background(nil, f)", prelude: "local function f(task) end", calls: calls, events: events)
}

func backgroundRow() -> Row {
    let m = interleaved(rounds: 9, [
        { backgroundLua(calls: 500, events: 100) },
        { plainLuaLoop("coroutine.wrap(f)()", prelude: "local function f() end", calls: 200_000) },
    ])
    return Row(
        name: "background.lua", unit: "ns/op", value: m[0], baseline: ("coroutine.wrap(f)() in plain Lua", m[1]),
        target: "≤ 4", met: m[0] / m[1] <= 4)
}

// MARK: watchdog.overhead

let fibSource = "local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end"

/// ms per fib(27) handler run by the host, with the watchdog armed around it.
func fibUnderWatchdog(events: Int) -> Double {
    let dir = tempPlugins(["fib": "\(fibSource)\nlifeline.on('didReceiveMemoryWarning', function() fib(27) end)"])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    // The memory warning's limit (10 s) is far beyond the handler's time: armed, never fired.
    let bench = BenchHost(lua: dir)
    let ns = nanoseconds(per: events) { for _ in 0..<events { bench.perform(.memoryWarning) } }
    bench.checkClean()
    return ns / 1e6
}

/// ms per fib(27) called by lua_pcall in a plugin's own kind of state (the sandbox and the
/// memory-capped allocator), with no host and no watchdog.
func fibBare(calls: Int) -> Double {
    let control = lifeline_control_new(64 << 20, nil)!
    defer { lifeline_control_free(control) }
    let L = lifeline_control_state(control)!
    precondition(lifeline_open_sandbox(L, "/nonexistent") == LUA_OK)
    precondition(luaL_loadstring(L, "\(fibSource)\nreturn function() fib(27) end") == LUA_OK)
    lua_callk(L, 0, 1, 0, nil)  // stack: handler
    let ns = nanoseconds(per: calls) {
        for _ in 0..<calls {
            lua_pushvalue(L, -1)
            precondition(lua_pcallk(L, 0, 0, 0, 0, nil) == LUA_OK)
        }
    }
    return ns / 1e6
}

func watchdogOverheadRow() -> Row {
    let m = interleaved(rounds: 11, [{ fibUnderWatchdog(events: 5) }, { fibBare(calls: 5) }])
    return Row(
        name: "watchdog.overhead", unit: "ms/handler", value: m[0], baseline: ("the same fib(27), no watchdog", m[1]),
        target: "≤ 1.02", met: m[0] / m[1] <= 1.02)
}

// MARK: watchdog.latency

/// ms past the deadline at which a `while true do end` handler was stopped, one per run.
func watchdogLateness(runs: Int) -> [Double] {
    let dir = tempPlugins(["spin": "lifeline.on('didEnterBackground', function() while true do end end)"])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var profile = Profile.ios13
    profile.backgroundLimit = 0.02
    let descriptors = try! LuaPluginLoader.descriptors(in: dir)
    return (0..<runs).map { _ in
        let bench = BenchHost(descriptors, configuration: HostConfiguration(profile: profile))
        try! bench.host.perform(.background)
        return bench.host.lastOverrunLateness ?? .nan
    }
}

func watchdogLatencyRow() -> Row {
    let late = watchdogLateness(runs: 200)
    let p99 = percentile(late, 0.99)
    return Row(
        name: "watchdog.latency", unit: "ms (p99)", value: p99, baseline: nil, target: "≤ 1 ms", met: p99 <= 1,
        others: [("p50", median(late)), ("max", late.max()!)])
}

// MARK: simulate.long

/// The plugin simulate.long loads 1,000 times: in each background, 10 tasks one after another,
/// each ended by a timer a second after it began (the app may hold 1,000 tasks at once, T8).
let longPlugin = """
    local function step(i)
      if i > 10 then return end
      local id = lifeline.beginBackgroundTask('sync' .. i)
      lifeline.after(1, function() lifeline.endBackgroundTask(id); step(i + 1) end)
    end
    lifeline.on('didEnterBackground', function() step(1) end)
    """

func longScenario(cycles: Int) -> Scenario {
    var lines = ["0s launch"]
    for cycle in 0..<cycles {
        lines.append("\(cycle * 60 + 10)s background")
        lines.append("\(cycle * 60 + 40)s foreground")
    }
    lines.append("\(cycles * 60 + 10)s terminate")
    return try! Scenario.parse(lines.joined(separator: "\n"), fileName: "long.scenario")
}

/// Simulates `scenario` with the plugins of `dir`, as `lifeline simulate` does; the events recorded.
func simulateLong(_ dir: String, scenario: Scenario) -> Int {
    let descriptors = try! LuaPluginLoader.descriptors(in: dir)
    let recorder = try! Simulation.run(scenario: scenario, plugins: descriptors, configuration: HostConfiguration())
    if recorder.pluginErrorCount != 0 || recorder.termination != nil {
        fatalError("simulate.long: \(recorder.pluginErrorCount) errors, \(String(describing: recorder.termination))")
    }
    return recorder.eventCount
}

/// The plugin code of simulate.long run in one plain lua_State, `cycles` times: its
/// `lifeline` is a global table of empty C functions, except `after`, which keeps the function to
/// call next, and the loop calls it as the timer would. What is left between this and the
/// host's run is the host's share.
func longPluginInPlainLua(cycles: Int) -> Double {
    let prelude = """
        lifeline = {beginBackgroundTask = bench.empty, endBackgroundTask = bench.empty, after = bench.keep}
        local function step(i)
          if i > 10 then return end
          local id = lifeline.beginBackgroundTask('sync' .. i)
          lifeline.after(1, function() lifeline.endBackgroundTask(id); step(i + 1) end)
        end
        """
    return plainLuaLoop("step(1); for _ = 1, 10 do bench.take()() end", prelude: prelude, calls: cycles)
}

/// simulate.long's count: the host's instructions per firing, the whole run's less the plugin
/// code's own in plain Lua, against a target of 4,000.
func judgeHostShare(_ row: inout Row, _ figures: InstructionFigures) {
    let host = figures.value - figures.baseline
    row.notes.append(("host instructions per firing (≤ 4,000)", formatted(host)))
    row.met = (row.met ?? false) && host <= 4000
}

func simulateLongRow() -> Row {
    let dir = tempPlugins(Dictionary(uniqueKeysWithValues: (0..<1000).map { ("p\($0)", longPlugin) }))
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let scenario = longScenario(cycles: 20)
    var events = 0
    let m = interleaved(rounds: 3, [
        {
            let start = Monotonic.nanoseconds()
            events = simulateLong(dir, scenario: scenario)
            return Double(Monotonic.nanoseconds() - start) / 1e9
        },
        {
            let start = Monotonic.nanoseconds()
            _ = BenchHost(lua: dir)
            return Double(Monotonic.nanoseconds() - start) / 1e9
        },
    ])
    precondition(events > 1000 * 10 * 20 * 2, "the scenario recorded only \(events) events")
    var row = Row(
        name: "simulate.long", unit: "s", value: m[0], baseline: ("loading the 1,000 plugins, no scenario", m[1]),
        target: "≤ 0.6 s", met: m[0] <= 0.6)
    row.instructionsMatchTimed = false
    return row
}

// MARK: plugins.memory

/// The minimal plugin: one handler.
let minimalPlugin = "lifeline.on('didEnterBackground', function(e) end)"

/// Run in a child process (`figures probe-memory lifeline|bare N`), so each figure starts from a
/// fresh heap: bytes resident per plugin, for N plugins loaded by a host or N bare lua_States.
func probeMemory(kind: String, count: Int) -> Double {
    if kind == "lifeline" {
        let dir = pluginFolder(count: count)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let descriptors = try! LuaPluginLoader.descriptors(in: dir)
        let empty = BenchHost([])  // the host's own share, which is not the plugins'
        let before = bench_resident_bytes()
        let bench = BenchHost(descriptors)
        let after = bench_resident_bytes()
        precondition(bench.host.recorder.pluginErrorCount == 0)
        withExtendedLifetime(empty) {}
        return Double(after - before) / Double(count)
    }
    let before = bench_resident_bytes()
    let states = bench_plain_states_new(Int32(count), "local f = function(e) end")!
    let after = bench_resident_bytes()
    bench_plain_states_free(states)
    return Double(after - before) / Double(count)
}

func childMemoryProbe(_ kind: String, count: Int) -> Double {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["probe-memory", kind, String(count)]
    let out = Pipe()
    child.standardOutput = out
    try! child.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    child.waitUntilExit()
    precondition(child.terminationStatus == 0, "the memory probe failed")
    return Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))!
}

func pluginsMemoryRow() -> Row {
    let m = interleaved(rounds: 5, [{ childMemoryProbe("lifeline", count: 1000) }, { childMemoryProbe("bare", count: 1000) }])
    let kib = m[0] / 1024
    return Row(
        name: "plugins.memory", unit: "KiB/plugin", value: kib, baseline: ("a bare lua_State with the standard libraries", m[1] / 1024),
        target: "≤ 64 KiB", met: kib <= 64)
}
