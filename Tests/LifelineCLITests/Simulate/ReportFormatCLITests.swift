import Foundation
import Testing

/// The report's version 2 (docs/report.md): log events on the virtual clock, task names on every
/// task event, step events, transfer events that are always recorded, sampled progress.
@Suite struct ReportFormatCLITests {
    private func simulate(_ ws: Workspace, _ scenario: String, _ extra: [String] = []) throws -> (CLI.Result, [String: Any]) {
        let path = try ws.file("s.scenario", scenario)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", path, "--report", "-"] + extra)
        return (r, try parseReport(r.stdout))
    }

    @Test func report_isVersion2_withTheLimitsInForce() throws {
        let ws = try Workspace()
        try ws.plugin("p", "")
        let (r, report) = try simulate(ws, "0s launch\n", ["--budget", "12"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(report["lifeline"] as? Int == 2)
        let limits = try #require(report["limits"] as? [String: Any])
        #expect(limits["budget"] as? Double == 12)
        #expect(limits["taskLimit"] as? Int == 1000)
    }

    @Test func profileFlags_takeDurations_asScenariosWriteThem() throws {
        let ws = try Workspace()
        try ws.plugin("p", "")
        let (r, report) = try simulate(
            ws, "0s launch\n",
            ["--budget", "2m30s", "--launch-limit", "500ms", "--expiration-lead", "7", "--terminate-limit", "1m"])
        #expect(r.status == 0, "\(r.stderr)")
        let limits = try #require(report["limits"] as? [String: Any])
        #expect(limits["budget"] as? Double == 150)
        #expect(limits["launch"] as? Double == 0.5)
        #expect(limits["expirationLead"] as? Double == 7)
        #expect(limits["willTerminate"] as? Double == 60)
    }

    @Test func logLines_areEventsAtTheVirtualTime_andStderrUsesTheSameClock() throws {
        let ws = try Workspace()
        try ws.plugin("p", """
            print("loaded", 1)
            lifeline.on("didEnterBackground", function()
              local id = lifeline.beginBackgroundTask("wait")
              lifeline.after(2.5, function() lifeline.log.warning("late"); lifeline.endBackgroundTask(id) end)
            end)
            """)
        let (r, report) = try simulate(ws, "0s launch\n10s background\n")
        let logs = events(report, "log")
        #expect(logs.count == 2)
        #expect(logs.first?["t"] as? Double == 0)
        #expect(logs.first?["message"] as? String == "loaded\t1")
        #expect(logs.first?["level"] as? String == "info")
        #expect(logs.last?["t"] as? Double == 12.5)
        #expect(logs.last?["level"] as? String == "warning")
        #expect(r.stderr.contains("[    0.000s] info plugin.p: loaded\t1"), "\(r.stderr)")
        #expect(r.stderr.contains("[   12.500s] warning plugin.p: late"), "\(r.stderr)")
    }

    @Test func taskEvents_carryTheTaskName_andOpFinishedOneResult() throws {
        let ws = try Workspace()
        try ws.plugin("p", """
            lifeline.on("didEnterBackground", function()
              local id
              id = lifeline.beginBackgroundTask("slow", function() lifeline.endBackgroundTask(id) end)
            end)
            """)
        let (_, report) = try simulate(ws, "0s launch\n1s background\n")
        #expect(events(report, "taskExpiring").first?["name"] as? String == "slow")
        #expect(events(report, "taskEnded").first?["name"] as? String == "slow")
        #expect(events(report, "taskEnded").first?["expired"] as? Bool == true)
    }

    @Test func steps_withoutANotification_leaveAnEvent() throws {
        let ws = try Workspace()
        try ws.plugin("p", "")
        let (_, report) = try simulate(ws, """
            0s launch
            1s memory-warning
            2s background
            3s memory-warning
            4s kill
            5s launch
            6s background
            7s terminate
            8s launch
            9s force-quit
            """)
        let names = timeline(report).compactMap { $0["event"] as? String }
        #expect(names.filter { $0 == "memoryWarning" }.count == 2)
        #expect(events(report, "memoryWarning").map { $0["dropped"] as? Bool } == [nil, true])
        #expect(events(report, "killed").first?["t"] as? Double == 4)
        #expect(events(report, "endedWhileSuspended").first?["t"] as? Double == 7)
        #expect(events(report, "forceQuit").first?["t"] as? Double == 9)
        // Delivered only while the app runs: one didReceiveMemoryWarning, not two.
        #expect(names.filter { $0 == "didReceiveMemoryWarning" }.count == 1)
    }

    @Test func transfers_progressIsSampledPerSecond_andDidFinishTransferEventsIsAlwaysRecorded() throws {
        let ws = try Workspace()
        // The plugin handles transferDidFinish but not didFinishTransferEvents.
        try ws.plugin("dl", """
            lifeline.on("didEnterBackground", function()
              lifeline.transfers.download{url = "http://127.0.0.1:8080/big.bin", to = "big.bin", id = "big"}
            end)
            lifeline.on("transferDidFinish", function(e) lifeline.log.info("done " .. e.id) end)
            """, toml: "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n")
        let (r, report) = try simulate(ws, """
            0s http GET 127.0.0.1:8080/big.bin -> 200 size=10MB rate=1MB/s
            0s launch
            1s background
            20s foreground
            """)
        #expect(r.status == 0, "\(r.stderr)")
        let progress = events(report, "transferProgress")
        // 10 s of download at ticks of 0.25 s: at most one event per second, and the last byte.
        #expect(progress.count >= 10 && progress.count <= 12, "\(progress.count)")
        #expect(progress.last?["received"] as? Int == 10_000_000)
        #expect(progress.last?["total"] as? Int == 10_000_000)
        let times = progress.compactMap { $0["t"] as? Double }
        for (a, b) in zip(times, times.dropFirst()) where b != times.last { #expect(b - a >= 1) }
        #expect(events(report, "didFinishTransferEvents", plugin: "dl").count == 1)
    }

    @Test func expirationWarning_onlyForATaskThatReallyOutlivesItsHandlers() throws {
        let ws = try Workspace()
        // lifeline.background ends its task on a later turn, once the expired work unwinds: no warning.
        try ws.plugin("bg", """
            lifeline.on("didEnterBackground", function()
              lifeline.background("upload", function() lifeline.sleep(100) end)
            end)
            """)
        // This handler does not end its task: the warning names it.
        try ws.plugin("stubborn", """
            lifeline.on("didEnterBackground", function()
              lifeline.beginBackgroundTask("keep", function() end)
            end)
            """)
        let (r, _) = try simulate(ws, "0s launch\n1s background\n")
        let warnings = r.stderr.split(separator: "\n").filter { $0.contains("still not ended") }
        #expect(warnings.count == 1, "\(r.stderr)")
        #expect(warnings.first?.contains("plugin 'stubborn' task") == true, "\(r.stderr)")
        #expect(warnings.first?.contains("'keep'") == true, "\(r.stderr)")
    }

    @Test func printLoopPastTheCap_isAMemoryErrorInThatPlugin() throws {
        let ws = try Workspace()
        // Every kept log line counts against the cap, so this loop cannot grow the host.
        try ws.plugin("chatty", """
            lifeline.on("didBecomeActive", function()
              local ok, err = pcall(function()
                for i = 1, 10000000 do print(string.rep("x", 200)) end
              end)
              lifeline.log.error("stopped: " .. tostring(err))
            end)
            """, toml: "[limits]\nmemory = \"256KiB\"\n")
        // The report goes to a file: the stdout pipe need not carry a large one beside the log.
        let path = try ws.file("s.scenario", "0s launch\n")
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", path, "--report", ws.path + "/report.json",
        ])
        let report = try parseReport(try String(contentsOfFile: ws.path + "/report.json", encoding: .utf8))
        let logs = events(report, "log", plugin: "chatty")
        #expect(logs.count < 10_000, "\(logs.count)")
        #expect(logs.contains { ($0["message"] as? String)?.contains("not enough memory") == true }, "\(r.stderr.suffix(300))")
    }
}
