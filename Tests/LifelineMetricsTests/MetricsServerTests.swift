import Foundation
import Lifeline
import LifelineLua
import LifelineMetrics
import LifelineTesting
import Testing

/// The metrics page served by a real NIO server on 127.0.0.1, read by a plain-socket scraper and
/// held to a strict reader of the Prometheus text format.
@Suite struct MetricsServerTests {
    static let names = [
        "lifeline_build_info", "lifeline_app_state", "lifeline_handler_calls_total",
        "lifeline_handler_duration_seconds", "lifeline_background_tasks",
        "lifeline_background_time_remaining_seconds", "lifeline_terminations_total", "lifeline_plugin_errors_total",
        "lifeline_plugin_memory_bytes", "lifeline_http_requests_total", "lifeline_transfers", "lifeline_reloads_total",
    ]

    /// A Lua plugin folder, removed afterwards.
    static func withPlugins<T>(_ sources: [String: String], _ body: (String) throws -> T) throws -> T {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (name, source) in sources {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
            try source.write(toFile: dir + "/\(name)/init.lua", atomically: true, encoding: .utf8)
        }
        return try body(dir)
    }

    /// A launched host on the virtual clock running `sources` as Lua plugins; with `metrics`, its
    /// timeline and its handler calls feed them, as a live run with `--metrics` does.
    static func withHost<T>(
        _ sources: [String: String], metrics: HostMetrics? = nil, _ body: (LifelineHost) throws -> T
    ) throws -> T {
        try withPlugins(sources) { dir in
            var configuration = HostConfiguration()
            var observer: (@Sendable (TimelineEvent) -> Void)?
            if let metrics {
                configuration.onHandlerCall = { metrics.noteHandlerCall(plugin: $0, handler: $1, seconds: $2) }
                observer = { metrics.observe($0) }
            }
            let host = LifelineHost(
                configuration: configuration, plugins: try LuaPluginLoader.descriptors(in: dir),
                executor: MainExecutor(clock: VirtualClock()),
                recorder: Recorder(profileName: "ios13", keepsTimeline: false, observer: observer))
            defer { host.shutdown() }
            try host.perform(.launch)
            return try body(host)
        }
    }

    static func event(_ name: String, _ fields: [(String, JSONValue)]) -> TimelineEvent {
        TimelineEvent(time: .zero, event: name, fields: fields)
    }

