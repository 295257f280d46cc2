import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The peak memory (KiB) of `simulate` over `hostile`'s plugins, and over `calm`'s, each the lowest
/// of five runs (so a slow moment of the machine does not count: under a full parallel suite one
/// of three runs measured 1,304 KiB over where alone it measures about 600); every run must exit 0.
private func peaks(calm: Workspace, hostile: Workspace, scenario: String) throws -> (calm: Int, hostile: Int) {
    func peak(_ ws: Workspace) throws -> Int {
        let r = try CLI.runMeasuringPeakMemory(
            ["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", ws.path + "/r.json"])
        #expect(r.status == 0, "a plugin's assert failed or the host did not finish")
        return r.peakKiB
    }
    return (try (0..<5).map { _ in try peak(calm) }.min()!, try (0..<5).map { _ in try peak(hostile) }.min()!)
}

/// Guarantees at the edges, end to end: the memory cap holds for JSON, simulate's report holds
/// nothing of the run's temporary folders, and a plugin whose init.lua cannot be read fails.
@Suite struct EdgeGuaranteeCLITests {
    /// A plugin capped at 256 KiB asks lifeline.json for 125 MB of JSON (a 1,000-byte string
    /// reached 125,000 times through shared tables) and to decode 25,000 tables.
    static let bomb = """
        lifeline.on('didFinishLaunching', function()
          local leaf = {string.rep('x', 1000)}
          local t = leaf
          for _ = 1, 3 do local n = {} for j = 1, 50 do n[j] = t end t = n end
          local ok, err = pcall(lifeline.json.encode, t)
          assert(not ok and err == 'not enough memory', tostring(err))
          t, leaf = nil, nil
          local text = '[' .. string.rep('{},', 25000) .. '{}]'
          local ok2, err2 = pcall(lifeline.json.decode, text)
          assert(not ok2 and err2 == 'not enough memory', tostring(err2))
        end)
        """

    /// The rule says "about 1 MiB": the bound allows half a MiB more, for the measurement's own
    /// noise. Five runs of the calm plugin alone span 600 KiB of peak here, and under the full
    /// parallel suite the least of five runs each once differed by 1,332 KiB. What the test
    /// guards against is a cap that does not hold, which grew the host by 120 MB.
    @Test func json_pastTheCap_hostMemoryGrowsByNoMoreThanTheCapPlusAboutAMiB() throws {
        let cap = 256
        let toml = "[limits]\nmemory = \"\(cap)KiB\"\n"
        let calm = try Workspace(), bomb = try Workspace()
        try calm.plugin("p", "lifeline.on('didFinishLaunching', function() end)", toml: toml)
        try bomb.plugin("p", Self.bomb, toml: toml)
        let scenario = try calm.file("s.scenario", "0s launch\n1s background\n")
        let (baseline, measured) = try peaks(calm: calm, hostile: bomb, scenario: scenario)
        #expect(measured - baseline <= cap + 1536, "peak \(measured) KiB against \(baseline) KiB without the JSON")
    }

    /// Each plugin, capped at 4 MiB, asks the host to keep far more than that through one API,
    /// until the call raises Lua's memory error: 100,000 timers, subscriptions, operations, task
    /// events, and copies of a stored value. (Background works meet the task limit first; the
    /// Lua tests cover them under a smaller cap.)
    static let attacks: [(String, String)] = [
        ("timers", "lifeline.after(1000, function() end)"),
        ("subscriptions", "lifeline.on('didEnterBackground', function() end)"),
        ("operations", "lifeline.queue('q-' .. (n % 7)):add(function() end)"),
        ("tasks", "lifeline.endBackgroundTask(lifeline.beginBackgroundTask('t'))"),
        ("copies", "lifeline.store.get('big')"),
    ]

    static func attack(_ call: String) -> String {
        """
        lifeline.store.set('big', string.rep('x', 256 * 1024))
        local n, ok, err = 0, true, nil
        local keep = {}
        local function make() keep[#keep + 1] = \(call) end
        while ok and n < 100000 do
          ok, err = pcall(make)
          if ok then n = n + 1 end
        end
        keep = nil
        assert(err == 'not enough memory', 'ended with ' .. tostring(err) .. ' after ' .. n)
        """
    }

    @Test func everyAPI_pastTheCap_hostMemoryGrowsByNoMoreThanTheCapsPlus1MiBEach() throws {
        let cap = 4096
        let toml = "[limits]\nmemory = \"\(cap)KiB\"\n"
        let calm = try Workspace(), hostile = try Workspace()
        for (name, call) in Self.attacks {
            try calm.plugin(name, "lifeline.store.set('big', string.rep('x', 256 * 1024))", toml: toml)
            try hostile.plugin(name, Self.attack(call), toml: toml)
        }
        let scenario = try calm.file("s.scenario", "0s launch\n1s kill\n")
        let (baseline, measured) = try peaks(calm: calm, hostile: hostile, scenario: scenario)
        let allowed = Self.attacks.count * (cap + 1024)
        #expect(measured - baseline <= allowed, "peak \(measured) KiB against \(baseline) KiB; allowed \(allowed) KiB more")
    }

