import Foundation
import Testing

/// SPEC 2.4 and 7: every exit code, and what bad input gets.
@Suite struct ExitCodeTests {
    static let scenario = "0s launch\n2s background\n42s foreground\n1m terminate\n"

    @Test func simulate_completedRun_exits0() throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "lifeline.on('didEnterBackground', function() end)")
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try parseReport(r.stdout)["outcome"] as? String == "completed")
    }

    @Test func simulate_terminatedByRule_exits1() throws {
        let ws = try Workspace()
        try ws.plugin("leaky", "lifeline.on('didEnterBackground', function() lifeline.beginBackgroundTask('never-ended') end)")
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        #expect(r.status == 1)
        let report = try parseReport(r.stdout)
        let termination = try #require(report["termination"] as? [String: Any])
        #expect(termination["kind"] as? String == "backgroundTaskTimeout")
        #expect(termination["code"] as? String == "0x2182bad2")
        #expect((termination["reason"] as? String)?.contains("never-ended") == true)
    }

    @Test func simulate_pluginError_exits1_andOthersStillGetTheEvent() throws {
        let ws = try Workspace()
        try ws.plugin("a-broken", "lifeline.on('didEnterBackground', function() error('boom') end)")
        try ws.plugin("b-fine", """
            lifeline.on('didEnterBackground', function()
              lifeline.endBackgroundTask(lifeline.beginBackgroundTask('still-called'))
            end)
            """)
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        #expect(r.status == 1)
        let report = try parseReport(r.stdout)
        let errors = events(report, "pluginError", plugin: "a-broken")
        #expect(errors.count == 1)
        #expect((errors.first?["message"] as? String)?.contains("boom") == true)
        #expect((errors.first?["traceback"] as? String)?.contains("stack traceback") == true)
        #expect(events(report, "taskBegan", plugin: "b-fine").count == 1)
        #expect(report["outcome"] as? String == "completed")
    }

    @Test(arguments: [
        ["simulate"],
        ["simulate", "--plugins", "p"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--no-such-flag"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--profile", "ios99"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--watchdog-scale", "0"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--until", "5 parsecs"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--budget", "-1"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--budget", "3x"],
        ["simulate", "--plugins", "p", "--scenario", "s", "--launch-limit", "10s5m"],
        ["test", "p", "--timeout", "5 parsecs"],
        ["run", "--plugins", "p", "--task-limit", "0"],
        ["frobnicate"],
    ])
    func badUsage_exits64(_ arguments: [String]) throws {
        let r = try CLI.run(arguments)
        #expect(r.status == 64, "\(arguments): \(r.stderr)")
        #expect(!r.stderr.isEmpty)
    }

    @Test(arguments: [
        ("0s launch\n2s\n", "s.scenario:2", "expected a time and an action"),
        ("0s launch\n2s fly\n", "s.scenario:2", "unknown action 'fly'"),
        ("0s launch\n2parsec background\n", "s.scenario:2", "unknown unit"),
        ("0s launch\n5s background\n2s foreground\n", "s.scenario:3", "goes backwards"),
        ("0s launch\n1s foreground\n", "s.scenario:2", "invalid transition"),
        ("0s launch\n1s terminate\n2s background\n", "s.scenario:3", "only 'launch'"),
        ("# nothing yet\n1s background\n", "s.scenario:2", "before the app was launched"),
    ])
    func badScenario_exits65_withFileAndLine(_ text: String, _ location: String, _ message: String) throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "-- nothing")
        let s = try ws.file("s.scenario", text)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s])
        #expect(r.status == 65)
        #expect(r.stderr.contains(location), "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }

    @Test func missingScenarioFile_exits65() throws {
        let ws = try Workspace()
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/absent.scenario"])
        #expect(r.status == 65)
        #expect(r.stderr.contains("absent.scenario"))
    }

    @Test(arguments: ["simulate", "check", "run"])
    func missingPluginsFolder_exits65(_ command: String) throws {
        let ws = try Workspace()
        let s = try ws.file("s.scenario", Self.scenario)
        var args = [command, "--plugins", ws.path + "/nope"]
        if command == "simulate" { args += ["--scenario", s] }
        let r = try CLI.run(args)
        #expect(r.status == 65)
        #expect(r.stderr.contains("nope"))
    }

    @Test(arguments: [
        ("syntax", "lifeline.on('didEnterBackground', function()\n  local x = = 1\nend)", "init.lua:2"),
        ("runtime", "local t = nil\n\nlocal y = t.field", "init.lua:3"),
        ("binary", "\u{1B}Lua\u{54}\u{00}garbage", "binary chunk"),
        ("runaway", "-- spins while loading\nwhile true do end", "launch limit"),
    ])
    func badPluginCode_exits65_fromSimulateAndCheck(_ kind: String, _ lua: String, _ expected: String) throws {
        let ws = try Workspace()
        try ws.plugin("bad", lua)
        let s = try ws.file("s.scenario", Self.scenario)
        let sim = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", s, "--launch-limit", "0.3",
        ])
        #expect(sim.status == 65, "\(kind): \(sim.stderr)")
        #expect(sim.stderr.contains(expected), "\(kind): \(sim.stderr)")
        let check = try CLI.run(["check", "--plugins", ws.plugins, "--launch-limit", "0.3"])
        #expect(check.status == 65, "\(kind): \(check.stderr)")
        #expect(check.stdout.contains("FAIL bad"), "\(kind): \(check.stdout)")
        #expect(check.stdout.contains(expected), "\(kind): \(check.stdout)")
    }

    @Test func invalidPluginToml_exits65_withFileAndLine() throws {
        let ws = try Workspace()
        try ws.plugin("configured", "-- fine", toml: "version = \"1.0\"\n[limits]\nmemory = \n")
        let r = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(r.status == 65)
        #expect(r.stdout.contains("FAIL configured (lua): \(ws.plugins)/configured/plugin.toml:3"), "\(r.stdout)")
    }

    @Test(arguments: ["check", "simulate", "run"])
    func pluginsPointingAtOnePluginsFolder_is65_namingTheFolderThatHoldsIt(_ command: String) throws {
        let ws = try Workspace()
        try ws.plugin("p", "")
        let s = try ws.file("s.scenario", Self.scenario)
        var arguments = [command, "--plugins", ws.plugins + "/p/"]
        if command == "simulate" { arguments += ["--scenario", s] }
        let r = try CLI.run(arguments)
        #expect(r.status == 65)
        #expect(
            r.stderr.contains(
                "'\(ws.plugins)/p/' is a plugin's own folder (it has an init.lua); give the folder that holds the "
                    + "plugins, as in --plugins \(ws.plugins)"), "\(r.stderr)")
    }

    @Test func scenarioThatCannotBeRead_is65_sayingWhy() throws {
        let ws = try Workspace()
        let missing = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ws.path + "/nope.scenario"])
        #expect(missing.status == 65)
        #expect(missing.stderr.hasSuffix("/nope.scenario': No such file or directory\n"), "\(missing.stderr)")
        let folder = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ws.plugins])
        #expect(folder.status == 65)
        #expect(folder.stderr.hasSuffix("': it is a folder\n"), "\(folder.stderr)")
    }

    @Test func invalidPluginToml_failsOnlyItsPlugin_andNotARunWithoutIt() throws {
        let ws = try Workspace()
        try ws.plugin("broken", "", toml: "[config]\nurl = http://x\n")
        try ws.plugin("fine", "lifeline.log.info('fine loaded')")
        let s = try ws.file("s.scenario", Self.scenario)
        let without = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", "fine", "--scenario", s])
        #expect(without.status == 0, "\(without.stderr)")
        let with = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s])
        #expect(with.status == 65)
        #expect(with.stderr.contains("broken/plugin.toml:2: invalid value 'http://x'"), "\(with.stderr)")
        let check = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(check.status == 65)
        #expect(check.stdout.contains("ok   fine (lua)"), "\(check.stdout)")
    }

    @Test func check_allPluginsLoad_exits0_andListsThem() throws {
        let ws = try Workspace()
        try ws.plugin("fine", "lifeline.on('didBecomeActive', function() end)")
        let r = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("ok   fine (lua)"))
        // A compiled-in plugin joins only when the folder asks for it.
        #expect(!r.stdout.contains("heartbeat"))
    }

    @Test func check_runsNoHandler() throws {
        let ws = try Workspace()
        try ws.plugin("eager", "lifeline.on('didFinishLaunching', function() error('a handler ran') end)")
        let r = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(r.status == 0)
        #expect(!r.stderr.contains("a handler ran"))
    }

    @Test(arguments: [
        ["simulate", "--plugins", "PLUGINS", "--scenario", "SCENARIO", "--report", "/nonexistent-lifeline/r.json"],
        ["simulate", "--plugins", "PLUGINS", "--scenario", "SCENARIO", "--html", "/"],
        ["simulate", "--plugins", "PLUGINS", "--scenario", "SCENARIO", "--trace", "/nonexistent-lifeline/t.json"],
        ["run", "--plugins", "PLUGINS", "--report", "/nonexistent-lifeline/r.json"],
        ["run", "--plugins", "PLUGINS", "--html", "/nonexistent-lifeline/r.html"],
        ["test", "PLUGINS", "--junit", "/nonexistent-lifeline/j.xml"],
        ["simulate", "--plugins", "PLUGINS", "--scenario", "SCENARIO", "--report", "."],
        ["simulate", "--plugins", "PLUGINS", "--scenario", "SCENARIO", "--report", "./"],
    ])
    func unwritableOutput_exits70_beforeAnythingRuns(_ arguments: [String]) throws {
        let ws = try Workspace()
        // A plugin that would leave a trace on stderr if it were ever loaded.
        try ws.plugin("loud", "lifeline.log.info('loaded after all')")
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(arguments.map { $0 == "PLUGINS" ? ws.plugins : $0 == "SCENARIO" ? s : $0 })
        #expect(r.status == 70, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("lifeline: cannot write '"), "\(r.stderr)")
        #expect(!r.stderr.contains("loaded after all"))
    }

    @Test(arguments: ["a", "r.json", "./r", "sub/r", "sub//r", "sub/./r"])
    func shortAndOddOutputPaths_areWritten(_ name: String) throws {
        let ws = try Workspace()
        try FileManager.default.createDirectory(atPath: ws.path + "/sub", withIntermediateDirectories: true)
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", name], in: ws.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(FileManager.default.fileExists(atPath: ws.path + "/" + name), "\(name)")
    }

    @Test func unwritableReport_exits70() throws {
        let ws = try Workspace()
        let s = try ws.file("s.scenario", Self.scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", ws.path + "/no/such/dir/r.json"])
        #expect(r.status == 70)
        #expect(r.stderr.contains("cannot write"))
    }

    @Test(arguments: ["simulate", "run", "check"])
    func help_showsAWorkingExample(_ command: String) throws {
        let r = try CLI.run([command, "--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("Example:"))
        #expect(r.stdout.contains("lifeline \(command) --plugins"))
    }
}
