import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 5 W2: runaway Lua code is stopped inside the VM, whatever it does to resist, and the app
// is terminated with kind watchdog and code 0x8badf00d, with the Lua traceback in the report.
//
// The limits are lowered to a quarter of a second (W5: in simulate the watchdog measures real
// running time), so each test takes about that long, with room for a busy machine. The launch limit stays at its default,
// so loading the plugin never trips the watchdog on a busy machine.

/// A profile whose didEnterBackground, other transition, timer and expiration handler limits are 250 ms.
private let fast = profile(background: 0.25, transition: 0.25, expiration: 0.25)

/// Runs plugin "p" with `handler` as its didEnterBackground handler's body and returns the recorder.
private func runaway(_ handler: String, others: [String: String] = [:]) throws -> Recorder {
    var sources = others
    sources["p"] = "lifeline.on('didEnterBackground', function()\n\(handler)\nend)"
    return try simulate(plugins(sources), scenario: "0s launch\n1s background\n2s foreground", profile: fast)
}

/// What every preemption must give: a watchdog termination of plugin p, with a Lua traceback.
private func expectPreempted(_ recorder: Recorder, sourceLocation: SourceLocation = #_sourceLocation) {
    let termination = recorder.termination
    #expect(termination?.kind == .watchdog, sourceLocation: sourceLocation)
    #expect(termination?.kind.code == "0x8badf00d", sourceLocation: sourceLocation)
    #expect(termination?.plugin == "p", sourceLocation: sourceLocation)
    // A traceback means the host stopped the code (W2), rather than noticing an overrun after the
    // code returned on its own.
    #expect(termination?.traceback?.contains("init.lua") == true, "traceback: \(termination?.traceback ?? "nil")",
        sourceLocation: sourceLocation)
    #expect(recorder.exitCode == 1, sourceLocation: sourceLocation)
}

@Test func preemption_infiniteLoopInHandler_isStopped() throws {
    let recorder = try runaway("while true do end")
    expectPreempted(recorder)
    #expect(recorder.termination?.time == .seconds(1))
    #expect(recorder.termination?.reason.contains("p") == true)
}

@Test func preemption_infiniteLoop_reportHasTheTermination() throws {
    let recorder = try runaway("while true do end")
    let report = recorder.report()
    #expect(report["outcome"]?.stringValue == "terminated")
    #expect(report["termination"]?["kind"]?.stringValue == "watchdog")
    #expect(report["termination"]?["code"]?.stringValue == "0x8badf00d")
    #expect(report["termination"]?["traceback"]?.stringValue?.contains("init.lua") == true)
    let events = recorder.timeline.map(\.event)
    #expect(events.contains("watchdog"))
    #expect(events.last == "terminated")
}

@Test func preemption_endsTheSimulationThere() throws {
    // The 2 s foreground step never runs: the app was terminated at 1 s.
    let recorder = try runaway("while true do end")
    expectPreempted(recorder)
    #expect(recorder.timeline.contains { $0.event == "didEnterBackground" }, "the run got as far as the loop")
    #expect(!recorder.timeline.contains { $0.event == "willEnterForeground" })
}

@Test func preemption_tracebackPointsAtTheLoop() throws {
    let recorder = try runaway("local n = 0\nwhile true do n = n + 1 end")
    // The loop is on line 3 of init.lua (line 1 is lifeline.on, line 2 the local).
    #expect(recorder.termination?.traceback?.contains("init.lua:3") == true,
        "traceback: \(recorder.termination?.traceback ?? "nil")")
}

@Test func preemption_loopCallingFunctions_isStopped() throws {
    expectPreempted(try runaway("local function f(x) return x + 1 end\nlocal n = 0\nwhile true do n = f(n) end"))
}

@Test func preemption_pcall_cannotSwallowTheStop() throws {
    let recorder = try runaway("pcall(function() while true do end end)\nmark('swallowed')")
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
}

@Test func preemption_pcallInALoop_cannotSwallowTheStop() throws {
    let recorder = try runaway("while true do pcall(function() while true do end end) end")
    expectPreempted(recorder)
}

@Test func preemption_xpcallWithAHandlerThatReturns_cannotSwallowTheStop() throws {
    let recorder = try runaway(
        "xpcall(function() while true do end end, function(e) return 'handled' end)\nmark('swallowed')")
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
}

@Test func preemption_xpcallInALoop_cannotSwallowTheStop() throws {
    let recorder = try runaway("while true do xpcall(function() while true do end end, function(e) return e end) end")
    expectPreempted(recorder)
}

// The next tests run code that the watchdog must stop but might not reach. So that a failure is a
// failed test rather than a hung test run, their loops give up on their own after about 5 s of
// real time; the test then checks that the stop came long before that.

/// A loop that runs for 5 to 6 seconds of real time unless it is stopped.
private let boundedRunaway = "local t0 = os.time(); while os.time() - t0 < 6 do end"

/// Runs `body` and returns its result and the real seconds it took.
private func timed<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let clock = ContinuousClock()
    let start = clock.now
    let result = try body()
    let elapsed = clock.now - start
    return (result, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
}

@Test func preemption_errorHandlerThatLoops_isStopped() throws {
    // The message handler of xpcall is plugin code too, and must be stoppable like any other.
    let (recorder, seconds) = try timed {
        try runaway("xpcall(function() error('x') end, function(e) \(boundedRunaway) end)\nmark('swallowed')")
    }
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
    #expect(seconds < 3, "the loop in the error handler ran \(seconds) s: the watchdog did not stop it")
}

