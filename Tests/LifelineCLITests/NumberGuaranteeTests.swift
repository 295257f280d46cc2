import Foundation
import Testing

/// No number from any source can trap the host (docs/guarantees.md, "Numbers"): each is
/// range-checked where it enters and refused with the documented exit code and a message naming
/// the limit, and what is accepted is shown and added without overflow.
@Suite struct NumberGuaranteeTests {
    static let scenario = "0s launch\n2s background\n42s foreground\n1m terminate\n"

    static let secondsFlags = [
        "--budget", "--expiration-lead", "--launch-limit", "--background-limit", "--transition-limit",
        "--terminate-limit", "--expiration-handler-limit", "--fetch-limit", "--refresh-task-limit",
        "--processing-task-limit", "--transfer-events-limit",
    ]

    /// Past 100 years, or no number at all: refused with 64 and the limit named, never a trap.
    @Test(arguments: secondsFlags)
    func simulate_profileFigurePastTheLimit_isRefusedNamingIt(flag: String) throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let s = try ws.file("s.scenario", Self.scenario)
        for value in ["1e16", "1e300", "inf", "3153600001", "99999999999999999999999"] {
            let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, flag, value, "--report", "-"])
            #expect(r.status == 64, "\(flag) \(value): \(r.status) \(r.stderr)")
            #expect(r.stderr.contains("100 years"), "\(flag) \(value): \(r.stderr)")
        }
        let nan = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, flag, "nan", "--report", "-"])
        #expect(nan.status == 64, "\(flag) nan: \(nan.stderr)")
        #expect(nan.stderr.contains("\(flag) must be a number of seconds"), "\(flag) nan: \(nan.stderr)")
    }

    /// The largest figure accepted is shown whole in the report's limits.
    @Test func simulate_figureAtTheLimit_isShownInTheReport() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let s = try ws.file("s.scenario", Self.scenario)
        var arguments = ["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"]
        for flag in Self.secondsFlags { arguments += [flag, "3153600000"] }
        let r = try CLI.run(arguments + ["--expiration-lead", "1"])
        #expect(r.status == 0, "\(r.stderr)")
        let limits = try #require(try parseReport(r.stdout)["limits"] as? [String: Any])
        #expect((limits["budget"] as? NSNumber)?.doubleValue == 3_153_600_000)
        #expect((limits["processingTask"] as? NSNumber)?.doubleValue == 3_153_600_000)
    }

    /// `lifeline run` refuses the figure before the app starts, so no report is lost at its end.
    @Test func run_profileFigurePastTheLimit_isRefusedBeforeTheRun() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let state = ws.path + "/state"
        let r = try CLI.run([
            "run", "--plugins", ws.plugins, "--state-dir", state, "--budget", "1e16", "--report", ws.path + "/r.json",
        ])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("100 years"))
        #expect(!FileManager.default.fileExists(atPath: ws.path + "/r.json.tmp"))
    }

    @Test(arguments: [
        ["--task-policy", "delay:1e16"],
        ["--task-policy", "delay:nan"],
    ])
    func simulate_otherSecondsPastTheLimit_areRefused(extra: [String]) throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"] + extra)
        #expect(r.status == 64, "\(extra): \(r.stderr)")
    }

    @Test func test_timeoutPastTheLimit_isRefused() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let r = try CLI.run(["test", ws.plugins, "--timeout", "1e300"])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("100 years"), "\(r.stderr)")
    }

    /// A scenario's times and scripted sizes past their limits are refused with file:line (65).
    @Test(arguments: [
        "99999999999999999999999h launch\n",
        "0s launch\n1000000h background\n",
        "0s launch\nin 99999999999999999999h background\n",
    ])
    func simulate_scenarioNumberPastTheLimit_isRefusedWithFileLine(text: String) throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let s = try ws.file("s.scenario", text)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        #expect(r.status == 65, "\(text): \(r.status) \(r.stderr)")
        #expect(r.stderr.contains("s.scenario:"), "\(r.stderr)")
    }

    /// Huge and non-finite numbers a plugin passes are refused or saturate: the run ends with a
    /// report, never a trap.
    @Test func simulate_hugeLuaNumbers_neverTrap() throws {
        let ws = try Workspace()
        try ws.plugin(
            "huge",
            """
            local function try(f, ...) local ok, e = pcall(f, ...); if not ok then lifeline.log.info(tostring(e)) end end
            lifeline.on('didEnterBackground', function()
              for _, n in ipairs({1e300, math.huge, -math.huge, 0/0, 9.3e18, -9.3e18, math.maxinteger, math.mininteger}) do
                try(lifeline.after, n, function() end)
                try(lifeline.cancel, n)
                try(lifeline.endBackgroundTask, n)
                try(lifeline.store.set, 'n', n)
                try(lifeline.json.encode, {n = n})
                try(function() lifeline.queue('q' .. tostring(n)):add{timeout = n, run = function() end} end)
                try(lifeline.background, 'w', function() lifeline.sleep(n) end)
              end
            end)
            """)
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-", "--state-dir", ws.path + "/state",
        ])
        #expect(r.status == 0 || r.status == 1, "\(r.status): \(r.stderr)")
        #expect(try parseReport(r.stdout)["lifeline"] != nil)
    }
}
