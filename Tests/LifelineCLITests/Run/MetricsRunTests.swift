import Foundation
import LifelineTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `lifeline run --metrics`: the real binary serving /metrics on 127.0.0.1, scraped over a plain
/// socket while a plugin holds a background task.
@Suite struct MetricsRunTests {
    @Test func run_metrics_servesTheBackgroundTasksAPluginHolds() throws {
        let ws = try Workspace()
        try ws.plugin("keeper", """
            lifeline.on("didEnterBackground", function()
              lifeline.beginBackgroundTask("hold")
            end)
            """)
        let live = try RunTests.Live([
            "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--metrics", "127.0.0.1:0",
        ])
        defer { if live.process.isRunning { live.process.terminate() } }
        #expect(live.stderr.waitFor("didBecomeActive"))
        let port = try #require(Self.port(in: live.stderr.text()), "\(live.stderr.text())")
        var page = try Self.scrape(port)
        #expect(Self.value(page, #"lifeline_app_state{state="active"}"#) == 1)
        #expect(Self.value(page, #"lifeline_background_tasks{plugin="keeper"}"#) == 0)
        #expect(Self.value(page, #"lifeline_build_info{version="#) == 1)
        #expect(Self.value(page, #"lifeline_plugin_errors_total{plugin="keeper"}"#) == 0)
        live.signal(SIGUSR1)
        #expect(live.stderr.waitFor("taskBegan plugin=keeper"))
        page = try Self.scrape(port)
        #expect(Self.value(page, #"lifeline_background_tasks{plugin="keeper"}"#) == 1, "\(page)")
        #expect(Self.value(page, #"lifeline_app_state{state="background"}"#) == 1)
        let remaining = try #require(Self.value(page, "lifeline_background_time_remaining_seconds "))
        #expect(remaining > 0 && remaining <= 30)
        #expect(Self.value(page, #"lifeline_handler_calls_total{plugin="keeper",event="didEnterBackground"}"#) == 1)
        #expect(try httpRequest(port: port, path: "/").status == 404)
        live.signal(SIGTERM)
        #expect(live.wait() == 0)
    }

    @Test func run_metrics_afterAWatchdogKill_theNextRunOnTheStateDirCountsIt() throws {
        // The watchdog's termination ends its run before any scrape could see it; a service
        // manager starts the host again on the same state dir, whose page counts it.
        let ws = try Workspace()
        try ws.plugin("hog", """
            lifeline.on("didEnterBackground", function()
              local t = os.clock(); while os.clock() - t < 30 do end
            end)
            """)
        let state = ws.path + "/state"
        let first = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state, "--background-limit", "1"])
        #expect(first.stderr.waitFor("didBecomeActive"))
        // By ctl, not SIGUSR1: a signal sent this early can land before the run listens for it.
        _ = try CLI.run(["ctl", "--state-dir", state, "background"])
        #expect(first.wait(timeout: 60) == 1, "\(first.stderr.text())")
        #expect(first.stderr.text().contains("terminated kind=watchdog"))
        let second = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", state, "--metrics", "127.0.0.1:0"])
        #expect(second.stderr.waitFor("didBecomeActive"))
        let port = try #require(Self.port(in: second.stderr.text()), "\(second.stderr.text())")
        let page = try Self.scrape(port)
        #expect(Self.value(page, #"lifeline_terminations_total{kind="watchdog"}"#) == 1, "\(page)")
        #expect(Self.value(page, #"lifeline_terminations_total{kind="taskLimit"}"#) == 0)
        // The HTTP family is on the page before any plugin made a request.
        #expect(page.contains("# TYPE lifeline_http_requests_total counter\n"))
        second.signal(SIGTERM)
        #expect(second.wait() == 0)
    }

    @Test func run_metrics_badAddress_isUsage() throws {
        let ws = try Workspace()
        try ws.plugin("idle", "lifeline.on('didBecomeActive', function() end)")
        for bad in ["nonsense", "127.0.0.1:99999", "example.com:9464", "1.2.3:80"] {
            let r = try CLI.run(["run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--metrics", bad])
            #expect(r.status == 64, "\(bad): \(r.stderr)")
            #expect(r.stderr.contains("--metrics"), "\(bad): \(r.stderr)")
        }
    }

    @Test func run_metrics_portInUse_isUnavailable_withTheAddress() throws {
        let ws = try Workspace()
        try ws.plugin("idle", "lifeline.on('didBecomeActive', function() print('launched') end)")
        let (fd, port) = try Self.listen()
        defer { close(fd) }
        let r = try CLI.run([
            "run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--metrics", "127.0.0.1:\(port)",
        ])
        #expect(r.status == 69, "\(r.stderr)")
        #expect(r.stderr.contains("127.0.0.1:\(port)"), "\(r.stderr)")
        #expect(r.stderr.contains("in use"), "\(r.stderr)")
        // Refused before the plugins launched.
        #expect(!r.stderr.contains("launched"))
    }

    // MARK: - Helpers

    /// The port from `lifeline: metrics on http://127.0.0.1:PORT/metrics`.
    static func port(in stderr: String) -> Int? {
        guard let line = stderr.split(separator: "\n").first(where: { $0.contains("metrics on http://") }),
            let colon = line.range(of: "127.0.0.1:"), let slash = line[colon.upperBound...].firstIndex(of: "/")
        else { return nil }
        return Int(line[colon.upperBound..<slash])
    }

    static func scrape(_ port: Int) throws -> String {
        let (status, body) = try httpRequest(port: port, path: "/metrics")
        #expect(status == 200)
        return body
    }

    /// The value of the one sample whose line starts with `prefix`.
    static func value(_ page: String, _ prefix: String) -> Double? {
        let lines = page.split(separator: "\n").filter { $0.hasPrefix(prefix) }
        guard lines.count == 1, let space = lines[0].lastIndex(of: " ") else { return nil }
        return Double(lines[0][lines[0].index(after: space)...])
    }

    /// A socket listening on 127.0.0.1 at a free port: the port `--metrics` is then refused.
    static func listen() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw POSIXError(.EADDRINUSE) }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