@Test func preemption_errorHandlerThatLoopsAfterTheStop_isStopped() throws {
    // The body is stopped; the stop's error then reaches the plugin's own message handler, which
    // loops. That handler must be stopped as well (or never run): it cannot hold the host.
    let (recorder, seconds) = try timed {
        try runaway("xpcall(function() while true do end end, function(e) \(boundedRunaway) end)\nmark('swallowed')")
    }
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
    #expect(seconds < 3, "the error handler ran \(seconds) s after the stop")
}

@Test func preemption_gcFinalizer_isRefusedAtSetmetatable() throws {
    // Lua runs __gc finalizers with hooks off, so the watchdog could never stop a loop in one, and
    // lua_close would run it after the app ended (T9). The sandbox refuses them instead.
    let (recorder, seconds) = try timed {
        try simulate(
            plugins(["p": "lifeline.on('didBecomeActive', function()\n"
                + "  setmetatable({}, {__gc = function() \(boundedRunaway) end})\nend)"]),
            scenario: "0s launch\n1s terminate", profile: fast)
    }
    let error = try #require(recorder.timeline.first { $0.event == "pluginError" })
    #expect(error["message"]?.serialized().contains("__gc metamethods are not available") == true)
    #expect(seconds < 3, "a finalizer ran for \(seconds) s")
}

@Test func preemption_setmetatableWithoutGc_stillWorks() throws {
    let recorder = try simulate(
        plugins(["p": "local t = setmetatable({}, {__index = function() return 'x' end})\nmark(t.anything)"]),
        scenario: "0s launch", profile: fast)
    #expect(marks(recorder) == ["x"])
}

@Test func preemption_loopInCoroutineWrap_isStopped() throws {
    let recorder = try runaway("coroutine.wrap(function() while true do end end)()\nmark('swallowed')")
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
}

@Test func preemption_loopInCoroutineResume_isStopped() throws {
    let recorder = try runaway(
        "local ok = coroutine.resume(coroutine.create(function() while true do end end))\nmark('swallowed')")
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
}

@Test func preemption_loopInNestedCoroutines_isStopped() throws {
    let recorder = try runaway("""
        coroutine.wrap(function()
          coroutine.resume(coroutine.create(function() while true do end end))
          mark('swallowed inner')
        end)()
        mark('swallowed')
        """)
    expectPreempted(recorder)
    #expect(marks(recorder).isEmpty)
}

@Test func preemption_coroutineThatYieldsForever_isStopped() throws {
    let recorder = try runaway("""
        local co = coroutine.wrap(function() while true do coroutine.yield() end end)
        while true do co() end
        """)
    expectPreempted(recorder)
}

@Test func preemption_otherPluginsEarlierInTheEvent_haveRun() throws {
    // "a" comes before "p" in name order, so it has handled the event before p runs away.
    let recorder = try runaway(
        "while true do end", others: ["a": "lifeline.on('didEnterBackground', function() mark('a ran') end)"])
    expectPreempted(recorder)
    #expect(marks(recorder) == ["a ran"])
}

@Test func preemption_loopInATimer_isStopped() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.after(1, function() while true do end end)"]), scenario: "0s launch", profile: fast)
    expectPreempted(recorder)
    #expect(recorder.termination?.reason.contains("timer") == true)
}

@Test func preemption_loopInAnExpirationHandler_isStopped() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.beginBackgroundTask('t', function() while true do end end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background", profile: fast)
    expectPreempted(recorder)
    #expect(recorder.termination?.time == .seconds(26))
}

@Test func preemption_withWatchdogScale_isStopped() throws {
    // ios13's 5 s didEnterBackground limit, scaled by 100: 50 ms of real time.
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didEnterBackground', function() while true do end end)"]),
        scenario: "0s launch\n1s background", watchdogScale: 100)
    expectPreempted(recorder)
}

@Test func preemption_runawayLoopWhileLoading_isALoadFailure() throws {
    let error = try #require(
        try simulationError(plugins(["p": "while true do end"]), profile: profile(launch: 0.05)))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("p"))
    #expect(error.message.contains("launch limit"), "message: \(error.message)")
}

@Test func preemption_runawayLoopWhileLoading_isStoppedDespitePcall() throws {
    let error = try #require(
        try simulationError(
            plugins(["p": "pcall(function() while true do end end)\nlifeline.on('didBecomeActive', function() end)"]),
            profile: profile(launch: 0.05)))
    #expect(error.exitCode == 65)
}

@Test func preemption_quickHandlers_areNotStopped() throws {
    // The same small limits, with handlers that return at once: no termination.
    let recorder = try runaway("mark('quick')")
    #expect(recorder.termination == nil)
    #expect(marks(recorder) == ["quick"])
}

@Test func preemption_stopIsClearedForTheNextCall() throws {
    // A stop requested after the code had returned must not hit the plugin's next call. Drive a
    // plugin directly: preempt it between calls, reset, and call again.
    try withPluginFolder(plugins(["p": "lifeline.on('didBecomeActive', function() mark('ran') end)"])) { dir in
        let box = PluginBox()
        let host = makeHost([capturingDescriptor(name: "p", directory: dir + "/p", box: box)])
        defer { host.shutdown() }
        try host.perform(.launch)
        let plugin = try #require(box.plugin)
        plugin.preemptor?.preempt()
        plugin.resetPreemption()
        try host.perform(.resign)
        try host.perform(.activate)
        #expect(marks(host.recorder) == ["ran", "ran"])
        #expect(host.recorder.termination == nil)
    }
}
