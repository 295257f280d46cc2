import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The three pictures of a report: the HTML page, the Chrome trace and the terminal lane chart.
// Every run here is built by hand from report v2 events, so these tests need neither Lua nor the CLI.

/// Hand-built runs for the picture tests (and the browser test).
enum PictureFixtures {
    static func event(_ t: Double, _ name: String, _ fields: (String, JSONValue)...) -> JSONValue {
        .object([("t", .number(ReportNumber.seconds(t))), ("event", .string(name))] + fields)
    }

    static func report(
        _ timeline: [JSONValue], plugins: [String], outcome: String = "completed", termination: JSONValue = .null,
        expectations: [JSONValue]? = nil
    ) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("lifeline", .int(2)), ("profile", .string("ios13")),
            ("limits", .object([("budget", .int(30)), ("expirationLead", .int(5))])),
            ("outcome", .string(outcome)), ("termination", termination),
            (
                "plugins",
                .array(
                    plugins.map {
                        .object([("name", .string($0)), ("kind", .string("lua")), ("status", .string("loaded"))])
                    })
            ),
            ("timeline", .array(timeline)),
        ]
        if let expectations { fields.append(("expectations", .array(expectations))) }
        return .object(fields)
    }

    /// The sync plugin's expiration story, with a download, logs and handler calls beside it: the
    /// upload outlives the budget, its task expires at 27 s and the app suspends; back in the
    /// foreground the commit runs.
    static func expiration() -> RenderedRun {
        let items = "http://127.0.0.1:8080/batches/7/items"
        let file = "http://127.0.0.1:8080/catalogue.json"
        var t: [JSONValue] = [
            event(0, "didFinishLaunching"), event(0, "didBecomeActive"),
            event(
                0.2, "log", ("plugin", .string("sync")), ("level", .string("info")),
                ("message", .string("loaded, 3 items pending"))),
            event(2, "willResignActive"), event(2, "didEnterBackground"),
            event(
                2, "taskBegan", ("plugin", .string("sync")), ("task", .int(1)),
                ("name", .string("queue sync.uploads"))),
            event(
                2, "opStarted", ("plugin", .string("sync")), ("queue", .string("sync.uploads")), ("op", .int(1)),
                ("name", .string("upload-items"))),
            event(2, "httpRequest", ("plugin", .string("sync")), ("method", .string("POST")), ("url", .string(items))),
            event(2, "taskBegan", ("plugin", .string("save-changes")), ("task", .int(2)), ("name", .string("save"))),
            event(
                2.5, "log", ("plugin", .string("save-changes")), ("level", .string("debug")),
                ("message", .string("saving 12 rows"))),
            event(
                3, "taskEnded", ("plugin", .string("save-changes")), ("task", .int(2)), ("name", .string("save")),
                ("expired", .bool(false))),
            event(
                2, "transferQueued", ("plugin", .string("offline-sync")), ("transfer", .string("catalogue")),
                ("kind", .string("download")),
                ("url", .string(file))),
            event(4, "transferStarted", ("plugin", .string("offline-sync")), ("transfer", .string("catalogue"))),
        ]
        for s in 5...20 {
            t.append(
                event(
                    Double(s), "transferProgress", ("plugin", .string("offline-sync")),
                    ("transfer", .string("catalogue")),
                    ("received", .int(Int64((s - 4) * 1_000_000))), ("total", .int(16_000_000))))
        }
        t += [
            event(
                20, "transferEnded", ("plugin", .string("offline-sync")), ("transfer", .string("catalogue")),
                ("state", .string("completed"))),
            event(20, "transferDidFinish", ("plugin", .string("offline-sync")), ("transfer", .string("catalogue"))),
            event(
                12, "log", ("plugin", .string("sync")), ("level", .string("warning")),
                ("message", .string("upload is slow (10 s so far)"))),
            event(
                27, "taskExpiring", ("plugin", .string("sync")), ("task", .int(1)),
                ("name", .string("queue sync.uploads"))),
            event(
                27, "log", ("plugin", .string("sync")), ("level", .string("error")),
                ("message", .string("expired: upload stopped"))),
            event(
                27, "httpResponse", ("plugin", .string("sync")), ("method", .string("POST")), ("url", .string(items)),
                ("error", .string("expired"))),
            event(
                27, "opFinished", ("plugin", .string("sync")), ("queue", .string("sync.uploads")), ("op", .int(1)),
                ("name", .string("upload-items")),
                ("result", .string("expired"))),
            event(
                27, "taskEnded", ("plugin", .string("sync")), ("task", .int(1)),
                ("name", .string("queue sync.uploads")), ("expired", .bool(true))),
            event(27, "suspended"),
            event(60, "willEnterForeground"), event(60, "didBecomeActive"),
            event(
                60, "taskBegan", ("plugin", .string("sync")), ("task", .int(3)), ("name", .string("queue sync.uploads"))
            ),
            event(
                60, "opStarted", ("plugin", .string("sync")), ("queue", .string("sync.uploads")), ("op", .int(2)),
                ("name", .string("upload-commit"))),
            event(
                60, "httpRequest", ("plugin", .string("sync")), ("method", .string("POST")),
                ("url", .string("http://127.0.0.1:8080/batches/7/commit"))),
            event(
                61, "httpResponse", ("plugin", .string("sync")), ("method", .string("POST")),
                ("url", .string("http://127.0.0.1:8080/batches/7/commit")), ("status", .int(200))),
            event(
                61, "opFinished", ("plugin", .string("sync")), ("queue", .string("sync.uploads")), ("op", .int(2)),
                ("name", .string("upload-commit")),
                ("result", .string("finished"))),
            event(
                61, "taskEnded", ("plugin", .string("sync")), ("task", .int(3)),
                ("name", .string("queue sync.uploads")), ("expired", .bool(false))),
        ]
        t.sort { ($0["t"]?.doubleValue ?? 0) < ($1["t"]?.doubleValue ?? 0) }
        let calls = [
            HandlerCall(time: .zero, plugin: "sync", handler: "load", milliseconds: 3.2),
            HandlerCall(time: .seconds(2), plugin: "sync", handler: "didEnterBackground", milliseconds: 1.5),
            HandlerCall(time: .seconds(2), plugin: "save-changes", handler: "didEnterBackground", milliseconds: 42),
            HandlerCall(time: .seconds(27), plugin: "sync", handler: "expiration handler", milliseconds: 0.8),
            HandlerCall(time: .seconds(60), plugin: "sync", handler: "willEnterForeground", milliseconds: 2.1),
        ]
        return RenderedRun(
            title: "sync/expiration.scenario",
            report: report(t, plugins: ["offline-sync", "save-changes", "sync"]), calls: calls)
    }

    /// A run cut short by the watchdog, with a failed expectation.
    static func terminated() -> RenderedRun {
        let timeline = [
            event(0, "didFinishLaunching"), event(0, "didBecomeActive"), event(1, "willResignActive"),
            event(1, "didEnterBackground"),
            event(
                1, "taskBegan", ("plugin", .string("session-end")), ("task", .int(1)),
                ("name", .string("session-end"))),
            event(
                26, "taskExpiring", ("plugin", .string("session-end")), ("task", .int(1)),
                ("name", .string("session-end"))),
            event(
                27, "watchdog", ("plugin", .string("session-end")), ("handler", .string("expiration handler")),
                ("limit", .int(1))),
            event(27, "terminated", ("kind", .string("watchdog")), ("code", .string("0x8badf00d"))),
        ]
        let termination = JSONValue.object([
            ("code", .string("0x8badf00d")), ("kind", .string("watchdog")),
            ("reason", .string("expiration handler ran past 1 s")),
            ("plugin", .string("session-end")), ("t", .int(27)),
            ("traceback", .string("init.lua:12: in function <init.lua:10>")),
        ])
        let expectations: [JSONValue] = [
            .object([("line", .int(9)), ("text", .string("expect outcome completed")), ("passed", .bool(false))]),
            .object([("line", .int(10)), ("text", .string("expect task session-end expired")), ("passed", .bool(true))]
            ),
        ]
        return RenderedRun(
            title: "session-end/hang.scenario",
            report: report(
                timeline, plugins: ["session-end"], outcome: "terminated", termination: termination,
                expectations: expectations),
            calls: [
                HandlerCall(
                    time: .seconds(26), plugin: "session-end", handler: "expiration handler", milliseconds: 1000)
            ])
    }

    /// `count` events or so: many overlapping tasks, requests and log lines in the background.
    static func busy(count: Int) -> RenderedRun {
        var timeline: [JSONValue] = [event(0, "didFinishLaunching"), event(0, "didBecomeActive")]
        var calls: [HandlerCall] = []
        let plugins = ["alpha", "beta", "gamma"]
        var i = 0
        while timeline.count < count {
            let plugin = plugins[i % plugins.count]
            let t = 1 + Double(i) * 0.02
            let id = JSONValue.int(Int64(i))
            timeline.append(event(t, "taskBegan", ("plugin", .string(plugin)), ("task", id)))
            timeline.append(
                event(t, "httpRequest", ("plugin", .string(plugin)), ("method", .string("GET")), ("url", .string("/x")))
            )
            timeline.append(
                event(
                    t, "log", ("plugin", .string(plugin)), ("level", .string("info")), ("message", .string("line \(i)"))
                ))
            timeline.append(
                event(
                    t + 0.5, "httpResponse", ("plugin", .string(plugin)), ("method", .string("GET")),
                    ("url", .string("/x")), ("status", .int(200))))
            timeline.append(
                event(t + 3, "taskEnded", ("plugin", .string(plugin)), ("task", id), ("expired", .bool(false))))
            calls.append(HandlerCall(time: .seconds(t), plugin: plugin, handler: "timer", milliseconds: 0.5))
            i += 1
        }
        timeline.sort { ($0["t"]?.doubleValue ?? 0) < ($1["t"]?.doubleValue ?? 0) }
        return RenderedRun(title: "busy", report: report(timeline, plugins: plugins), calls: calls)
    }

    static let hostileText =
        "</script><script>alert(1)</script><!-- <img src=x onerror=alert(2)> & \u{1B}[31m 表\u{2028}"

    /// Strings from a report that would break a page, a terminal or a trace if written as they are.
    static func hostile() -> RenderedRun {
        let name = JSONValue.string("<b>" + hostileText)
        let timeline = [
            event(0, "didFinishLaunching"), event(0, "didBecomeActive"),
            event(1, "taskBegan", ("plugin", name), ("task", .int(1)), ("name", .string(hostileText))),
            event(2, "log", ("plugin", name), ("level", .string("error")), ("message", .string(hostileText))),
            event(
                3, "pluginError", ("plugin", name), ("message", .string(hostileText)),
                ("traceback", .string(hostileText))),
            event(4, hostileText, ("x", .string(hostileText))),
        ]
        return RenderedRun(
            title: hostileText, report: report(timeline, plugins: [hostileText]),
            calls: [HandlerCall(time: .seconds(1), plugin: hostileText, handler: hostileText, milliseconds: 5)])
    }
}

