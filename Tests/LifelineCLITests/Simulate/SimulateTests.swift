import Foundation
import Testing

/// Runs one bundled example plugin, alone, through one of its scenarios; expects exit 0.
private func simulateExample(
    _ plugin: String, _ scenario: String, extra: [String] = []
) throws -> (CLI.Result, [String: Any]) {
    let ws = try Workspace()
    try ws.linkExample(plugin)
    let r = try CLI.run(
        ["simulate", "--plugins", ws.plugins, "--scenario",
         CLI.packageRoot + "/plugins/\(plugin)/scenarios/\(scenario).scenario", "--report", "-"] + extra)
    #expect(r.status == 0, "\(r.stderr)")
    return (r, try parseReport(r.stdout))
}

/// `lifeline simulate` end to end: determinism, the bundled examples, the watchdog.
@Suite struct SimulateTests {
    @Test func simulate_sameInputsTwice_giveByteIdenticalReports() throws {
        let ws = try Workspace()
        for name in ["save-changes", "downloads", "cleanup", "sync"] { try ws.linkExample(name) }
        let s = CLI.packageRoot + "/plugins/sync/scenarios/expiration.scenario"
        let a = ws.path + "/a.json", b = ws.path + "/b.json"
        let r1 = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", a])
        let r2 = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", b])
        #expect(r1.status == r2.status)
        let bytesA = try Data(contentsOf: URL(fileURLWithPath: a))
        let bytesB = try Data(contentsOf: URL(fileURLWithPath: b))
        #expect(bytesA.count > 500)
        #expect(bytesA == bytesB)
    }

    @Test func example_saveChanges_endsItsTaskOnSuccessAndFailure() throws {
        let (r, report) = try simulateExample("save-changes", "save")
        #expect(events(report, "taskBegan", plugin: "save-changes").count == 2)
        let ended = events(report, "taskEnded", plugin: "save-changes")
        #expect(ended.count == 2)
        #expect(ended.allSatisfy { $0["expired"] as? Bool == false })
        // The first save takes 2 s; the second batch fails at once.
        #expect(ended.map { $0["t"] as? Double } == [7, 30])
        #expect(r.stderr.contains("saved 3 edits"))
        #expect(r.stderr.contains("is corrupt"))
        #expect(events(report, "suspended").count == 2)
        #expect(events(report, "pluginError").isEmpty)
    }

    /// session-end's four scenarios: in every one its task ends and the app suspends, with no termination.
    @Test(arguments: [
        ("success", "status", "200", false, "session-end: reported"),
        ("server-error", "status", "500", false, "the server answered 500"),
        ("hang", "error", "expired", true, "gave up: background task"),
        ("refuse", "error", "connect", false, "request failed (connect)"),
    ])
    func example_sessionEnd_endsItsTaskOnEveryPath(
        _ scenario: String, _ field: String, _ value: String, _ expired: Bool, _ log: String
    ) throws {
        let (r, report) = try simulateExample("session-end", scenario)
        let requests = events(report, "httpRequest", plugin: "session-end")
        #expect(requests.count == 1)
        #expect(requests.first?["method"] as? String == "POST")
        #expect(requests.first?["url"] as? String == "http://127.0.0.1:8080/session/end")
        let response = try #require(events(report, "httpResponse", plugin: "session-end").first)
        #expect("\(response[field] ?? "none")" == value)
        let ended = events(report, "taskEnded", plugin: "session-end")
        #expect(ended.count == 1)
        #expect(ended.first?["expired"] as? Bool == expired)
        #expect(report["termination"] is NSNull)
        #expect(timeline(report).last?["event"] as? String == "suspended")
        #expect(r.stderr.contains(log), "\(r.stderr)")
    }