    @Test func simulate_transferThatCannotOpenItsFile_givesByteIdenticalReports_withARelativeName() throws {
        let ws = try Workspace()
        // 'a' is downloaded as a file; then 'a/b.bin' needs 'a' to be a folder, and fails.
        try ws.plugin(
            "p",
            """
            lifeline.on('didFinishLaunching', function()
              lifeline.transfers.download{url = 'http://example.org/a', to = 'a', id = 'first'}
            end)
            lifeline.on('transferDidFinish', function(e)
              if e.id == 'first' then lifeline.transfers.download{url = 'http://example.org/b', to = 'a/b.bin', id = 'second'} end
            end)
            lifeline.on('transferDidFail', function(e) print('failed ' .. e.id .. ': ' .. e.reason) end)
            """, toml: "[permissions]\nnetwork = [\"example.org:*\"]\n")
        let scenario = try ws.file("s.scenario", "0s http GET example.org/* -> 200 size=10\n0s launch\n")
        var reports: [Data] = []
        for run in 0..<2 {
            let out = ws.path + "/r\(run).json"
            let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", out])
            #expect(r.status == 0, "\(r.stderr)")
            reports.append(try Data(contentsOf: URL(fileURLWithPath: out)))
        }
        #expect(reports[0] == reports[1])
        let report = try parseReport(String(decoding: reports[0], as: UTF8.self))
        let ended = events(report, "transferEnded", plugin: "p").filter { $0["transfer"] as? String == "second" }
        #expect(ended.count == 1)
        let reason = ended.first?["reason"] as? String ?? ""
        #expect(reason.contains("'a'"), "\(reason)")
        #expect(reason.contains("Not a directory"), "\(reason)")
        #expect(!reason.contains("/tmp") && !reason.contains("lifeline-state"), "\(reason)")
    }

    @Test func pluginText_reachesTheTerminal_withoutControlCharacters_orLinesThatPassForTheHosts() throws {
        let ws = try Workspace()
        try ws.plugin(
            "e",
            #"""
            print("\27[31mRED\27[0m\7")
            lifeline.log.info("one\n[    9.000s] error lifeline: app terminated")
            lifeline.on("didEnterBackground", function() error("bad\27]0;title\7\nok   e/scenarios/x.scenario") end)
            """#)
        try FileManager.default.createDirectory(atPath: ws.plugins + "/e/scenarios", withIntermediateDirectories: true)
        let s = try ws.file("plugins/e/scenarios/a.scenario", "0s launch\n1s background\n")
        let simulate = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        let test = try CLI.run(["test", ws.plugins])
        for (what, text) in [("simulate stderr", simulate.stderr), ("test stdout", test.stdout)] {
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(what): \(text)")
            #expect(text.contains(#"\u{1B}"#), "\(what): \(text)")
            for line in text.split(separator: "\n") {
                #expect(!line.hasPrefix("[    9.000s]") && !line.hasPrefix("ok   "), "\(what): \(line)")
            }
        }
        #expect(simulate.stderr.contains(#"info plugin.e: \u{1B}[31mRED\u{1B}[0m\u{7}"#), "\(simulate.stderr)")
        // The report keeps the text as the plugin wrote it, escaped by JSON.
        #expect(simulate.stdout.contains(#""message": "\u001b[31mRED\u001b[0m\u0007""#), "\(simulate.stdout)")
        #expect(test.status == 1)
    }

    @Test func initLuaThatIsALinkLoop_failsTheLoad_in_simulate_and_check() throws {
        let ws = try Workspace()
        try ws.plugin("good", "")
        let folder = ws.plugins + "/loop"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: folder + "/init.lua", withDestinationPath: "init.lua")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let simulate = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-"])
        #expect(simulate.status == 65, "\(simulate.stderr)")
        #expect(simulate.stderr.contains("loop/init.lua"), "\(simulate.stderr)")
        #expect(simulate.stderr.contains("Too many levels of symbolic links"), "\(simulate.stderr)")
        let check = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(check.status == 65, "\(check.stderr)")
        #expect(check.stdout.contains("ok   good"), "\(check.stdout)")
        #expect(check.stdout.contains("FAIL loop (lua)"), "\(check.stdout)")
        #expect(check.stdout.contains("Too many levels of symbolic links"), "\(check.stdout)")
    }

    @Test func initLuaThatIsALinkLoop_isLoggedAndSkipped_byRun_whileTheOthersRun() throws {
        let ws = try Workspace()
        try ws.plugin("fine", "lifeline.on('didBecomeActive', function() print('fine is running') end)")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/loop", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: ws.plugins + "/loop/init.lua", withDestinationPath: "init.lua")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = ["run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state"]
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        let stderr = Captured(err)
        try process.run()
        #expect(stderr.waitFor("fine is running"))
        kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        let text = stderr.text(waitingForEOF: true)
        #expect(text.contains("plugin 'loop' skipped"), "\(text)")
        #expect(text.contains("loop/init.lua: Too many levels of symbolic links"), "\(text)")
    }
}