private func count(_ needle: String, in text: String) -> Int {
    text.components(separatedBy: needle).count - 1
}

/// The JSON the page embeds, read back as the page's script reads it.
private func embeddedData(_ html: String) throws -> JSONValue {
    let open = "<script type=\"application/json\" id=\"lifeline-data\">"
    let start = try #require(html.range(of: open)).upperBound
    let rest = String(html[start...])
    let end = try #require(rest.range(of: "</script>")).lowerBound
    return try JSONValue.parse(String(rest[..<end]))
}

/// Every string in a JSON value, depth first.
private func strings(_ value: JSONValue) -> [String] {
    switch value {
    case .string(let s): return [s]
    case .array(let items): return items.flatMap(strings)
    case .object(let fields): return fields.flatMap { [$0.0] + strings($0.1) }
    default: return []
    }
}

/// A line as a terminal shows it: SGR sequences take no columns.
private func visibleWidth(_ line: String) -> Int {
    var width = 0
    var inEscape = false
    for ch in line.unicodeScalars {
        if inEscape {
            if ch == "m" { inEscape = false }
        } else if ch == "\u{1B}" {
            inEscape = true
        } else {
            width += 1
        }
    }
    return width
}

// MARK: - The page

@Test func page_loadsNothingFromOutside() {
    // The report's own URLs (http://127.0.0.1…) are escaped, so no address appears as such.
    let html = ReportPage.html([PictureFixtures.expiration(), PictureFixtures.terminated()])
    for outside in ["http://", "https://", "src=", "@import", "url(", "//cdn", "<link", "<iframe"] {
        #expect(!html.contains(outside), "the page holds \(outside)")
    }
    // The only links are the index's, to the runs' own anchors on the page.
    #expect(html.components(separatedBy: "href=").count == html.components(separatedBy: "href=\"#run-").count)
}

