import Foundation
import Testing

/// `lifeline run` driven by real signals in a subprocess (SPEC 2.5).
@Suite struct RunTests {
    final class Live {
        let process = Process()
        let stderr: Captured
        let stdout: Captured

        /// - Parameters:
        ///   - environment: variables set for the run, over this process's own.
        ///   - unset: variables of this process's the run does not get.
        init(_ arguments: [String], environment: [String: String] = [:], unset: [String] = []) throws {
            process.executableURL = URL(fileURLWithPath: CLI.binary)
            process.arguments = ["run"] + arguments
            if !environment.isEmpty || !unset.isEmpty {
                var merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
                for name in unset { merged.removeValue(forKey: name) }
                process.environment = merged
            }
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            stdout = Captured(out)
            stderr = Captured(err)
            try process.run()
        }

        func signal(_ signo: Int32) { kill(process.processIdentifier, signo) }

        /// Waits for the process to end, killing it after `timeout` so a test cannot hang.
        func wait(timeout: TimeInterval = 20) -> Int32 {
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            return process.terminationStatus
        }

        /// A test that stopped early (a failed `#require`) leaves no run behind.
        deinit { if process.isRunning { process.terminate() } }
    }

    @Test func run_signalsDriveBackgroundForegroundAndTerminate() throws {
        let ws = try Workspace()
        try ws.plugin("saver", """
            lifeline.on("didEnterBackground", function()
              local id = lifeline.beginBackgroundTask("save")
              lifeline.after(0.2, function() lifeline.endBackgroundTask(id) end)
            end)
            """)
        let live = try Live(["--plugins", ws.plugins, "--state-dir", ws.path + "/state"])
        #expect(live.stderr.waitFor("didBecomeActive"))
        live.signal(SIGUSR1)
        #expect(live.stderr.waitFor("didEnterBackground"))
        #expect(live.stderr.waitFor("taskEnded plugin=saver"))
        #expect(live.stderr.waitFor("suspended"))
        live.signal(SIGUSR2)
        #expect(live.stderr.waitFor("willEnterForeground"))
        #expect(live.stderr.waitFor("didBecomeActive", count: 2))
        live.signal(SIGTERM)
        #expect(live.wait() == 0)
        #expect(live.stderr.text().contains("willTerminate"))
    }

    @Test func run_runawayHandler_isTerminatedByTheWatchdog_withACrashReport() throws {
        let ws = try Workspace()
        try ws.plugin("spinner", """
            lifeline.on("didEnterBackground", function()
              while true do end
            end)
            """)
        let state = ws.path + "/state"
        let live = try Live(["--plugins", ws.plugins, "--state-dir", state, "--background-limit", "0.3"])
        #expect(live.stderr.waitFor("didBecomeActive"))
        live.signal(SIGUSR1)
        #expect(live.wait() == 1)
        let reports = try FileManager.default.contentsOfDirectory(atPath: state + "/reports")
        #expect(reports.count == 1)
        let data = try Data(contentsOf: URL(fileURLWithPath: state + "/reports/" + reports[0]))
        let crash = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(crash["kind"] as? String == "watchdog")
        #expect(crash["code"] as? String == "0x8badf00d")
        #expect(crash["plugin"] as? String == "spinner")
        #expect((crash["traceback"] as? String)?.contains("init.lua:2") == true)
        #expect(live.stderr.text().contains("crash report written"))
    }

    @Test func run_firstInterrupt_terminates() throws {
        let ws = try Workspace()
        try ws.plugin("goodbye", """
            lifeline.on("willTerminate", function() print("saying goodbye") end)
            """)
        let live = try Live(["--plugins", ws.plugins, "--state-dir", ws.path + "/state"])
        #expect(live.stderr.waitFor("didBecomeActive"))
        live.signal(SIGINT)
        #expect(live.wait() == 0)
        #expect(live.stderr.text().contains("saying goodbye"))
    }

    @Test func run_secondInterrupt_killsAtOnce_evenDuringASlowHandler() throws {
        let ws = try Workspace()
        try ws.plugin("slow-goodbye", """
            lifeline.on("willTerminate", function()
              print("goodbye started")
              local t0 = os.clock()
              while os.clock() - t0 < 4 do end  -- 4 s of work, under the 5 s limit
              print("goodbye finished")
            end)
            """)
        let live = try Live(["--plugins", ws.plugins, "--state-dir", ws.path + "/state"])
        #expect(live.stderr.waitFor("didBecomeActive"))
        live.signal(SIGINT)
        #expect(live.stderr.waitFor("goodbye started"))
        let start = Date()
        live.signal(SIGINT)
        _ = live.wait()
        #expect(Date().timeIntervalSince(start) < 2.5, "the second SIGINT did not end the app at once")
        #expect(!live.stderr.text().contains("goodbye finished"))
        #expect(live.stderr.text().contains("killed"))
    }

    @Test func run_badPluginIsSkipped_andTheOthersRun() throws {
        let ws = try Workspace()
        try ws.plugin("broken", "this is not lua")
        try ws.plugin("fine", "lifeline.on('didBecomeActive', function() print('fine is running') end)")
        let live = try Live(["--plugins", ws.plugins, "--state-dir", ws.path + "/state"])
        #expect(live.stderr.waitFor("fine is running"))
        live.signal(SIGTERM)
        _ = live.wait()
        let err = live.stderr.text()
        #expect(err.contains("plugin 'broken' skipped"))
        #expect(err.contains("init.lua:1"))
    }

    /// When lifeline.store.set returns, the value survives a SIGKILL of the host.
    @Test func run_storeSurvivesSIGKILL_everyValueSetBeforeTheKillIsThere() throws {
        let ws = try Workspace()
        try ws.plugin("counter", """
            local s = lifeline.store
            print("found " .. tostring(s.get("n")))
            local n = 0
            local function step()
              n = n + 1
              s.set("n", n)
              print("set " .. n)
              lifeline.after(0.001, step)
            end
            lifeline.after(0.001, step)
            """)
        let state = ws.path + "/state"
        let first = try Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(first.stderr.waitFor("set 40"))
        first.signal(SIGKILL)
        _ = first.wait()
        let lastSet = first.stderr.text(waitingForEOF: true).split(separator: "\n")
            .compactMap { line in line.range(of: "plugin.counter: set ").map { Int(line[$0.upperBound...]) ?? 0 } }.max() ?? 0
        #expect(lastSet >= 40)
        let second = try Live(["--plugins", ws.plugins, "--state-dir", state])
        #expect(second.stderr.waitFor("found "))
        second.signal(SIGTERM)
        _ = second.wait()
        let found = second.stderr.text(waitingForEOF: true).split(separator: "\n")
            .compactMap { line in line.range(of: "plugin.counter: found ").map { Int(line[$0.upperBound...]) ?? -1 } }.first ?? -1
        #expect(found >= lastSet, "stored \(found), but \(lastSet) was set before the kill")
    }
}
