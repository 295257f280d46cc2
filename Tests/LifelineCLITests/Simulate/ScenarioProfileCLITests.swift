import Foundation
import Testing

// A scenario's `profile` and `limit` lines through the CLI: the iOS 6 / iOS 7 comparison of the
// Xamarin guide (600 s of background time, then 180 s) as two scenarios that pass, and the flags
// that win over the lines.

/// An upload of five minutes, begun when the app enters the background: iOS 6's ten minutes
/// see it through, iOS 7's three do not, and its expiration handler gives up cleanly.
private let upload = """
    local id, done = 0, false
    lifeline.on("didEnterBackground", function()
      id = lifeline.beginBackgroundTask("upload", function()
        lifeline.log.warning("out of time, the upload waits for the next launch")
        done = true
        lifeline.endBackgroundTask(id)
      end)
      lifeline.after(300, function()
        if done then return end
        lifeline.log.info("uploaded")
        lifeline.endBackgroundTask(id)
      end)
    end)
    """

private let ios6 = """
    # iOS 6 gave an app ten minutes in the background: the five-minute upload finishes.
    profile ios6
    0s    launch
    10s   background

    expect taskEnded plugin=upload name=upload expired=false at 5m10s
    expect log plugin=upload contains "uploaded"
    expect no taskExpiring
    expect outcome completed
    """

private let ios7 = """
    # iOS 7 cut it to three minutes: the expiration handler is called 5 s before they are out.
    profile ios7
    0s    launch
    10s   background

    expect taskExpiring plugin=upload at 3m5s
    expect taskEnded plugin=upload name=upload expired=true at 3m5s
    expect no log plugin=upload contains "uploaded"
    expect outcome completed
    """

private func uploadWorkspace() throws -> Workspace {
    let ws = try Workspace()
    try ws.plugin("upload", upload)
    try FileManager.default.createDirectory(atPath: ws.plugins + "/upload/scenarios", withIntermediateDirectories: true)
    try ws.file("plugins/upload/scenarios/ios6.scenario", ios6)
    try ws.file("plugins/upload/scenarios/ios7.scenario", ios7)
    return ws
}

@Suite struct ScenarioProfileCLITests {
    @Test func theIOS6AndIOS7Scenarios_bothPass_eachUnderItsOwnProfile() throws {
        let ws = try uploadWorkspace()
        let r = try CLI.run(["test", ws.plugins, "--jobs", "1"])
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        let lines = r.stdout.replacingOccurrences(of: #" \([0-9.]+ s\)"#, with: "", options: .regularExpression)
            .split(separator: "\n").map(String.init)
        #expect(lines == ["ok   upload/scenarios/ios6.scenario", "ok   upload/scenarios/ios7.scenario", "2 passed, 0 failed"])
    }

    @Test func theReport_namesTheScenariosProfile_andItsFigures() throws {
        let ws = try uploadWorkspace()
        for (name, budget) in [("ios6", 600), ("ios7", 180)] {
            let r = try CLI.run([
                "simulate", "--plugins", ws.plugins, "--scenario", ws.plugins + "/upload/scenarios/\(name).scenario",
                "--report", "-",
            ])
            #expect(r.status == 0, "\(r.stderr)")
            let report = try parseReport(r.stdout)
            #expect(report["profile"] as? String == name)
            #expect((report["limits"] as? [String: Any])?["budget"] as? Int == budget)
        }
    }

    @Test func theProfileFlag_winsOverTheProfileLine() throws {
        let ws = try uploadWorkspace()
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", ws.plugins + "/upload/scenarios/ios6.scenario",
            "--profile", "ios7",
        ])
        #expect(r.status == 1)
        #expect(r.stderr.contains("ios6.scenario:6: expected taskEnded plugin=upload name=upload expired=false at 5m10s"), "\(r.stderr)")
    }

    @Test func aFigureFlag_winsOverALimitLine_whichWinsOverTheProfile() throws {
        let ws = try uploadWorkspace()
        let scenario = ws.plugins + "/upload/scenarios/limited.scenario"
        try ws.file(
            "plugins/upload/scenarios/limited.scenario",
            "profile ios7\nlimit budget 10m\nlimit expiration-lead 20s\n0s launch\n10s background\n")
        let lined = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-"])
        var limits = try #require(try parseReport(lined.stdout)["limits"] as? [String: Any])
        #expect(limits["budget"] as? Int == 600)
        #expect(limits["expirationLead"] as? Int == 20)
        let flagged = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-", "--budget", "2m",
        ])
        limits = try #require(try parseReport(flagged.stdout)["limits"] as? [String: Any])
        #expect(limits["budget"] as? Int == 120)
        #expect(limits["expirationLead"] as? Int == 20)
    }

    @Test func aBadProfileOrLimitLine_isExit65WithFileAndLine_inSimulateAndTest() throws {
        let ws = try uploadWorkspace()
        let path = try ws.file("plugins/upload/scenarios/typo.scenario", "profile ios7\nlimit budgit 10m\n0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", path])
        #expect(r.status == 65)
        #expect(r.stderr.contains("lifeline: \(path):2: unknown figure 'budgit'; the figures are: budget,"), "\(r.stderr)")
        let t = try CLI.run(["test", ws.plugins, "--filter", "typo"])
        #expect(t.status == 1)
        #expect(t.stdout.contains("FAIL upload/scenarios/typo.scenario: \(path):2: unknown figure 'budgit'"), "\(t.stdout)")
    }
}