@Test func page_escapesHostileStrings_soTheyStayText() throws {
    let run = PictureFixtures.hostile()
    let html = ReportPage.html([run])
    // Only the page's own three scripts open and close; nothing starts a comment or an image.
    #expect(count("<script", in: html) == 3)
    #expect(count("</script>", in: html) == 3)
    #expect(!html.contains("<!--"))
    #expect(!html.contains("<img"))
    #expect(!html.contains("<b>"))
    #expect(html.contains("&lt;&#47;script&gt;"))
    // The embedded JSON reads back to the very strings of the report.
    let data = try embeddedData(html)
    #expect(strings(data).contains(PictureFixtures.hostileText))
}

@Test func page_drawsALanePerTask_andPerKindOfActivity() throws {
    // App state, budget, events (the watchdog and termination), then for session-end its handler
    // calls and its one task.
    let data = try embeddedData(ReportPage.html([PictureFixtures.terminated()]))
    guard case .array(let runs)? = data["runs"], case .array(let lanes)? = runs.first?["lanes"] else {
        Issue.record("no lanes")
        return
    }
    let labels = lanes.compactMap { $0["label"] }.map(RunLanes.display)
    #expect(labels == ["app state", "budget", "events", "handler calls", "session-end #1"])
}

@Test func page_marksStatesBudgetAndExpiration() throws {
    let data = try embeddedData(ReportPage.html([PictureFixtures.expiration()]))
    let text = data.serialized()
    for cls in [
        "st-active", "st-background", "st-suspended", "budget", "budget-late", "task-expired",
        "http-fail", "op-fail", "xfer", "prog", "m-log-error", "m-expire", "call", "v-expire",
    ] {
        #expect(text.contains("\"\(cls)\""), "missing \(cls)")
    }
}