    @Test func page_parsesAsPrometheusText_withEveryName_fedByARealHost() throws {
        let metrics = HostMetrics()
        try Self.withHost([
            "keeper": """
                lifeline.on("didEnterBackground", function()
                  lifeline.beginBackgroundTask("upload https://example.com/secret")
                end)
                """,
            "idle": "lifeline.on('didBecomeActive', function() end)",
        ], metrics: metrics) { host in
            try host.perform(.background)
            metrics.read(host)
        }
        metrics.observe(Self.event("terminated", [("kind", .string("watchdog")), ("code", .string("0x8badf00d"))]))
        metrics.observe(Self.event("pluginError", [("plugin", .string("idle")), ("message", .string("boom"))]))
        metrics.observe(Self.event("httpResponse", [
            ("plugin", .string("keeper")), ("url", .string("https://example.com/a?token=1")), ("status", .int(503)),
        ]))
        metrics.observe(Self.event("httpResponse", [("plugin", .string("keeper")), ("error", .string("timeout"))]))
        metrics.observe(Self.event("transferQueued", [("plugin", .string("keeper")), ("transfer", .int(1))]))
        metrics.observe(Self.event("transferQueued", [("plugin", .string("keeper")), ("transfer", .int(2))]))
        metrics.observe(Self.event("transferStarted", [("plugin", .string("keeper")), ("transfer", .int(2))]))
        metrics.observe(Self.event("reloaded", [("generation", .int(2)), ("result", .string("ok"))]))
        metrics.observe(Self.event("reloaded", [("generation", .int(2)), ("result", .string("failed"))]))
        metrics.observe(Self.event("reloaded", [("generation", .int(3)), ("result", .string("ok"))]))

        let server = try MetricsServer(address: MetricsAddress(port: 0), metrics: metrics)
        defer { server.close() }
        #expect(server.address.host == "127.0.0.1" && server.address.port > 0)
        let (status, body) = try httpRequest(port: server.address.port, path: "/metrics")
        #expect(status == 200)
        let page = try PrometheusText(body)
        for name in Self.names { #expect(page.types[name] != nil, "no TYPE for \(name)") }
        #expect(page.types["lifeline_handler_duration_seconds"] == "histogram")
        #expect(page.types["lifeline_handler_calls_total"] == "counter")
        #expect(page.types["lifeline_background_tasks"] == "gauge")
        #expect(page.value("lifeline_build_info", ["version": HostMetrics.version]) == 1)
        #expect(page.value("lifeline_app_state", ["state": "background"]) == 1)
        #expect(page.values("lifeline_app_state").reduce(0, +) == 1)
        #expect(page.value("lifeline_background_tasks", ["plugin": "keeper"]) == 1)
        #expect(page.value("lifeline_background_tasks", ["plugin": "idle"]) == 0)
        let remaining = try #require(page.value("lifeline_background_time_remaining_seconds"))
        #expect(remaining > 0 && remaining <= Profile.ios13.budget)
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "keeper", "event": "didEnterBackground"]) == 1)
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "idle", "event": "didBecomeActive"]) == 1)
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "keeper", "event": "load"]) == 1)
        // Every call into plugin code, loads included, is in the histogram.
        let calls = page.values("lifeline_handler_calls_total").reduce(0, +)
        #expect(page.value("lifeline_handler_duration_seconds_count") == calls)
        #expect(page.value("lifeline_handler_duration_seconds_bucket", ["le": "+Inf"]) == calls)
        #expect((page.value("lifeline_plugin_memory_bytes", ["plugin": "keeper"]) ?? 0) > 10_000)
        #expect(page.value("lifeline_terminations_total", ["kind": "watchdog"]) == 1)
        #expect(page.value("lifeline_terminations_total", ["kind": "taskLimit"]) == 0)
        #expect(page.value("lifeline_plugin_errors_total", ["plugin": "idle"]) == 1)
        #expect(page.value("lifeline_http_requests_total", ["plugin": "keeper", "outcome": "5xx"]) == 1)
        #expect(page.value("lifeline_http_requests_total", ["plugin": "keeper", "outcome": "timeout"]) == 1)
        #expect(page.value("lifeline_transfers", ["state": "queued"]) == 1)
        #expect(page.value("lifeline_transfers", ["state": "running"]) == 1)
        #expect(page.value("lifeline_reloads_total", ["result": "ok"]) == 2)
        #expect(page.value("lifeline_reloads_total", ["result": "failed"]) == 1)
        // Bounded labels: no URL, no task name reaches the page.
        #expect(!body.contains("example.com") && !body.contains("upload"))
        for family in page.helps.keys { #expect(page.types[family] != nil) }
    }

    @Test func transfersLeaveTheGaugeWhenTheyEnd() throws {
        let metrics = HostMetrics()
        metrics.observe(Self.event("transferQueued", [("plugin", .string("p")), ("transfer", .int(7))]))
        metrics.observe(Self.event("transferStarted", [("plugin", .string("p")), ("transfer", .int(7))]))
        metrics.observe(Self.event("transferRetrying", [("plugin", .string("p")), ("transfer", .int(7))]))
        var page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.value("lifeline_transfers", ["state": "retrying"]) == 1)
        #expect(page.value("lifeline_transfers", ["state": "running"]) == 0)
        metrics.observe(Self.event("transferEnded", [
            ("plugin", .string("p")), ("transfer", .int(7)), ("state", .string("finished")),
        ]))
        page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.values("lifeline_transfers").allSatisfy { $0 == 0 })
    }

    @Test func otherPathsAre404_andOtherMethods405() throws {
        let server = try MetricsServer(address: MetricsAddress(port: 0), metrics: HostMetrics())
        defer { server.close() }
        #expect(try httpRequest(port: server.address.port, path: "/").status == 404)
        #expect(try httpRequest(port: server.address.port, path: "/metrics/x").status == 404)
        #expect(try httpRequest(port: server.address.port, path: "/favicon.ico").status == 404)
        #expect(try httpRequest(port: server.address.port, path: "/metrics", method: "POST").status == 405)
        #expect(try httpRequest(port: server.address.port, path: "/metrics?x=1").status == 200)
    }

    @Test func aMethodNotAllowed_saysWhichAre() throws {
        let server = try MetricsServer(address: MetricsAddress(port: 0), metrics: HostMetrics())
        defer { server.close() }
        let (status, head, _) = try httpExchange(port: server.address.port, path: "/metrics", method: "DELETE")
        #expect(status == 405)
        #expect(head.lowercased().contains("\r\nallow: get, head"), "\(head)")
    }

    @Test func aFreshPage_hasEveryName_beforeAnyAnswerOrReading() throws {
        // No HTTP answer yet, no scrape-time reading yet (a host busy at the first scrape): the
        // families with no series still have their HELP and TYPE, so every name is on the page.
        let page = try PrometheusText(String(decoding: HostMetrics().page(), as: UTF8.self))
        for name in Self.names {
            #expect(page.types[name] != nil, "no TYPE for \(name)")
            #expect(page.helps[name] != nil, "no HELP for \(name)")
        }
        #expect(page.types["lifeline_http_requests_total"] == "counter")
        #expect(page.types["lifeline_plugin_memory_bytes"] == "gauge")
    }

    @Test func theReadingOnTheMainExecutor_makesNoSeries_theApplyElsewhereDoes() throws {
        // A thousand plugins' first series cost the registry a copy of its family each; that
        // work belongs to the scraper's thread, not to the main executor's reading.
        let metrics = HostMetrics()
        let sources = Dictionary(uniqueKeysWithValues: (0..<50).map { ("p\($0)", "") })
        let reading = try Self.withHost(sources) { HostMetrics.reading(of: $0) }
        var page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.values("lifeline_background_tasks").isEmpty)
        #expect(page.values("lifeline_plugin_errors_total").isEmpty)
        #expect(page.value("lifeline_app_state", ["state": "notRunning"]) == 1)
        #expect(reading.plugins.count == 50 && reading.memory.count == 50)
        metrics.apply(reading)
        page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.values("lifeline_background_tasks").count == 50)
        #expect(page.values("lifeline_plugin_errors_total").count == 50)
        #expect(page.value("lifeline_app_state", ["state": "active"]) == 1)
    }

    @Test func aFamilyTheRegistryHasAlready_isNotWrittenTwice() throws {
        // As when a reading adds a family's first series between the registry's page and the
        // look at the tables: the page has the family, so no second HELP and TYPE are added.
        let metrics = HostMetrics()
        metrics.registry.makeGauge(name: "lifeline_plugin_memory_bytes", labels: [("plugin", "x")]).set(to: 7)
        let text = String(decoding: metrics.page(), as: UTF8.self)
        let page = try PrometheusText(text)
        #expect(page.value("lifeline_plugin_memory_bytes", ["plugin": "x"]) == 7)
        #expect(text.components(separatedBy: "# TYPE lifeline_plugin_memory_bytes gauge\n").count == 2)
        #expect(page.types["lifeline_http_requests_total"] == "counter")
    }

    @Test func aPluginThatIsGone_losesItsGaugeSeries_andKeepsItsCounters() throws {
        let metrics = HostMetrics()
        func read(_ sources: [String: String]) throws {
            try Self.withHost(sources, metrics: metrics) { metrics.read($0) }
        }
        // As a reload that removed "old" shows it: the host runs "kept" alone now.
        try read(["old": "", "kept": ""])
        try read(["kept": ""])
        let page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.value("lifeline_background_tasks", ["plugin": "kept"]) == 0)
        #expect(page.value("lifeline_background_tasks", ["plugin": "old"]) == nil)
        #expect(page.value("lifeline_plugin_memory_bytes", ["plugin": "old"]) == nil)
        #expect((page.value("lifeline_plugin_memory_bytes", ["plugin": "kept"]) ?? 0) > 0)
        // A counter counts what happened, which stays true.
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "old", "event": "load"]) == 1)
        #expect(page.value("lifeline_plugin_errors_total", ["plugin": "old"]) == 0)
    }

    @Test func theCrashReportsOfEarlierRuns_countAsTerminations() throws {
        // A termination ends its run, so only the next run's page can show it.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reports-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for name in [
            "crash-1795822355981-watchdog.json", "crash-1795822399000-watchdog.json",
            "crash-1795822400000-taskLimit.json", "crash-1795822400001-made-up.json", "crash-x-watchdog.json",
            "notes.txt",
        ] {
            try "{}".write(toFile: folder + "/" + name, atomically: true, encoding: .utf8)
        }
        let metrics = HostMetrics()
        metrics.countEarlierTerminations(inReports: folder)
        metrics.countEarlierTerminations(inReports: folder + "/missing")
        let page = try PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
        #expect(page.value("lifeline_terminations_total", ["kind": "watchdog"]) == 2)
        #expect(page.value("lifeline_terminations_total", ["kind": "taskLimit"]) == 1)
        #expect(page.value("lifeline_terminations_total", ["kind": "completionTimeout"]) == 0)
        #expect(page.values("lifeline_terminations_total").count == Termination.Kind.allCases.count)
    }

    @Test func aPortInUse_isUnavailable_withTheAddress() throws {
        let first = try MetricsServer(address: MetricsAddress(port: 0), metrics: HostMetrics())
        defer { first.close() }
        let taken = first.address
        do {
            let second = try MetricsServer(address: taken, metrics: HostMetrics())
            second.close()
            Issue.record("a second server bound \(taken)")
        } catch {
            #expect(error.exitCode == 69)
            #expect(error.message.contains("127.0.0.1:\(taken.port)"), "\(error.message)")
            #expect(error.message.contains("in use"), "\(error.message)")
        }
    }

    @Test func aHostThatDoesNotAnswer_getsTheLastReadingServed_withoutHangingTheScrape() throws {
        let metrics = HostMetrics()
        let asked = Asked()
        // The refresh never calls back, as a host stuck in a handler would not.
        let server = try MetricsServer(
            address: MetricsAddress(port: 0), metrics: metrics, refreshTimeout: 0.1, refresh: { _ in asked.note() })
        defer { server.close() }
        let start = Date()
        let (status, body) = try httpRequest(port: server.address.port, path: "/metrics")
        #expect(status == 200)
        // Far below the 10 s a hung refresh would take the client to give up on.
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(asked.count == 1)
        let page = try PrometheusText(body)
        #expect(page.value("lifeline_app_state", ["state": "notRunning"]) == 1)
    }

    @Test func aHostThatAnswers_isReadBeforeThePageIsServed() throws {
        let metrics = HostMetrics()
        let server = try MetricsServer(
            address: MetricsAddress(port: 0), metrics: metrics, refreshTimeout: 10,
            refresh: { taken in
                // Another thread, as the main executor is.
                Thread.detachNewThread {
                    metrics.observe(Self.event("reloaded", [("result", .string("ok"))]))
                    taken()
                }
            })
        defer { server.close() }
        let page = try PrometheusText(try httpRequest(port: server.address.port, path: "/metrics").body)
        #expect(page.value("lifeline_reloads_total", ["result": "ok"]) == 1)
    }

    /// 1,000 plugins, each with calls of every kind the host makes, named tasks and operations,
    /// requests to distinct URLs, errors and transfers: the page stays linear in the plugins, with
    /// a bounded number of series each, and still parses.
    ///
    /// The first round makes every series; swift-prometheus copies a family's table of series
    /// for each new one, so that round costs more than linear, once. The rounds after it, and the
    /// scrape, are what a long run does; their times are printed, not asserted (speed belongs to
    /// the benchmarks: a sanitizer run on two cores took 2.8 s for what takes 0.2 s alone).
    @Test func aThousandPlugins_keepThePageBounded_andParsing() throws {
        let metrics = HostMetrics()
        let handlers: [HandlerName] = [
            "didEnterBackground", "didBecomeActive", "timer", "expiration handler", "load",
            .numbered("background task", 1), .named("background task", "sync"), .numbered("operation", 9),
            .named("operation", "upload"), HandlerName("queue 'images' didFinish"), HandlerName("task com.x.refresh"),
        ]
        func round(_ round: Int) {
            for p in 0..<1_000 {
                let plugin = "plugin-\(p)"
                for handler in handlers { metrics.noteHandlerCall(plugin: plugin, handler: handler, seconds: 0.001) }
                // A fresh name every round: labels must not follow them.
                metrics.noteHandlerCall(plugin: plugin, handler: .named("operation", "op-\(p)-\(round)"), seconds: 0)
                let task = HandlerName.numbered("background task", p * 10 + round)
                metrics.noteHandlerCall(plugin: plugin, handler: task, seconds: 0)
                metrics.observe(Self.event("httpResponse", [
                    ("plugin", .string(plugin)), ("url", .string("https://h/\(p)/\(round)")), ("status", .int(200)),
                ]))
                metrics.observe(Self.event("pluginError", [("plugin", .string(plugin)), ("message", .string("e"))]))
                metrics.observe(Self.event("transferQueued", [
                    ("plugin", .string(plugin)), ("transfer", .int(Int64(round))),
                ]))
            }
        }
        var start = Date()
        round(0)
        let made = Date().timeIntervalSince(start)
        start = Date()
        for r in 1...3 { round(r) }
        let updated = Date().timeIntervalSince(start)
        start = Date()
        let server = try MetricsServer(address: MetricsAddress(port: 0), metrics: metrics)
        defer { server.close() }
        let (status, body) = try httpRequest(port: server.address.port, path: "/metrics")
        let scraped = Date().timeIntervalSince(start)
        print("1,000 plugins: series made in \(made) s, 3 rounds in \(updated) s, scraped in \(scraped) s")
        #expect(status == 200)
        let page = try PrometheusText(body)
        // Per plugin: the handlers' kinds (9 at most), one HTTP outcome, one error counter.
        let perPlugin = page.samples.filter { $0.labels["plugin"] == "plugin-7" }
        #expect(perPlugin.count <= 12, "\(perPlugin.map(\.labels))")
        #expect(page.samples.count <= 1_000 * 12 + 100)
        #expect(body.utf8.count <= 1_000 * 1_200, "\(body.utf8.count) bytes")
        #expect(page.value("lifeline_transfers", ["state": "queued"]) == 4_000)
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "plugin-7", "event": "operation"]) == 12)
        #expect(page.value("lifeline_handler_calls_total", ["plugin": "plugin-7", "event": "background task"]) == 12)
        #expect(!body.contains("op-7-") && !body.contains("https://") && !body.contains("sync"))
    }

    @Test func eventKinds_areClosed() {
        func kind(_ h: HandlerName) -> String {
            let metrics = HostMetrics()
            metrics.noteHandlerCall(plugin: "p", handler: h, seconds: 0)
            let page = try? PrometheusText(String(decoding: metrics.page(), as: UTF8.self))
            return page?.samples.first { $0.name == "lifeline_handler_calls_total" }?.labels["event"] ?? "?"
        }
        #expect(kind("didReceiveMemoryWarning") == "didReceiveMemoryWarning")
        #expect(kind("expirationHandler") == "expirationHandler")
        #expect(kind(.named("background task", "a \"quoted\" name")) == "background task")
        #expect(kind(HandlerName("queue 'q' didFinish")) == "queue")
        #expect(kind(HandlerName("operation 3 onTimeout")) == "operation")
        #expect(kind(HandlerName("something a plugin named")) == "other")
    }

    @Test func addresses_parse_withTheDefaultHost() throws {
        #expect(try MetricsAddress(parsing: "9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress(parsing: ":9464") == MetricsAddress(host: "127.0.0.1", port: 9464))
        #expect(try MetricsAddress(parsing: "0.0.0.0:80") == MetricsAddress(host: "0.0.0.0", port: 80))
        #expect(try MetricsAddress(parsing: "localhost:0") == MetricsAddress(host: "127.0.0.1", port: 0))
        #expect(try MetricsAddress(parsing: "[::1]:9464") == MetricsAddress(host: "::1", port: 9464))
        #expect(MetricsAddress(host: "::1", port: 1).description == "[::1]:1")
        for bad in [
            "", ":", "abc", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "1.2.3:80", "256.1.1.1:80",
            "example.com:80", "::1:80", "[::1]", "[::1:80", "[zz]:80", "[127.0.0.1]:80", "[]:80", "127.0.0.1:80x", "127.0.0.1: 80", "１２:80",
        ] {
            #expect(throws: LifelineError.self, "\(bad)") { try MetricsAddress(parsing: bad) }
            do { _ = try MetricsAddress(parsing: bad) } catch { #expect(error.exitCode == 64) }
        }
    }
}

private final class Asked: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func note() { lock.withLock { n += 1 } }
    var count: Int { lock.withLock { n } }
}
