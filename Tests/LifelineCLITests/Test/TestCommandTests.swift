import Foundation
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// A plugin that begins a task on background and ends it when it expires, logging why.
private let expiring = """
    lifeline.on("didEnterBackground", function()
      local id
      id = lifeline.beginBackgroundTask("work", function()
        lifeline.log.info("out of time")
        lifeline.endBackgroundTask(id)
      end)
    end)
    """

/// Two plugins, five scenarios: two pass, three fail (an expectation, a plugin error without
/// expect lines, a line that cannot be read).
private func mixedWorkspace() throws -> Workspace {
    let ws = try Workspace()
    try ws.plugin("alpha", expiring)
    try ws.plugin("beta", #"lifeline.on("didEnterBackground", function() error("boom <&> \"x\"") end)"#)
    for dir in ["alpha", "beta"] {
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/\(dir)/scenarios", withIntermediateDirectories: true)
    }
    try ws.file(
        "plugins/alpha/scenarios/pass.scenario",
        """
        0s launch
        2s background
        expect taskBegan plugin=alpha name=work at 2s
        expect taskEnded plugin=alpha expired=true
        expect log plugin=alpha contains "out of time"   # a comment
        expect outcome completed
        """)
    try ws.file(
        "plugins/alpha/scenarios/wrong.scenario",
        """
        0s launch
        2s background
        expect taskEnded plugin=alpha expired=false
        expect no taskExpiring
        """)
    try ws.file("plugins/beta/scenarios/crash.scenario", "0s launch\n2s background\n")
    try ws.file("plugins/beta/scenarios/unread.scenario", "0s launch\nexpect outcome maybe\n")
    try ws.file(
        "plugins/beta/scenarios/uses.scenario",
        """
        uses alpha
        0s launch
        2s background
        expect taskBegan plugin=alpha
        expect pluginError plugin=beta contains "boom"
        """)
    return ws
}

/// stdout without the run times, which vary.
private func withoutTimes(_ text: String) -> String {
    text.replacingOccurrences(of: #" \([0-9.]+ s\)"#, with: "", options: .regularExpression)
}

/// `lifeline test`: every plugin's scenarios, in child processes, in order, with a verdict.
@Suite struct TestCommandTests {
    @Test func test_mixedScenarios_printOneLinePerScenarioInFileOrder_andExit1() throws {
        let ws = try mixedWorkspace()
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 1, "\(r.stderr)")
        let lines = withoutTimes(r.stdout).split(separator: "\n").map(String.init)
        let p = ws.plugins
        let expected: [String] = [
            "ok   alpha/scenarios/pass.scenario",
            "FAIL alpha/scenarios/wrong.scenario: \(p)/alpha/scenarios/wrong.scenario:3: expected taskEnded "
                + "plugin=alpha expired=false, found none; closest: t=27 taskEnded plugin=alpha task=1 name=work "
                + "expired=true (expired differs)",
            // Lua shortens a long chunk name from the left.
            "FAIL beta/scenarios/crash.scenario: plugin error in beta at t=2: …/beta/init.lua:1: boom <&> \"x\"",
            "FAIL beta/scenarios/unread.scenario: \(p)/beta/scenarios/unread.scenario:2: after 'expect outcome' "
                + "write 'completed' or 'terminated'",
            "ok   beta/scenarios/uses.scenario",
            "2 passed, 3 failed",
        ]
        let crash = #/(plugin error in beta at t=2: ).*(/beta/init.lua:1: )/#
        #expect(lines.map { $0.replacing(crash) { $0.output.1 + "…" + $0.output.2 } } == expected)
        // The failures after the first go to stderr, under the scenario's name.
        #expect(
            r.stderr.contains(
                "alpha/scenarios/wrong.scenario, more:\n    \(p)/alpha/scenarios/wrong.scenario:4: expected no "
                    + "taskExpiring, found 1: t=27 taskExpiring plugin=alpha task=1 name=work\n"), "\(r.stderr)")
        #expect(
            r.stdout.range(
                of: #"ok   alpha/scenarios/pass.scenario \([0-9]+\.[0-9]{2} s\)\n"#, options: .regularExpression)
                != nil)
    }

    @Test func test_oneJobAndTheDefault_printTheSameLines() throws {
        let ws = try mixedWorkspace()
        let one = try CLI.run(["test", ws.plugins, "--jobs", "1"])
        let many = try CLI.run(["test", ws.plugins])
        let four = try CLI.run(["test", ws.plugins, "--jobs=4"])
        #expect(one.status == 1 && many.status == 1 && four.status == 1)
        #expect(withoutTimes(one.stdout) == withoutTimes(many.stdout))
        #expect(withoutTimes(one.stdout) == withoutTimes(four.stdout))
    }

    @Test func test_everyScenarioPasses_exit0() throws {
        let ws = try Workspace()
        try ws.plugin("alpha", expiring)
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/alpha/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/alpha/scenarios/a.scenario", "0s launch\n2s background\nexpect taskEnded expired=true\n")
        // No expect lines: passes when nothing was terminated and no plugin raised.
        try ws.file("plugins/alpha/scenarios/b.scenario", "0s launch\n2s background\n")
        // A folder with no scenarios is no test, and no failure.
        try ws.plugin("gamma", "")
        let r = try CLI.run(["test", ws.plugins, "--watchdog-scale", "2"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(
            withoutTimes(r.stdout)
                == "ok   alpha/scenarios/a.scenario\nok   alpha/scenarios/b.scenario\n2 passed, 0 failed\n")
    }

    @Test func test_simulationPastTheTimeout_isKilledAndFails_whileTheOthersPass() throws {
        let ws = try Workspace()
        // Stuck inside one C call (string.find backtracking), where the watchdog cannot stop it;
        // a watchdog scale of 1e-6 puts the launch limit days away, so only --timeout ends it.
        try ws.plugin("stuck", "local s = string.rep('a', 60)\nstring.find(s, string.rep('.-', 20) .. 'b')")
        try ws.plugin("alpha", expiring)
        for dir in ["alpha", "stuck"] {
            try FileManager.default.createDirectory(
                atPath: ws.plugins + "/\(dir)/scenarios", withIntermediateDirectories: true)
            try ws.file("plugins/\(dir)/scenarios/a.scenario", "0s launch\nexpect outcome completed\n")
        }
        let r = try CLI.run(["test", ws.plugins, "--timeout", "3", "--watchdog-scale", "0.000001"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(
            withoutTimes(r.stdout)
                == "ok   alpha/scenarios/a.scenario\n"
                + "FAIL stuck/scenarios/a.scenario: simulate ran longer than --timeout 3 s and was killed\n"
                + "1 passed, 1 failed\n", "\(r.stdout)")
    }

    /// The child's temporary state dir lies where the parent removes it: a simulation killed for
    /// its time limit runs no cleanup of its own, and leaves nothing in $TMPDIR.
    @Test func test_simulationKilledForItsTimeout_leavesNoTemporaryState() throws {
        let ws = try Workspace()
        let tmp = ws.path + "/tmp"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        // The store makes simulate's temporary state dir, then the plugin is stuck in one C call.
        try ws.plugin(
            "stuck",
            "lifeline.store.set('k', 1)\nlocal s = string.rep('a', 60)\nstring.find(s, string.rep('.-', 20) .. 'b')")
        try FileManager.default.createDirectory(atPath: ws.plugins + "/stuck/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/stuck/scenarios/a.scenario", "0s launch\nexpect outcome completed\n")
        let r = try CLI.run(
            ["test", ws.plugins, "--timeout", "3", "--watchdog-scale", "0.000001"], environment: ["TMPDIR": tmp])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stdout.contains("was killed"), "\(r.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp) == [])
    }

    /// A line break in a scenario's file name cannot split its verdict over two lines.
    @Test func test_aFileNameWithALineBreak_staysOneLine() throws {
        let ws = try Workspace()
        try ws.plugin("alpha", expiring)
        try FileManager.default.createDirectory(atPath: ws.plugins + "/alpha/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/alpha/scenarios/a\nok   fake.scenario", "0s launch\nexpect outcome completed\n")
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(withoutTimes(r.stdout) == "ok   alpha/scenarios/a\\nok   fake.scenario\n1 passed, 0 failed\n", "\(r.stdout)")
    }

    @Test func test_usesAPluginTheFolderLacks_failsAtThatLine() throws {
        let ws = try Workspace()
        try ws.plugin("alpha", expiring)
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/alpha/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/alpha/scenarios/a.scenario", "0s launch\n# needs\nuses alpha, ghost\nexpect outcome completed\n")
        let r = try CLI.run(["test", ws.plugins])
        #expect(r.status == 1)
        #expect(
            withoutTimes(r.stdout)
                == "FAIL alpha/scenarios/a.scenario: \(ws.plugins)/alpha/scenarios/a.scenario:3: uses: no plugin named "
                + "'ghost' in '\(ws.plugins)' (its plugins: alpha)\n0 passed, 1 failed\n", "\(r.stdout)")
    }

    @Test func test_defaultFolder_isPlugins() throws {
        let ws = try Workspace()
        try ws.plugin("alpha", expiring)
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/alpha/scenarios", withIntermediateDirectories: true)
        try ws.file("plugins/alpha/scenarios/a.scenario", "0s launch\nexpect outcome completed\n")
        let r = try CLI.run(["test"], in: ws.path)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(withoutTimes(r.stdout) == "ok   alpha/scenarios/a.scenario\n1 passed, 0 failed\n")
    }

    @Test(arguments: [
        (["test", "/nonexistent-lifeline-folder"], Int32(65), "no folder"),
        (["test", "EMPTY"], 65, "no scenarios to test"),
        (["test", "EMPTY", "--jobs", "0"], 64, "--jobs must be at least 1"),
        (["test", "EMPTY", "--watchdog-scale", "0"], 64, "--watchdog-scale"),
        (["test", "EMPTY", "--timeout", "0"], 64, "--timeout must be"),
        (["test", "EMPTY", "--timeout", "nan"], 64, "--timeout must be"),
    ])
    func test_badFolderOrUsage_exitsWithItsCode(_ arguments: [String], _ status: Int32, _ says: String) throws {
        let ws = try Workspace()
        let r = try CLI.run(arguments.map { $0 == "EMPTY" ? ws.plugins : $0 })
        #expect(r.status == status)
        #expect(r.stderr.contains(says), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    #if canImport(FoundationXML) || os(macOS)
        @Test func test_junit_isWellFormedXMLWithOneCasePerScenario() throws {
            let ws = try mixedWorkspace()
            let path = ws.path + "/results.xml"
            let r = try CLI.run(["test", ws.plugins, "--junit", path])
            #expect(r.status == 1)
            let document = try XMLDocument(contentsOf: URL(fileURLWithPath: path))
            let root = try #require(document.rootElement())
            #expect(root.name == "testsuites")
            let suite = try #require(root.elements(forName: "testsuite").first)
            #expect(suite.attribute(forName: "name")?.stringValue == "lifeline")
            #expect(suite.attribute(forName: "tests")?.stringValue == "5")
            #expect(suite.attribute(forName: "failures")?.stringValue == "3")
            let cases = suite.elements(forName: "testcase")
            #expect(
                cases.map { $0.attribute(forName: "classname")?.stringValue ?? "" } == [
                    "alpha", "alpha", "beta", "beta", "beta",
                ])
            #expect(
                cases.map { $0.attribute(forName: "name")?.stringValue ?? "" } == [
                    "pass", "wrong", "crash", "unread", "uses",
                ])
            #expect(cases.allSatisfy { Double($0.attribute(forName: "time")?.stringValue ?? "") != nil })
            let failures = cases.map { $0.elements(forName: "failure").first }
            #expect(failures.map { $0 != nil } == [false, true, true, true, false])
            // Escaped on the way in, read back as written: quotes, <, & and line breaks.
            let crash = try #require(failures[2])
            #expect(crash.attribute(forName: "message")?.stringValue?.hasSuffix(#"boom <&> "x""#) == true)
            let wrong = try #require(failures[1])
            let details = try #require(wrong.stringValue)
            #expect(details.split(separator: "\n").count == 2)
            #expect(details.contains("expected no taskExpiring"))
            // The plugins' log of a failed run, for whoever reads the CI page.
            #expect(cases[1].elements(forName: "system-err").first?.stringValue?.contains("out of time") == true)
        }
    #endif

    @Test func test_htmlAndTrace_drawEveryRun() throws {
        let ws = try mixedWorkspace()
        let html = ws.path + "/runs.html"
        let trace = ws.path + "/runs.json"
        let r = try CLI.run(["test", ws.plugins, "--html", html, "--trace", trace])
        #expect(r.status == 1)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("<html"))
        #expect(page.contains("wrong.scenario"))
        let traceData = try Data(contentsOf: URL(fileURLWithPath: trace))
        #expect((try? JSONSerialization.jsonObject(with: traceData)) != nil)
    }
}
