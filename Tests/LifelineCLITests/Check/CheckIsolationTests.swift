import Foundation
import Testing

// `lifeline check` reports every plugin, each with its own verdict, even when one is stuck where
// the watchdog cannot stop it; and no command leaves a temporary state dir behind, whatever way
// it ends.

/// Lua that spends practically forever inside one C function (string.find backtracking), where
/// the watchdog's hook never runs and no memory is allocated.
private let stuckInC = "local s = string.rep('a', 60)\nstring.find(s, string.rep('.-', 20) .. 'b')"

/// A fresh, empty folder for TMPDIR, removed afterwards.
private final class TemporaryRoot {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-tmpdir-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var environment: [String: String] { ["TMPDIR": path] }
    var contents: [String] { (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? ["(unreadable)"] }
}

@Suite struct CheckIsolationTests {
    @Test func check_middlePluginStuckInOneCCall_allThreeAreReported_exits65() throws {
        let ws = try Workspace()
        try ws.plugin("a-first", "lifeline.on('didBecomeActive', function() end)")
        try ws.plugin("b-stuck", stuckInC)
        try ws.plugin("c-last", "lifeline.on('didBecomeActive', function() end)")
        let tmp = try TemporaryRoot()
        let r = try CLI.run(["check", "--plugins", ws.plugins, "--launch-limit", "0.3"], environment: tmp.environment)
        #expect(r.status == 65, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(r.stdout)")
        #expect(lines.first == "ok   a-first (lua)")
        #expect(
            lines.dropFirst().first
                == "FAIL b-stuck (lua): plugin 'b-stuck' did not finish loading within the launch limit (0.3 s) "
                + "and could not be stopped (stuck inside one C call, where the watchdog's stop cannot reach)",
            "\(r.stdout)")
        #expect(lines.dropFirst(2).first == "ok   c-last (lua)")
        #expect(r.stderr.contains("1 plugin failed to load"), "\(r.stderr)")
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }

    @Test func check_twoStuckPlugins_eachGetsItsOwnVerdict() throws {
        let ws = try Workspace()
        try ws.plugin("a-stuck", stuckInC)
        try ws.plugin("b-raises", "error('b cannot load')")
        try ws.plugin("c-stuck", stuckInC)
        let tmp = try TemporaryRoot()
        let r = try CLI.run(["check", "--plugins", ws.plugins, "--launch-limit", "0.2"], environment: tmp.environment)
        #expect(r.status == 65, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("FAIL a-stuck (lua): ") && $0.contains("could not be stopped") }.count == 1)
        #expect(lines.filter { $0.hasPrefix("FAIL b-raises (lua): ") && $0.contains("b cannot load") }.count == 1)
        #expect(lines.filter { $0.hasPrefix("FAIL c-stuck (lua): ") && $0.contains("could not be stopped") }.count == 1)
        #expect(r.stderr.contains("3 plugins failed to load"), "\(r.stderr)")
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }

    @Test func check_everyPluginLoads_leavesNoTemporaryFolder() throws {
        let ws = try Workspace()
        try ws.plugin("writes", "lifeline.store.set('k', 'v')")
        let tmp = try TemporaryRoot()
        let r = try CLI.run(["check", "--plugins", ws.plugins], environment: tmp.environment)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("ok   writes (lua)"))
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }

    @Test func check_pluginNamedLikeAFlag_isCheckedInItsOwnProcess() throws {
        // The plugin's process gets the name as an argument: "-x" must stay a name.
        let ws = try Workspace()
        try ws.plugin("-x", "-- fine")
        let r = try CLI.run(["check", "--plugins", ws.plugins])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("ok   -x (lua)"), "\(r.stdout)")
    }

    @Test func check_endedBySIGTERM_endsThePluginsProcess_andLeavesNoTemporaryFolder() throws {
        let ws = try Workspace()
        try ws.plugin("stuck", stuckInC)
        let tmp = try TemporaryRoot()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = ["check", "--plugins", ws.plugins, "--launch-limit", "60"]
        process.environment = ProcessInfo.processInfo.environment.merging(tmp.environment) { $1 }
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        try process.run()
        // The check has started the plugin's process once its state dir exists.
        let deadline = Date().addingTimeInterval(20)
        func started() -> Bool {
            tmp.contents.contains { name in
                (try? FileManager.default.contentsOfDirectory(atPath: tmp.path + "/" + name))?.isEmpty == false
            }
        }
        while !started() && Date() < deadline { usleep(10_000) }
        try #require(started(), "the check never started the plugin's process")
        process.terminate()  // SIGTERM
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 128 + SIGTERM)
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }

    @Test func simulate_handlerStuckInOneCCall_watchdogExit_leavesNoTemporaryStateDir() throws {
        let ws = try Workspace()
        try ws.plugin("stuck", "lifeline.on('didEnterBackground', function()\n\(stuckInC)\nend)")
        let s = try ws.file("s.scenario", "0s launch\n1s background\n")
        let tmp = try TemporaryRoot()
        let r = try CLI.run(
            ["simulate", "--plugins", ws.plugins, "--scenario", s, "--background-limit", "0.2", "--report", "-"],
            environment: tmp.environment)
        #expect(r.status == 1, "\(r.stderr)")
        let report = try parseReport(r.stdout)
        #expect((report["termination"] as? [String: Any])?["kind"] as? String == "watchdog")
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }

    @Test func simulate_pluginStuckInOneCCallWhileLoading_exits65_andLeavesNoTemporaryStateDir() throws {
        let ws = try Workspace()
        try ws.plugin("stuck", stuckInC)
        let s = try ws.file("s.scenario", "0s launch\n")
        let tmp = try TemporaryRoot()
        let r = try CLI.run(
            ["simulate", "--plugins", ws.plugins, "--scenario", s, "--launch-limit", "0.2"], environment: tmp.environment)
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains("could not be stopped"), "\(r.stderr)")
        #expect(tmp.contents.isEmpty, "left behind: \(tmp.contents)")
    }
}