@Test func page_listsFailedExpectationsAndTermination() {
    let html = ReportPage.html([PictureFixtures.terminated()])
    #expect(html.contains("Failed expectations"))
    #expect(html.contains("expect outcome completed"))
    #expect(!html.contains("expect task session-end expired"))
    #expect(html.contains("expiration handler ran past 1 s"))
}

@Test func page_isTheSameForTheSameRuns() {
    let runs = [PictureFixtures.expiration(), PictureFixtures.busy(count: 300)]
    #expect(ReportPage.html(runs) == ReportPage.html(runs))
    #expect(ChromeTrace.json(runs) == ChromeTrace.json(runs))
    #expect(LaneChart.text(runs[0], width: 100, colour: true) == LaneChart.text(runs[0], width: 100, colour: true))
}

@Test func page_withThousandsOfEvents_packsRowsAndRenders() throws {
    let run = PictureFixtures.busy(count: 2000)
    let html = ReportPage.html([run])
    let data = try embeddedData(html)
    guard case .array(let runs)? = data["runs"], case .array(let lanes)? = runs.first?["lanes"] else {
        Issue.record("no lanes")
        return
    }
    // Too many tasks for a lane each: each plugin's tasks share one lane of rows.
    #expect(lanes.filter { $0["label"] == .string("tasks") }.count == 3)
    #expect(lanes.count < 30)
    #expect(html.utf8.count < 3_000_000)
}

// MARK: - Any input

@Test(arguments: [
    JSONValue.null,
    .array([]),
    .string("report"),
    .object([]),
    .object([("timeline", .string("no"))]),
    .object([("timeline", .array([.int(1), .null, .array([])]))]),
    .object([
        ("limits", .object([("budget", .number("1e300")), ("expirationLead", .number("-5"))])),
        (
            "timeline",
            .array([
                .object([("t", .number("1e300")), ("event", .string("didEnterBackground"))]),
                .object([("t", .number("-1e300")), ("event", .string("taskEnded")), ("task", .null)]),
                .object([("t", .string("soon")), ("event", .int(5))]),
                .object([("event", .string("taskBegan")), ("plugin", .array([])), ("task", .object([]))]),
                .object([("t", .int(3)), ("event", .string("transferProgress")), ("transfer", .null)]),
                .object([("t", .int(2)), ("event", .string("suspended"))]),
                .object([("t", .int(1)), ("event", .string("httpResponse")), ("status", .string("x"))]),
                .object([("t", .int(1)), ("event", .string("opFinished"))]),
            ])
        ),
        ("termination", .object([("t", .number("9e99"))])),
        ("expectations", .array([.null, .int(3), .object([("passed", .bool(false))])])),
    ]),
])
func pictures_ofAnyJSON_drawWithoutTrapping(report: JSONValue) throws {
    let calls = [
        HandlerCall(time: .distantFuture, plugin: "", handler: "", milliseconds: .infinity),
        HandlerCall(time: HostTime(nanoseconds: .min), plugin: "p", handler: "h", milliseconds: -.infinity),
        HandlerCall(time: .zero, plugin: "p", handler: "h", milliseconds: .nan),
    ]
    let run = RenderedRun(title: "", report: report, calls: calls)
    #expect(ReportPage.html([run]).contains("data-zoom"))
    _ = try JSONValue.parse(ChromeTrace.json([run]).serialized())
    for width in [0, 1, 5, 40, 90] {
        for line in LaneChart.text(run, width: width, colour: true).split(separator: "\n") {
            #expect(visibleWidth(String(line)) <= width)
        }
    }
}

