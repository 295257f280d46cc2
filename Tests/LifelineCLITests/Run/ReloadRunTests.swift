import Foundation
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Reloading a real `lifeline run` in a subprocess, by SIGHUP and by `lifeline ctl reload`: check
/// first, then a new generation for what changed. Each step waits for the run's own output.
@Suite struct ReloadRunTests {
    /// A plugin that counts its generations in its store, holds a task in the background whose
    /// expiration handler ends it, and says goodbye in willUnload.
    static func sync(_ version: String) -> String {
        """
        local n = (lifeline.store.get("generations") or 0) + 1
        lifeline.store.set("generations", n)
        lifeline.log.info("sync \(version) generation " .. n)
        lifeline.on("didEnterBackground", function()
          local id
          id = lifeline.beginBackgroundTask("upload", function()
            lifeline.log.info("sync \(version) expiring")
            lifeline.endBackgroundTask(id)
          end)
        end)
        lifeline.on("willUnload", function()
          lifeline.log.info("sync \(version) willUnload")
          local ok, err = pcall(function() return lifeline.after(1, function() end) end)
          lifeline.log.info("after in willUnload: " .. tostring(ok) .. " " .. tostring(err))
        end)
        lifeline.on("didBecomeActive", function() lifeline.log.info("sync \(version) active") end)
        """
    }

    final class Reloadable {
        let ws: Workspace
        let state: String
        let report: String
        let live: RunTests.Live

        init() throws {
            ws = try Workspace()
            state = ws.path + "/state"
            report = ws.path + "/report.json"
            try ws.plugin("sync", ReloadRunTests.sync("v1"))
            try ws.plugin("quiet", #"lifeline.on("didBecomeActive", function() lifeline.log.info("quiet active") end)"#)
            live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state, "--report", report])
            #expect(live.stderr.waitFor("sync v1 active"))
        }

        func ctl(_ words: String...) throws -> CLI.Result { try CLI.run(["ctl", "--state-dir", state] + words) }

        /// Reloads by SIGHUP or by ctl; returns ctl's result, or nil for the signal.
        func reload(bySignal: Bool) throws -> CLI.Result? {
            if bySignal {
                live.signal(SIGHUP)
                return nil
            }
            return try ctl("reload")
        }

        func finish() throws -> [String: Any] {
            live.signal(SIGTERM)
            #expect(live.wait() == 0)
            return try parseReport(String(contentsOfFile: report, encoding: .utf8))
        }
    }

    @Test(arguments: [false, true])
    func reload_withASyntaxError_changesNothing_andSaysWhere(bySignal: Bool) throws {
        let run = try Reloadable()
        try run.ws.plugin("sync", "lifeline.on(\"didBecomeActive\", function() end\n")
        let answer = try run.reload(bySignal: bySignal)
        if let answer {
            #expect(answer.status == 65)
            #expect(answer.stderr.contains("error: "))
            #expect(answer.stderr.contains("sync/init.lua:2:"), "\(answer.stderr)")
        }
        let how = bySignal ? "SIGHUP" : "ctl"
        #expect(run.live.stderr.waitFor("-- \(how): reload failed, nothing changed"))
        #expect(run.live.stderr.text().contains("sync/init.lua:2:"))
        // The old generation still runs, untouched: no goodbye, and it still hears events.
        #expect(try run.ctl("resign").status == 0)
        #expect(try run.ctl("activate").status == 0)
        #expect(run.live.stderr.waitFor("sync v1 active", count: 2))
        let report = try run.finish()
        #expect(!run.live.stderr.text().contains("willUnload"))
        let reloads = events(report, "reloaded")
        #expect(reloads.count == 1)
        #expect(reloads.first?["result"] as? String == "failed")
        #expect(reloads.first?["generation"] as? Int == 1)
        #expect(events(report, "unloaded").isEmpty)
    }

    @Test(arguments: [false, true])
    func reload_ofAChangedPlugin_keepsItsStore_andEndsTheOldTaskByItsExpirationHandler(bySignal: Bool) throws {
        let run = try Reloadable()
        #expect(try run.ctl("background").status == 0)
        #expect(run.live.stderr.waitFor("taskBegan plugin=sync"))
        try run.ws.plugin("sync", ReloadRunTests.sync("v2"))
        let answer = try run.reload(bySignal: bySignal)
        if let answer { #expect(answer.status == 0 && answer.stdout == "ok\n", "\(answer.stderr)") }
        let how = bySignal ? "SIGHUP" : "ctl"
        #expect(run.live.stderr.waitFor("-- \(how): reload (generation 2): sync changed, 1 unchanged"))
        #expect(run.live.stderr.waitFor("sync v2 generation 2"))
        let text = run.live.stderr.text()
        #expect(text.contains("sync v1 willUnload"))
        #expect(text.contains("after in willUnload: false"))
        #expect(text.contains("no new work may start"))
        #expect(text.contains("sync v1 expiring"))
        #expect(try run.ctl("foreground").status == 0)
        #expect(run.live.stderr.waitFor("sync v2 active"))
        #expect(run.live.stderr.waitFor("quiet active", count: 2))
        let report = try run.finish()
        let reload = try #require(events(report, "reloaded").first)
        #expect(reload["result"] as? String == "ok")
        #expect(reload["changed"] as? [String] == ["sync"])
        #expect(reload["unchanged"] as? Int == 1)
        // The old generation's task ended by its own handler: expired, and nothing left to end.
        let ended = events(report, "taskEnded").filter { $0["task"] as? Int == 1 }
        #expect(ended.first?["expired"] as? Bool == true)
        #expect(events(report, "unloaded").first?["ended"] as? [Any] != nil)
        #expect((events(report, "unloaded").first?["ended"] as? [Any])?.isEmpty == true)
        // The unchanged plugin kept its state: it never heard willUnload nor loaded again.
        #expect(run.live.stderr.text().components(separatedBy: "v1 active").count - 1 == 1)
    }
}
