import Foundation
import Logging
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// What the host keeps for a plugin counts against the plugin's memory cap, as its own
// allocations do: past the cap, the call raises Lua's memory error.

private func capped(_ memory: String, _ source: String) -> [String: String] {
    var files = plugins(["p": source])
    files["p/plugin.toml"] = "[limits]\nmemory = \"\(memory)\"\n"
    return files
}

/// Runs `make()` until it raises; marks how many calls succeeded and the error.
private func untilItRaises(_ call: String) -> String {
    """
    local n, ok, err = 0, true, nil
    local keep = {}
    local function make() keep[#keep + 1] = \(call) end
    while ok and n < 1000000 do  -- nothing here allocates outside the pcall
      ok, err = pcall(make)
      if ok then n = n + 1 end
    end
    keep = nil
    collectgarbage()
    mark(n); mark(tostring(err))
    """
}

@Test func timers_pastTheCap_raiseLuaMemoryError() throws {
    let recorder = try simulate(capped("256KiB", untilItRaises("lifeline.after(1000, function() end)")))
    let result = marks(recorder)
    #expect(result.count == 2, "\(result) \(pluginErrors(recorder))")
    let made = Int(result.first ?? "") ?? -1
    #expect(made > 0 && made < 256 * 1024 / LuaPlugin.recordBytes, "\(made) timers fit in 256 KiB")
    #expect(result.last == "not enough memory")
    #expect(recorder.termination == nil)
}

@Test func subscriptionsAndOperations_pastTheCap_raiseLuaMemoryError() throws {
    for call in ["lifeline.on('didEnterBackground', function() end)", "lifeline.queue('q'):add(function() end)",
        "lifeline.background(nil, function() lifeline.sleep(100) end)"]
    {
        let recorder = try simulate(capped("256KiB", untilItRaises(call)), scenario: "0s launch\n1s kill")
        let result = marks(recorder)
        #expect(result.last == "not enough memory", "\(call): \(result)")
        #expect((Int(result.first ?? "") ?? -1) < 256 * 1024 / LuaPlugin.recordBytes, "\(call): \(result)")
    }
}

@Test func timersFreed_giveTheirBytesBack() throws {
    let source = """
        local handles = {}
        for i = 1, 100 do handles[i] = lifeline.after(1000, function() end) end
        for i = 1, 100 do handles[i]:cancel() end
        handles = nil
        collectgarbage()
        -- 500 more fit only if the first 100 gave their bytes back
        for round = 1, 5 do
          local more = {}
          for i = 1, 100 do more[i] = lifeline.after(1000, function() end) end
          for i = 1, 100 do more[i]:cancel() end
        end
        mark('ok')
        """
    let recorder = try simulate(capped("256KiB", source))
    #expect(marks(recorder) == ["ok"], "\(pluginErrors(recorder))")
}

@Test func storeGet_copiesPastTheCap_raiseLuaMemoryError() throws {
    let source = """
        lifeline.store.set('big', string.rep('x', 512 * 1024))
        collectgarbage()
        local copies, ok, err = {}, true, nil
        while ok and #copies < 100 do
          ok, err = pcall(function() copies[#copies + 1] = lifeline.store.get('big') end)
        end
        mark(#copies); mark(tostring(err))
        """
    let recorder = try withDatabase { try simulate(capped("4MiB", source), database: $0) }
    let result = marks(recorder)
    #expect(result.last == "not enough memory", "\(result) \(pluginErrors(recorder))")
    #expect((Int(result.first ?? "") ?? 100) < 8, "\(result)")
}

@Test func aDoublingTimerLoop_endsInAMemoryErrorAndTheRunFinishes() throws {
    // Each timer starts two more: without the cap on the host's records this never ends.
    let source = """
        local fired = 0
        local function spawn()
          fired = fired + 1
          lifeline.after(0.001, spawn)
          lifeline.after(0.001, spawn)
        end
        lifeline.after(0, spawn)
        """
    let recorder = try simulate(capped("256KiB", source), scenario: "0s launch\n0.1s terminate")
    let errors = pluginErrors(recorder)
    #expect(!errors.isEmpty)
    #expect(errors.allSatisfy { $0.message.contains("not enough memory") }, "\(errors.prefix(2))")
}

@Test func taskEventsInTheReport_countAgainstTheCap_soALoopCannotGrowTheHostWithoutBound() throws {
    // begin and end allocate nothing in the state: only the report grows, by two events a turn.
    let source = """
        lifeline.on("didFinishLaunching", function()
          local n, ok, err = 0, true, nil
          local function once() lifeline.endBackgroundTask(lifeline.beginBackgroundTask('t')) end
          -- Room for the message at the end, given back once the cap is reached: what the cap
          -- leaves over otherwise depends on how much the state held at the start.
          local room = string.rep("x", 4096)
          while ok and n < 10000000 do
            ok, err = pcall(once)
            if ok then n = n + 1 end
          end
          room = nil
          collectgarbage()
          -- A log line would count against the spent cap too; a plugin error is recorded past it.
          error(n .. "\t" .. tostring(err), 0)
        end)
        """
    let recorder = try simulate(capped("256KiB", source))
    let result = (pluginErrors(recorder).first?.message ?? "").split(separator: "\t").map(String.init)
    #expect(result.last == "not enough memory", "\(result) \(pluginErrors(recorder))")
    let made = Int(result.first ?? "") ?? -1
    #expect(made > 100 && made < 256 * 1024 / (2 * TimelineEvent.recordedBytes), "\(made)")
    #expect(recorder.timeline.count < 2 * 1024, "\(recorder.timeline.count) events")
}

@Test func taskEvents_countOnlyWhenTheReportKeepsThem() throws {
    // `run` with no --report keeps no event, so a plugin's cap does not shrink with its tasks.
    let source = """
        for i = 1, 5000 do lifeline.endBackgroundTask(lifeline.beginBackgroundTask('t')) end
        print('done')
        """
    try withPluginFolder(capped("256KiB", source)) { dir in
        let logs = LogLines()
        var configuration = HostConfiguration()
        configuration.pluginLogger = { Logger(label: "plugin.\($0)") { _ in logs } }
        let host = LifelineHost(
            configuration: configuration, plugins: try LuaPluginLoader.descriptors(in: dir),
            executor: MainExecutor(clock: VirtualClock()), recorder: Recorder(profileName: "ios13", keepsTimeline: false))
        defer { host.shutdown() }
        try host.perform(.launch)
        #expect(logs.lines.contains("info: done"), "\(logs.lines)")
    }
}