    /// offline-sync, relaunch: killed mid-download, relaunched in the background by the host when
    /// the download ends, handles the event with a normal budget, suspends; launch brings it back.
    @Test func example_offlineSync_isRelaunchedInTheBackgroundToHearItsDownload() throws {
        let (r, report) = try simulateExample("offline-sync", "relaunch")
        #expect(events(report, "transferEnded", plugin: "offline-sync").map { $0["t"] as? Double } == [30])
        #expect(events(report, "relaunch").map { $0["t"] as? Double } == [30])
        let heard = try #require(events(report, "transferDidFinish", plugin: "offline-sync").first)
        #expect(heard["t"] as? Double == 30)
        #expect(heard["transfer"] as? String == "catalogue")
        #expect(events(report, "didFinishTransferEvents", plugin: "offline-sync").count == 1)
        let names = timeline(report).map { $0["event"] as? String ?? "" }
        let relaunch = try #require(names.firstIndex(of: "relaunch"))
        #expect(names[relaunch...].contains("suspended"))
        #expect(events(report, "didBecomeActive").map { $0["t"] as? Double } == [0, 120])
        #expect(report["termination"] is NSNull)
        #expect(r.stderr.contains("saved 1 pending change(s); download catalogue under way"), "\(r.stderr)")
        #expect(r.stderr.contains("download catalogue finished; heard in state background"))
        #expect(r.stderr.contains("launched in state inactive with 0 pending change(s)"))
    }

    /// offline-sync, force-quit: the download is cancelled with userForceQuit and heard at the next launch.
    @Test func example_offlineSync_forceQuitCancelsTheDownload() throws {
        let (r, report) = try simulateExample("offline-sync", "force-quit")
        let ended = try #require(events(report, "transferEnded", plugin: "offline-sync").first)
        #expect(ended["t"] as? Double == 10)
        #expect(ended["reason"] as? String == "userForceQuit")
        #expect(events(report, "relaunch").isEmpty)
        #expect(events(report, "transferDidFail", plugin: "offline-sync").map { $0["t"] as? Double } == [60])
        #expect(r.stderr.contains("download catalogue failed: userForceQuit"), "\(r.stderr)")
    }

    /// sync, deduplication: the refresh asked for again while one is pending is dropped.
    @Test func example_sync_dropsRefreshesWhileOneIsPending() throws {
        let (r, report) = try simulateExample("sync", "dedupe")
        #expect(events(report, "opDropped", plugin: "sync").map { $0["t"] as? Double } == [0, 1, 1])
        #expect(events(report, "opStarted", plugin: "sync").count == 1)
        #expect(events(report, "opFinished", plugin: "sync").map { $0["t"] as? Double } == [2])
        #expect(r.stderr.contains("dropped: one is pending"))
    }

    /// sync, ordering: three dependent uploads answer in 3 s, 0.5 s and 1 s, yet run one after another.
    @Test func example_sync_runsTheDependentUploadsInOrder() throws {
        let (r, report) = try simulateExample("sync", "ordering")
        let started = events(report, "opStarted", plugin: "sync").filter { ($0["name"] as? String)?.hasPrefix("upload") == true }
        let finished = events(report, "opFinished", plugin: "sync").filter { ($0["name"] as? String)?.hasPrefix("upload") == true }
        #expect(started.map { $0["name"] as? String } == ["upload-begin", "upload-items", "upload-commit"])
        #expect(started.map { $0["t"] as? Double } == [2, 5, 5.5])
        #expect(finished.map { $0["t"] as? Double } == [5, 5.5, 6.5])
        #expect(r.stderr.contains("batch 7 committed"), "\(r.stderr)")
        #expect(r.stderr.contains("uploads done"))
        // One task for the uploads queue, whatever the number of operations.
        let queueTasks = events(report, "taskBegan", plugin: "sync").filter { $0["name"] as? String == "queue sync.uploads" }
        #expect(queueTasks.count == 1)
    }

    /// sync, timeout: the refresh server hangs; after 5 s the operation times out and onTimeout logs.
    @Test func example_sync_refreshTimesOut() throws {
        let (r, report) = try simulateExample("sync", "timeout")
        let finished = try #require(events(report, "opFinished", plugin: "sync").first)
        #expect(finished["t"] as? Double == 5)
        #expect(finished["result"] as? String == "timedOut")
        #expect(r.stderr.contains("timed out"))
    }

    /// sync, expiry: the slow upload is stopped at the expiration, the commit waits, the app
    /// suspends without termination, and the commit runs back in the foreground.
    @Test func example_sync_expiresCleanlyThenResumesInTheForeground() throws {
        let (r, report) = try simulateExample("sync", "expiration")
        #expect(report["termination"] is NSNull)
        let items = try #require(events(report, "opFinished", plugin: "sync").first { $0["name"] as? String == "upload-items" })
        #expect(items["result"] as? String == "expired")
        #expect(items["t"] as? Double == 27)
        #expect(events(report, "suspended").map { $0["t"] as? Double } == [27])
        let commit = try #require(events(report, "opStarted", plugin: "sync").first { $0["name"] as? String == "upload-commit" })
        #expect(commit["t"] as? Double == 60)
        #expect(r.stderr.contains("batch 7 committed"))
    }