@Test func pictures_ofNoRuns_areEmptyButValid() throws {
    #expect(ReportPage.html([]).contains("No runs."))
    let trace = try JSONValue.parse(ChromeTrace.json([]).serialized())
    #expect(trace["traceEvents"] == .array([]))
}

// MARK: - The trace

/// The trace's events, parsed back from its text.
private func traceEvents(_ runs: [RenderedRun]) throws -> [JSONValue] {
    let trace = try JSONValue.parse(ChromeTrace.json(runs).serialized())
    #expect(trace["displayTimeUnit"] == .string("ms"))
    guard case .array(let events)? = trace["traceEvents"] else {
        Issue.record("no traceEvents")
        return []
    }
    return events
}

@Test func trace_namesAProcessPerRun_andATrackPerPlugin() throws {
    let events = try traceEvents([PictureFixtures.expiration(), PictureFixtures.terminated()])
    let processes = events.filter { $0["name"] == .string("process_name") }
    #expect(processes.map { $0["pid"] } == [.int(1), .int(2)])
    #expect(
        processes.map { $0["args"]?["name"] } == [
            .string("sync/expiration.scenario"), .string("session-end/hang.scenario"),
        ])
    let threads = Set(
        events.filter { $0["name"] == .string("thread_name") && $0["pid"] == .int(1) }
            .compactMap { $0["args"]?["name"] }.map(RunLanes.display))
    for name in ["app", "sync", "save-changes", "offline-sync", "sync tasks", "sync http", "offline-sync transfers"] {
        #expect(threads.contains(name), "no track \(name)")
    }
}

@Test func trace_handlerCalls_lastTheirRealTime_atVirtualTime() throws {
    let events = try traceEvents([PictureFixtures.expiration()])
    let calls = events.filter { $0["cat"] == .string("handler") }
    #expect(calls.count == 5)
    let save = try #require(calls.first { $0["args"]?["plugin"] == .string("save-changes") })
    #expect(save["ph"] == .string("X"))
    #expect(save["ts"] == .int(2_000_000))
    #expect(save["dur"] == .int(42_000))
}

@Test func trace_tasksAreSlices_logsAndTerminationsInstants() throws {
    let events = try traceEvents([PictureFixtures.expiration(), PictureFixtures.terminated()])
    let tasks = events.filter { $0["cat"] == .string("task") && $0["ph"] == .string("X") }
    #expect(tasks.count == 4)
    let expired = try #require(tasks.first { $0["args"]?["outcome"] == .string("expired") })
    #expect(expired["ts"] == .int(2_000_000))
    #expect(expired["dur"] == .int(25_000_000))
    #expect(events.filter { $0["cat"] == .string("log") && $0["ph"] == .string("i") }.count == 4)
    let terminated = try #require(events.first { $0["name"] == .string("terminated") })
    #expect(terminated["ph"] == .string("i"))
    #expect(terminated["s"] == .string("p"))
    #expect(terminated["pid"] == .int(2))
    #expect(terminated["args"]?["termination"]?["reason"] == .string("expiration handler ran past 1 s"))
}

@Test func trace_countsBackgroundTimeDown_fromTheBudget() throws {
    let events = try traceEvents([PictureFixtures.expiration()])
    let samples = events.filter { $0["ph"] == .string("C") }
        .map { ($0["ts"], $0["args"]?["seconds"]?.doubleValue) }
    #expect(samples.first?.0 == .int(2_000_000))
    #expect(samples.first?.1 == 30)
    // The expiration moment, 5 s before the budget runs out, then zero where the app suspends.
    #expect(samples.contains { $0.0 == .int(27_000_000) && $0.1 == 0 })
    #expect(samples.contains { $0.0 == .int(12_000_000) && $0.1 == 20 })
    #expect(samples.allSatisfy { ($0.1 ?? -1) >= 0 && ($0.1 ?? 99) <= 30 })
}

