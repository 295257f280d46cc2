/// Runs as one self-contained HTML page (`--html`): for each run, lanes along virtual time (the
/// app's state, the background budget, each task, handler calls, HTTP, queue operations,
/// transfers, log lines, terminations), a tooltip with every field of whatever is under the
/// mouse, and the log as a list.
///
/// The page loads nothing: its style and script are inline, and the lanes are drawn in the
/// browser from JSON embedded in the page. Swift decides what goes where (`RunLanes`), the script
/// only maps time to pixels, so zooming redraws without a round trip. Every string from a report
/// reaches the page escaped (HTML entities in the markup; `\u003c` and friends in the JSON), so a
/// log line holding `</script>` or `<!--` is text like any other. The page has no clock in it:
/// the same runs give the same bytes.
public enum ReportPage {
    /// The page for `runs`, one section each, in order.
    public static func html(_ runs: [RenderedRun]) -> String {
        let all = runs.map { RunLanes($0) }
        let title = runs.count == 1 ? "Lifeline: \(runs[0].title)" : "Lifeline: \(runs.count) runs"
        var out = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title))</title>
            <style>\(style)</style>
            </head>
            <body>
            <script>
            window.onerror = function (message) { document.body.setAttribute("data-error", String(message)); };
            </script>
            <header><h1>\(escape(title))</h1>\(legend)</header>

            """
        if runs.count > 1 { out += index(runs, all) }
        for (index, (run, lanes)) in zip(runs, all).enumerated() {
            out += section(run, lanes, index: index)
        }
        if runs.isEmpty { out += "<p class=\"empty\">No runs.</p>\n" }
        let data = JSONValue.object([("runs", .array(all.map(PageData.run)))])
        out += "<div id=\"tip\" role=\"tooltip\"></div>\n"
        out += "<script type=\"application/json\" id=\"lifeline-data\">\(scriptSafe(data.serialized()))</script>\n"
        out += "<script>\(script)</script>\n</body>\n</html>\n"
        return out
    }

    // MARK: - Markup made here

    /// Text for HTML content and attribute values. `/` is escaped too, so that nothing in the page
    /// reads as an address (a report's URLs included) and no `</` can close an element.
    static func escape(_ text: String) -> String {
        text.replacingScalars { ch in
            switch ch {
            case "&": "&amp;"
            case "<": "&lt;"
            case ">": "&gt;"
            case "\"": "&quot;"
            case "'": "&#39;"
            case "/": "&#47;"
            case _ where ch.value < 0x20 && ch != "\n" && ch != "\t": "\u{FFFD}"
            default: nil
            }
        }
    }

    /// JSON that can sit inside a `<script>` element: `<`, `>`, `&`, `/` and the two line separators
    /// JavaScript once treated as line ends become `\u` escapes, which only ever occur inside
    /// JSON strings, so the value parses back unchanged.
    static func scriptSafe(_ json: String) -> String {
        json.replacingScalars { ch in
            switch ch {
            case "<": "\\u003c"
            case ">": "\\u003e"
            case "&": "\\u0026"
            case "/": "\\/"
            case "\u{2028}": "\\u2028"
            case "\u{2029}": "\\u2029"
            default: nil
            }
        }
    }

    /// A link to each run, at the top of a page of several: its title, its outcome, and how many
    /// of its expectations failed, failing runs marked so that they are found first.
    private static func index(_ runs: [RenderedRun], _ all: [RunLanes]) -> String {
        var out = "<nav class=\"index\"><h2>Runs</h2><ol>"
        for (i, (run, lanes)) in zip(runs, all).enumerated() {
            let failed = lanes.failedExpectations.count
            let bad = failed > 0 || lanes.termination != nil
            var chips: [String] = []
            if let outcome = lanes.outcome {
                chips.append(
                    "<span class=\"chip \(outcome == "completed" ? "good" : "bad")\">\(escape(outcome))</span>")
            }
            if failed > 0 {
                chips.append("<span class=\"chip bad\">\(counted(failed, "failed expectation"))</span>")
            }
            out += "<li\(bad ? " class=\"failing\"" : "")><a href=\"#run-\(i)\">\(escape(run.title))</a> "
            out += chips.joined(separator: " ") + "</li>"
        }
        return out + "</ol></nav>\n"
    }

    private static func section(_ run: RenderedRun, _ lanes: RunLanes, index: Int) -> String {
        var out = "<section class=\"run\" id=\"run-\(index)\">\n<h2>\(escape(run.title))</h2>\n"
        out += summary(lanes)
        if let term = lanes.termination { out += terminationBox(term) }
        if !lanes.failedExpectations.isEmpty {
            out += "<div class=\"alert\"><h3>Failed expectations</h3><ul>"
            for e in lanes.failedExpectations {
                let line = e["line"].map(RunLanes.display).map { "line \($0): " } ?? ""
                let text = e["text"].map(RunLanes.display) ?? e.serialized()
                // Why it failed, as the terminal says it: without it a line reads as if it held.
                let why = e["message"].map { "<div class=\"why\">\(escape(RunLanes.display($0)))</div>" } ?? ""
                out += "<li>\(escape(line))<code>\(escape(text))</code>\(why)</li>"
            }
            out += "</ul></div>\n"
        }
        out += """
            <div class="tools"><button data-zoom="out" title="Zoom out">&minus;</button><button data-zoom="in" \
            title="Zoom in (or Ctrl + wheel)">+</button><button data-zoom="fit">Fit</button> \
            <span class="scale"></span></div>
            <div class="chart"><div class="labels"></div><div class="scroll"></div></div>

            """
        out += logList(lanes)
        out += "</section>\n"
        return out
    }

    private static func summary(_ lanes: RunLanes) -> String {
        let outcome = lanes.outcome ?? "unknown"
        let tasks = lanes.spans.filter { $0.kind == .task }
        var chips = [
            "<span class=\"chip \(outcome == "completed" ? "good" : "bad")\">\(escape(outcome))</span>",
            "<span class=\"chip\">\(counted(lanes.events.count, "event"))</span>",
            "<span class=\"chip\">\(counted(tasks.count, "task"))</span>",
        ]
        let expired = tasks.filter { $0.outcome == "expired" }.count
        if expired > 0 { chips.append("<span class=\"chip warn\">\(expired) expired</span>") }
        let http = lanes.spans.filter { $0.kind == .http }.count
        if http > 0 { chips.append("<span class=\"chip\">\(http) HTTP</span>") }
        if !lanes.logs.isEmpty { chips.append("<span class=\"chip\">\(counted(lanes.logs.count, "log line"))</span>") }
        if !lanes.calls.isEmpty { chips.append("<span class=\"chip\">\(counted(lanes.calls.count, "handler call"))</span>") }
        if let profile = lanes.profile { chips.append("<span class=\"chip\">profile \(escape(profile))</span>") }
        if let budget = lanes.budgetSeconds {
            let lead = lanes.expirationLead.map { ", expiration \(ReportNumber.seconds($0)) s before" } ?? ""
            chips.append("<span class=\"chip\">budget \(ReportNumber.seconds(budget)) s\(escape(lead))</span>")
        }
        return "<div class=\"summary\">\(chips.joined(separator: " "))</div>\n"
    }

    /// `1 task`, `2 tasks`.
    private static func counted(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    private static func terminationBox(_ term: JSONValue) -> String {
        var out = "<div class=\"alert\"><h3>Terminated</h3><dl>"
        if case .object(let fields) = term {
            for (key, value) in fields where value != .null {
                let text = escape(RunLanes.display(value))
                out +=
                    key == "traceback"
                    ? "<dt>\(escape(key))</dt><dd><pre>\(text)</pre></dd>"
                    : "<dt>\(escape(key))</dt><dd>\(text)</dd>"
            }
        } else {
            out += "<dd>\(escape(term.serialized()))</dd>"
        }
        return out + "</dl></div>\n"
    }

    private static func logList(_ lanes: RunLanes) -> String {
        guard !lanes.logs.isEmpty else { return "" }
        var out = "<details class=\"log\" open><summary>Log (\(lanes.logs.count) lines)</summary><div class=\"logbox\">"
        out += "<table><thead><tr><th>t</th><th>plugin</th><th>level</th><th>message</th></tr></thead><tbody>"
        for log in lanes.logs {
            let level = log.text("level") ?? ""
            let cls = ["debug", "info", "warning", "error"].contains(level) ? level : "info"
            out += "<tr class=\"lv-\(cls)\"><td>\(escape(ReportNumber.seconds(log.t)))s</td>"
            out += "<td>\(escape(log.text("plugin") ?? ""))</td><td>\(escape(level))</td>"
            out += "<td>\(escape(log.text("message") ?? ""))</td></tr>"
        }
        return out + "</tbody></table></div></details>\n"
    }

    private static let legend: String = {
        let items: [(String, String)] = [
            ("st-active", "active"), ("st-inactive", "inactive"), ("st-background", "background"),
            ("st-suspended", "suspended"), ("st-notRunning", "not running"), ("budget", "background budget"),
            ("budget-late", "after expiration"), ("task", "task"), ("task-expired", "expired task"),
            ("http", "HTTP"), ("op", "queue op"), ("op-fail", "queue op not finished"), ("m-warn", "warning / op dropped"),
            ("xfer", "transfer"), ("sys", "system task"), ("call", "handler call"), ("m-log-info", "log line"),
            ("m-end", "app ended (terminate)"), ("m-bad", "kill / termination / error"),
        ]
        let swatches = items.map { cls, label in
            "<span class=\"key\"><svg width=\"14\" height=\"12\"><rect class=\"\(cls)\" width=\"14\" height=\"12\" "
                + "rx=\"2\"></rect></svg>\(label)</span>"
        }
        let expiration =
            "<span class=\"key\"><svg width=\"14\" height=\"12\"><line class=\"v-expire\" x1=\"7\" x2=\"7\" "
            + "y1=\"0\" y2=\"12\"></line></svg>expiration moment</span>"
        return "<div class=\"legend\">\(swatches.joined())\(expiration)</div>"
    }()
}

/// The JSON the page's script draws from: per run its time span, lanes of items, vertical lines
/// and tooltips. Items are arrays, `[t0, t1, row, class, tip, text, fraction]`, to keep a page of
/// thousands of events small; a tooltip is a list of `[key, value]` pairs, with `["", ""]` between
/// the events of one span.
enum PageData {
    /// Above this many tasks a run packs its tasks into shared rows instead of a lane each.
    static let laneEachTaskUpTo = 40

    static func run(_ lanes: RunLanes) -> JSONValue {
        var page = Builder(lanes: lanes)
        page.build()
        return .object([
            ("start", RunLanes.number(lanes.start)), ("end", RunLanes.number(lanes.end)),
            ("lanes", .array(page.laneList)), ("vlines", .array(page.vlines)), ("tips", .array(page.tips)),
        ])
    }

    private struct Builder {
        let lanes: RunLanes
        var laneList: [JSONValue] = []
        var vlines: [JSONValue] = []
        var tips: [JSONValue] = []

        init(lanes: RunLanes) { self.lanes = lanes }

        /// Items closer than this share no row: about 3 px when the whole run fits the window.
        var gap: Double { lanes.duration * 0.003 }

        mutating func build() {
            stateLane()
            budgetLane()
            markerLane()
            let eachTask = lanes.spans.filter { $0.kind == .task }.count <= PageData.laneEachTaskUpTo
            for plugin in lanes.plugins {
                callLane(plugin)
                let mine = lanes.spans.filter { $0.plugin == plugin }
                let tasks = mine.filter { $0.kind == .task }
                if eachTask {
                    for task in tasks { spanLane(task.label, plugin, [task]) }
                } else {
                    spanLane("tasks", plugin, tasks)
                }
                spanLane("HTTP", plugin, mine.filter { $0.kind == .http })
                var queues: [String] = []
                for s in mine where s.kind == .op && !queues.contains(s.lane) { queues.append(s.lane) }
                for q in queues { spanLane("queue \(q)", plugin, mine.filter { $0.kind == .op && $0.lane == q }) }
                spanLane("transfers", plugin, mine.filter { $0.kind == .transfer })
                spanLane("system tasks", plugin, mine.filter { $0.kind == .system })
                logLane(plugin)
            }
            if !lanes.others.isEmpty {
                let items = lanes.others.map { e in item(e.t, e.t, 0, "m-info", tip(e), e.name) }
                lane("other events", "other", rows: 1, items)
            }
        }

        // MARK: Tooltips

        mutating func tip(_ rows: [(String, String)]) -> Int {
            tips.append(.array(rows.map { .array([.string($0.0), .string($0.1)]) }))
            return tips.count - 1
        }

        mutating func tip(_ event: RunLanes.Event, before: [(String, String)] = []) -> Int {
            tip(before + event.fields.map { ($0.0, RunLanes.display($0.1)) })
        }

        mutating func tip(_ span: RunLanes.Span) -> Int {
            var rows: [(String, String)] = [
                (span.kind.rawValue, span.label), ("outcome", span.outcome),
                ("from", seconds(span.from)), ("to", seconds(span.to) + (span.ended ? "" : " (not ended)")),
                ("duration", seconds(span.to - span.from)),
            ]
            for e in span.events {
                rows.append(("", ""))
                rows += e.fields.map { ($0.0, RunLanes.display($0.1)) }
            }
            return tip(rows)
        }

        func seconds(_ t: Double) -> String { ReportNumber.seconds(RunLanes.clamp(t, -1e9, 1e9)) + "s" }

        // MARK: Lanes

        func item(_ t0: Double, _ t1: Double, _ row: Int, _ cls: String, _ tip: Int, _ text: String?) -> JSONValue {
            .array([
                RunLanes.number(t0), RunLanes.number(max(t1, t0)), .int(Int64(row)), .string(cls), .int(Int64(tip)),
                text.map { .string(String($0.prefix(200))) } ?? .null,
            ])
        }

        mutating func lane(_ label: String, _ group: String, rows: Int, _ items: [JSONValue], kind: String = "row") {
            laneList.append(
                .object([
                    ("label", .string(label)), ("group", .string(group)), ("kind", .string(kind)),
                    ("rows", .int(Int64(max(rows, 1)))), ("items", .array(items)),
                ]))
        }

        mutating func stateLane() {
            var items: [JSONValue] = []
            for s in lanes.states {
                var before: [(String, String)] = [
                    ("state", s.state.rawValue), ("from", seconds(s.from)), ("to", seconds(s.to)),
                    ("duration", seconds(s.to - s.from)),
                ]
                if s.cause != nil { before.append(("", "")) }
                let t = s.cause.map { tip($0, before: before) } ?? tip(before)
                items.append(item(s.from, s.to, 0, "st-\(s.state.rawValue)", t, s.state.rawValue))
            }
            lane("app state", "", rows: 1, items, kind: "state")
        }

        mutating func budgetLane() {
            guard !lanes.budgets.isEmpty else { return }
            var items: [JSONValue] = []
            for b in lanes.budgets {
                // The whole window is drawn, so one sees how much was left; the part after the app
                // left the background is faded.
                let last = min(b.runsOut, lanes.end)
                let t = tip([
                    ("budget from", seconds(b.start)), ("expiration", seconds(b.expiration)),
                    ("runs out", seconds(b.runsOut)),
                    ("left background", b.until < b.runsOut ? seconds(b.until) : "no"),
                    ("remaining then", seconds(max(b.runsOut - b.until, 0))),
                ])
                items.append(item(b.start, last, 0, "budget", t, "budget \(seconds(b.runsOut - b.start))"))
                if b.expiration < last { items.append(item(b.expiration, last, 0, "budget-late", t, nil)) }
                if b.until < last { items.append(item(b.until, last, 0, "budget-unused", t, nil)) }
                if b.expiration <= b.until {
                    let vt = tip([
                        ("expiration", seconds(b.expiration)),
                        (
                            "why",
                            "budget \(seconds(b.runsOut - b.start)) from \(seconds(b.start)), minus expirationLead"
                        ),
                    ])
                    vlines.append(.array([RunLanes.number(b.expiration), .string("v-expire"), .int(Int64(vt))]))
                }
            }
            lane("budget", "", rows: 1, items)
        }

        mutating func markerLane() {
            var items: [JSONValue] = []
            for m in lanes.markers {
                let t = tip(m)
                let cls: String
                switch (RunLanes.ending(m.event), m.event) {
                case (.terminated, _), (.killed, _):
                    cls = "m-bad"
                    vlines.append(.array([RunLanes.number(m.t), .string("v-bad"), .int(Int64(t))]))
                case (.ordinary, _):
                    // The app ended as apps do: a line across the lanes, not drawn as a failure.
                    cls = "m-end"
                    vlines.append(.array([RunLanes.number(m.t), .string("v-end"), .int(Int64(t))]))
                case (nil, .pluginError), (nil, .watchdog): cls = "m-bad"
                case (nil, .memoryWarning), (nil, .didReceiveMemoryWarning), (nil, .endUnknownTask): cls = "m-warn"
                default: cls = "m-info"
                }
                items.append(item(m.t, m.t, 0, cls, t, m.name))
            }
            if let term = lanes.termination, !lanes.markers.contains(where: { $0.event == .terminated }) {
                let at = term["t"]?.doubleValue.map { RunLanes.clamp($0, -1e9, 1e9) } ?? lanes.end
                var rows: [(String, String)] = []
                if case .object(let fields) = term { rows = fields.map { ($0.0, RunLanes.display($0.1)) } }
                let t = tip(rows)
                items.append(item(at, at, 0, "m-bad", t, "termination"))
                vlines.append(.array([RunLanes.number(at), .string("v-bad"), .int(Int64(t))]))
            }
            if !items.isEmpty { lane("events", "", rows: 1, items) }
        }

        mutating func callLane(_ plugin: String) {
            let calls = lanes.calls.filter { $0.plugin == plugin }
            guard !calls.isEmpty else { return }
            var items: [JSONValue] = []
            for c in calls {
                let t = tip([
                    ("plugin", c.plugin), ("handler", c.handler), ("t", seconds(c.time.seconds)),
                    ("ms", ReportNumber.seconds(c.milliseconds)),
                ])
                let cls = c.milliseconds >= 50 ? "call-slow" : "call"
                items.append(item(c.time.seconds, c.time.seconds + c.milliseconds / 1000, 0, cls, t, c.handler))
            }
            lane("handler calls", plugin, rows: 1, items)
        }

        mutating func spanLane(_ label: String, _ plugin: String, _ spans: [RunLanes.Span]) {
            guard !spans.isEmpty else { return }
            let packed = RunLanes.pack(spans.map { ($0.from, $0.to) }, gap: gap, maxRows: 48)
            var items: [JSONValue] = []
            for (span, row) in zip(spans, packed.rows) {
                let t = tip(span)
                let base: String
                switch span.kind {
                case .task: base = "task"
                case .http: base = "http"
                case .op: base = "op"
                case .transfer: base = "xfer"
                case .system: base = "sys"
                }
                let cls: String
                if span.outcome == "dropped" {
                    cls = "m-warn"
                } else if span.outcome == "expired" && span.kind == .task {
                    cls = "task-expired"
                } else if span.failed {
                    cls = "\(base)-fail"
                } else if !span.ended {
                    cls = "\(base)-open"
                } else {
                    cls = base
                }
                if cls == "m-warn" {
                    items.append(item(span.from, span.from, row, cls, t, nil))
                    continue
                }
                if span.kind == .transfer, let started = span.started, started > span.from {
                    items.append(item(span.from, started, row, "xfer-queued", t, nil))
                    items.append(item(started, span.to, row, cls, t, span.label))
                } else {
                    items.append(item(span.from, span.to, row, cls, t, span.label))
                }
                for (k, p) in span.progress.enumerated() {
                    guard let fraction = p.fraction else { continue }
                    let next = k + 1 < span.progress.count ? span.progress[k + 1].t : span.to
                    var piece = item(p.t, next, row, "prog", t, nil)
                    if case .array(var fields) = piece {
                        fields.append(RunLanes.number(fraction))
                        piece = .array(fields)
                    }
                    items.append(piece)
                }
                for m in span.marks {
                    let warn = [ReportEventName.taskExpiring, .transferError, .transferRetrying, .transferDidFail]
                        .contains(m.event)
                    items.append(item(m.t, m.t, row, warn ? "m-expire" : "m-info", tip(m), m.name))
                }
            }
            lane(label, plugin, rows: packed.count, items)
        }

        mutating func logLane(_ plugin: String) {
            let logs = lanes.logs.filter { $0.text("plugin") == plugin }
            guard !logs.isEmpty else { return }
            let packed = RunLanes.pack(logs.map { ($0.t, $0.t) }, gap: gap, maxRows: 3)
            var items: [JSONValue] = []
            for (log, row) in zip(logs, packed.rows) {
                let level = log.text("level") ?? "info"
                let cls = ["debug", "info", "warning", "error"].contains(level) ? "m-log-\(level)" : "m-log-info"
                items.append(item(log.t, log.t, row, cls, tip(log), nil))
            }
            lane("log", plugin, rows: packed.count, items)
        }
    }
}