    @Test func example_downloads_expiresCleanlyThenDrains() throws {
        let (r, report) = try simulateExample("downloads", "drain")
        // No task before the app enters the background.
        let began = events(report, "taskBegan", plugin: "downloads")
        #expect(began.map { $0["t"] as? Double } == [1, 45])
        let ended = events(report, "taskEnded", plugin: "downloads")
        #expect(ended.count == 2)
        #expect(ended.first?["expired"] as? Bool == true)
        #expect(ended.first?["t"] as? Double == 26)
        #expect(ended.last?["expired"] as? Bool == false)
        #expect(report["outcome"] as? String == "completed")
        #expect(r.stderr.contains("downloaded file-9"))
    }

    @Test func example_cleanup_returnsAtOnceAndFinishesThroughItsTask() throws {
        let (r, report) = try simulateExample("cleanup", "cleanup", extra: ["--background-limit", "2"])
        let ended = events(report, "taskEnded", plugin: "cleanup")
        #expect(ended.count == 1)
        #expect(ended.first?["expired"] as? Bool == false)
        // The first step runs on the next timer tick (1 ms), then four more every 0.5 s.
        #expect(ended.first?["t"] as? Double == 5.001)
        #expect(r.stderr.contains("cache pruned"))
        let suspended = events(report, "suspended").first
        #expect(suspended?["t"] as? Double == 5.001)
    }

    @Test func example_heartbeatSwiftPlugin_flushesInsideATask() throws {
        // The folder's plugin.toml asks for the compiled-in plugin; --only takes it alone.
        let r = try CLI.run([
            "simulate", "--plugins", CLI.packageRoot + "/plugins", "--only", "heartbeat-swift", "--scenario",
            CLI.packageRoot + "/plugins/heartbeat-swift/scenarios/heartbeat.scenario", "--report", "-",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try parseReport(r.stdout)
        let plugins = report["plugins"] as? [[String: Any]] ?? []
        #expect(plugins.contains { $0["name"] as? String == "heartbeat" && $0["kind"] as? String == "swift" })
        let ended = events(report, "taskEnded", plugin: "heartbeat")
        #expect(ended.map { $0["t"] as? Double } == [3])
        #expect(events(report, "suspended").first?["t"] as? Double == 3)
    }

    @Test func runawayLuaHandler_isPreempted_evenThroughPcall() throws {
        let ws = try Workspace()
        try ws.plugin("spinner", """
            lifeline.on("didEnterBackground", function()
              for i = 1, 100 do pcall(function() while true do end end) end
              lifeline.beginBackgroundTask("escaped the watchdog")
            end)
            """)
        let s = try ws.file("s.scenario", "0s launch\n2s background\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-", "--watchdog-scale", "25",
        ])
        #expect(r.status == 1)
        let report = try parseReport(r.stdout)
        let termination = try #require(report["termination"] as? [String: Any])
        #expect(termination["kind"] as? String == "watchdog")
        #expect(termination["code"] as? String == "0x8badf00d")
        #expect(termination["plugin"] as? String == "spinner")
        #expect(termination["t"] as? Double == 2)
        #expect((termination["traceback"] as? String)?.contains("init.lua:2") == true)
        #expect(events(report, "taskBegan", plugin: "spinner").isEmpty)
        #expect(events(report, "watchdog", plugin: "spinner").count == 1)
    }

    @Test func until_stopsASimulationThatNeverSettles() throws {
        let ws = try Workspace()
        try ws.plugin("ticker", """
            local function tick() lifeline.after(1, tick) end
            tick()
            """)
        let s = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-", "--until", "90s"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try parseReport(r.stdout)["outcome"] as? String == "completed")
    }

    @Test func profiles_setTheBudget() throws {
        let ws = try Workspace()
        try ws.plugin("leaky", "lifeline.on('didEnterBackground', function() lifeline.beginBackgroundTask('x') end)")
        let s = try ws.file("s.scenario", "0s launch\n10s background\n")
        for (profile, end) in [("ios13", 40.0), ("ios7", 190.0), ("ios6", 610.0)] {
            let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-", "--profile", profile])
            let report = try parseReport(r.stdout)
            #expect(report["profile"] as? String == profile)
            #expect((report["termination"] as? [String: Any])?["t"] as? Double == end, "\(profile)")
        }
    }
}
