import Foundation
import Testing

/// `--plugins DIR` runs DIR's plugins and nothing else; `--only` runs a subset; a folder asks for
/// a compiled-in Swift plugin with plugin.toml's `swift` key; `--config` overrides [config].
@Suite struct PluginSelectionTests {
    static let launch = "0s launch\n1s background\n"

    private func pluginNames(_ report: [String: Any]) -> [String] {
        ((report["plugins"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
    }

    @Test func plugins_loadsOnlyTheFolder_noCompiledInPluginUninvited() throws {
        let ws = try Workspace()
        try ws.plugin("mine", "lifeline.on('didEnterBackground', function() end)")
        let scenario = try ws.file("s.scenario", Self.launch)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try parseReport(r.stdout)
        #expect(pluginNames(report) == ["mine"])
        // Nothing else begins a task, so the app suspends as soon as the background step ends.
        #expect(events(report, "taskBegan").isEmpty)
        #expect(events(report, "suspended").first?["t"] as? Double == 1)
    }

    @Test func plugins_aFolderWithSwiftKey_asksForTheCompiledInPlugin() throws {
        let ws = try Workspace()
        try ws.plugin("mine", "")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/beats", withIntermediateDirectories: true)
        try ws.file("plugins/beats/plugin.toml", "swift = \"heartbeat\"\n")
        let scenario = try ws.file("s.scenario", Self.launch)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try parseReport(r.stdout)
        #expect(pluginNames(report) == ["heartbeat", "mine"])
        #expect(events(report, "taskEnded", plugin: "heartbeat").count == 1)
    }

    @Test func plugins_unknownSwiftName_isExit65WithFileAndLine() throws {
        let ws = try Workspace()
        try FileManager.default.createDirectory(atPath: ws.plugins + "/beats", withIntermediateDirectories: true)
        try ws.file("plugins/beats/plugin.toml", "description = \"x\"\nswift = \"nope\"\n")
        let scenario = try ws.file("s.scenario", Self.launch)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario])
        #expect(r.status == 65)
        #expect(r.stderr.contains("beats/plugin.toml:2: no Swift plugin named 'nope'"), "\(r.stderr)")
        #expect(r.stderr.contains("compiled in: apple-samples, heartbeat"), "\(r.stderr)")
    }

    @Test func plugins_swiftKeyBesideInitLua_isExit65() throws {
        let ws = try Workspace()
        try ws.plugin("both", "", toml: "swift = \"heartbeat\"\n")
        let r = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(r.status == 65)
        #expect(r.stdout.contains("both/plugin.toml:1:"), "\(r.stdout)")
    }

    @Test func only_runsTheNamedSubset_byNameOrFolder() throws {
        let ws = try Workspace()
        for name in ["a", "b", "c"] { try ws.plugin(name, "") }
        try FileManager.default.createDirectory(atPath: ws.plugins + "/beats", withIntermediateDirectories: true)
        try ws.file("plugins/beats/plugin.toml", "swift = \"heartbeat\"\n")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--only", "c,beats", "--only", "a", "--scenario", scenario,
            "--report", "-",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(pluginNames(try parseReport(r.stdout)) == ["a", "c", "heartbeat"])
    }

    @Test func only_aNameNotInTheFolder_isUsageError64() throws {
        let ws = try Workspace()
        try ws.plugin("a", "")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", "zz", "--scenario", scenario])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--only: no plugin named 'zz'"), "\(r.stderr)")
    }

    @Test func config_overridesForEveryPluginAndForOne() throws {
        let ws = try Workspace()
        let lua = "lifeline.log.info('greeting=' .. tostring(lifeline.config.greeting) .. ' n=' .. math.type(lifeline.config.n) .. ':' .. tostring(lifeline.config.n))"
        try ws.plugin("a", lua, toml: "[config]\ngreeting = \"hello\"\nn = 1\n")
        try ws.plugin("b", lua, toml: "[config]\ngreeting = \"hi\"\nn = 2\n")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--config", "n=42", "--config", "b.greeting=bonjour tout",
            "--scenario", scenario, "--report", "-",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let logs = events(try parseReport(r.stdout), "log").compactMap { $0["message"] as? String }
        #expect(logs == ["greeting=hello n=integer:42", "greeting=bonjour tout n=integer:42"])
    }

    @Test func config_withoutEquals_isUsageError64() throws {
        let ws = try Workspace()
        try ws.plugin("a", "")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--config", "nokey", "--scenario", scenario])
        #expect(r.status == 64)
    }

    @Test(arguments: [
        ("sycn.interval=5", "--config 'sycn.interval=5': no Lua plugin named 'sycn' in '", "(its Lua plugins: a)"),
        ("beats.n=1", "--config 'beats.n=1': 'beats' is a Swift plugin, which has no [config]", ""),
        ("heartbeat.n=1", "--config 'heartbeat.n=1': 'heartbeat' is a Swift plugin, which has no [config]", ""),
    ])
    func config_keyForNoLuaPlugin_isUsageError64(_ item: String, _ says: String, _ alsoSays: String) throws {
        let ws = try Workspace()
        try ws.plugin("a", "")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/beats", withIntermediateDirectories: true)
        try ws.file("plugins/beats/plugin.toml", "swift = \"heartbeat\"\n")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--config", item, "--scenario", scenario])
        #expect(r.status == 64)
        #expect(r.stderr.contains(says) && (alsoSays.isEmpty || r.stderr.contains(alsoSays)), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func config_aQuotedKeyWithADot_isOverridden() throws {
        let ws = try Workspace()
        try ws.plugin(
            "p", "lifeline.log.info('url=' .. lifeline.config['api.url'])", toml: "[config]\n\"api.url\" = \"http://a\"\n")
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--config", "api.url=http://b", "--scenario", scenario, "--report", "-",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(events(try parseReport(r.stdout), "log").first?["message"] as? String == "url=http://b")
    }

    @Test func simulate_usesLines_joinOnly_andAMissingNameIs65AtItsLine() throws {
        let ws = try Workspace()
        try ws.plugin("a", "lifeline.log.info('a loaded')")
        try ws.plugin("b", "lifeline.log.info('b loaded')")
        try ws.plugin("c", "lifeline.log.info('c loaded')")
        let uses = try ws.file("uses.scenario", "# b is needed\nuses b\n0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--only", "a", "--scenario", uses, "--report", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        let names = (try parseReport(r.stdout)["plugins"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
        #expect(names == ["a", "b"])
        let ghost = try ws.file("ghost.scenario", "0s launch\nuses b, ghost\n")
        let g = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ghost])
        #expect(g.status == 65)
        #expect(
            g.stderr == "lifeline: \(ghost):2: uses: no plugin named 'ghost' in '\(ws.plugins)' (its plugins: a, b, c)\n",
            "\(g.stderr)")
    }

    @Test func profile_returnsTheFiguresInForce_flagsIncluded() throws {
        let ws = try Workspace()
        try ws.plugin("p", """
            local p = lifeline.profile()
            lifeline.log.info(p.name .. ' ' .. p.budget .. ' ' .. p.expirationLead .. ' ' .. p.launchLimit .. ' '
              .. p.backgroundLimit .. ' ' .. p.transitionLimit .. ' ' .. p.terminateLimit .. ' '
              .. p.expirationHandlerLimit .. ' ' .. p.taskLimit)
            """)
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--profile", "ios7", "--budget", "12.5", "--scenario", scenario,
            "--report", "-",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let logs = events(try parseReport(r.stdout), "log").compactMap { $0["message"] as? String }
        #expect(logs == ["ios7 12.5 5.0 20.0 5.0 10.0 5.0 1.0 1000"])
    }
}