@Test func trace_timesAreWholeMicroseconds_andSlicesOfATrackNeverOverlap() throws {
    let events = try traceEvents([PictureFixtures.expiration(), PictureFixtures.busy(count: 1500)])
    var byTrack: [String: [(Int64, Int64)]] = [:]
    for e in events where e["ph"] != .string("M") {
        guard case .int(let ts)? = e["ts"] else {
            Issue.record("ts is not an integer: \(e.serialized())")
            continue
        }
        if e["ph"] == .string("X") {
            guard case .int(let dur)? = e["dur"] else {
                Issue.record("dur is not an integer")
                continue
            }
            #expect(dur >= 1)
            byTrack["\(e["pid"]!.serialized())/\(e["tid"]!.serialized())", default: []].append((ts, dur))
        }
    }
    for (track, slices) in byTrack {
        let sorted = slices.sorted { $0.0 < $1.0 }
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            #expect(b.0 >= a.0 + a.1, "overlap on \(track)")
        }
    }
}

// MARK: - The lane chart

@Test(arguments: [1, 12, 39, 40, 41, 80, 200])
func laneChart_neverExceedsTheWidth(width: Int) {
    for run in [
        PictureFixtures.expiration(), PictureFixtures.terminated(), PictureFixtures.hostile(),
        PictureFixtures.busy(count: 1000),
    ] {
        for colour in [false, true] {
            let text = LaneChart.text(run, width: width, colour: colour)
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                #expect(visibleWidth(String(line)) <= width, "\(line)")
            }
        }
    }
}

@Test func laneChart_coloursOnlyWhenAsked() {
    let run = PictureFixtures.hostile()
    #expect(!LaneChart.text(run, width: 80, colour: false).contains("\u{1B}"))
    #expect(LaneChart.text(PictureFixtures.expiration(), width: 80, colour: true).contains("\u{1B}[34m"))
}

@Test func laneChart_drawsStatesTasksAndMarkers() {
    // Labels of up to 21 characters ("queue sync.uploads #1") take 22 columns.
    let lines = LaneChart.text(PictureFixtures.expiration(), width: 83, colour: false).split(separator: "\n").map(
        String.init)
    let app = lines.first { $0.hasPrefix("app ") } ?? ""
    // 61 s over 61 columns: a column a second.
    #expect(
        app.hasSuffix(
            String(repeating: "A", count: 2) + String(repeating: "b", count: 25) + String(repeating: "s", count: 33)
                + "A"))
    let upload = lines.first { $0.hasPrefix("queue sync.uploads") } ?? ""
    #expect(upload.contains("==x"))
    let budget = lines.first { $0.hasPrefix("budget") } ?? ""
    #expect(budget.contains("!"))

    let hang = LaneChart.text(PictureFixtures.terminated(), width: 80, colour: false)
    #expect(hang.contains("T"))
    #expect(hang.contains("FAILED line 9: expect outcome completed"))
    #expect(hang.contains("TERMINATED at 27s"))
}

/// A killed app's tasks vanish with it (no taskEnded): their lanes end at the kill, not at the
/// end of the run, while a transfer, the host's, goes on.
@Test func pictures_tasksAndOperations_endWithTheApp() {
    typealias F = PictureFixtures
    let report = F.report(
        [
            F.event(0, "didFinishLaunching"), F.event(0, "didBecomeActive"), F.event(5, "didEnterBackground"),
            F.event(5, "taskBegan", ("plugin", .string("p")), ("task", .int(1)), ("name", .string("save"))),
            F.event(5, "transferQueued", ("plugin", .string("p")), ("transfer", .string("big"))),
            F.event(10, "killed"),
            F.event(30, "transferEnded", ("plugin", .string("p")), ("transfer", .string("big")),
                ("state", .string("finished"))),
        ], plugins: ["p"])
    let lanes = RunLanes(RenderedRun(title: "kill", report: report))
    let task = lanes.spans.first { $0.kind == .task }
    #expect(task?.to == 10)
    #expect(task?.ended == true)
    #expect(task?.outcome == "app ended")
    #expect(lanes.spans.first { $0.kind == .transfer }?.to == 30)
}
