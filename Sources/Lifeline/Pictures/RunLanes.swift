/// A report read into spans and marks along its timeline: what the three pictures (`ReportPage`,
/// `ChromeTrace`, `LaneChart`) share, so that they agree on what happened when.
///
/// Reading never fails and never traps: a report of another version, a missing field or an
/// unknown event is drawn as far as it goes, because the picture of a broken run is the one most
/// needed. Times are clamped to ±1e9 s so that later arithmetic (pixels, microseconds, columns)
/// cannot overflow.
struct RunLanes {
    /// The app's state as iOS would report it, in the order the legends list them.
    enum AppState: String, CaseIterable {
        case active, inactive, background, suspended, notRunning
    }

    /// One timeline entry as the report wrote it, `t` and `event` included in `fields`.
    struct Event {
        var index: Int
        var t: Double
        var name: String
        var fields: [(String, JSONValue)]

        /// `name` as one of the declared names, or one this version does not know.
        var event: ReportEventName { ReportEventName(rawValue: name) }

        subscript(key: String) -> JSONValue? { fields.first { $0.0 == key }?.1 }

        /// The field as text: strings as they are, other values as JSON; nil when absent.
        func text(_ key: String) -> String? { self[key].map(RunLanes.display) }
    }

    /// A stretch of time in one app state, and the event that began it (nil for the start).
    struct StateSpan {
        var from: Double
        var to: Double
        var state: AppState
        var cause: Event?
    }

    /// One background stretch's budget: it starts at `start`, the expiration handlers are due at
    /// `expiration` and the time runs out at `runsOut`; `until` is when the app left the
    /// background (suspended, foreground, not running) or the timeline ended.
    struct Budget {
        var start: Double
        var expiration: Double
        var runsOut: Double
        var until: Double
        var cause: Event?
    }

    enum SpanKind: String {
        case task, http, op, transfer
        /// A task the system ran for a plugin (BGTaskScheduler).
        case system
    }

    /// Something with a beginning and an end: a background task, an HTTP exchange, a queue
    /// operation, a transfer.
    struct Span {
        var kind: SpanKind
        var plugin: String
        /// Which lane of the plugin it belongs to beyond its kind: the queue's name for operations.
        var lane: String
        var label: String
        var from: Double
        var to: Double
        /// False when the timeline ended (or the app stopped) before the span did.
        var ended: Bool
        /// How it ended, in a word: `ended`, `expired`, `200`, `error`, `finished`, `dropped`, `open`, …
        var outcome: String
        /// Whether the outcome is a failure, drawn in red.
        var failed: Bool
        /// Every event of the span, first to last, for the tooltips.
        var events: [Event]
        /// Events within the span worth a tick: taskExpiring, transfer retries and errors.
        var marks: [Event] = []
        /// Transfer progress: when, and the fraction received when the total is known.
        var progress: [(t: Double, fraction: Double?)] = []
        /// For transfers, when the transfer left the queue and started.
        var started: Double?
    }

    var start: Double = 0
    var end: Double = 1
    var budgetSeconds: Double?
    var expirationLead: Double?
    /// Every timeline entry that is an object, in the report's order.
    var events: [Event] = []
    var states: [StateSpan] = []
    var budgets: [Budget] = []
    var spans: [Span] = []
    var logs: [Event] = []
    /// Events that stand on their own: the app's ends, errors, watchdogs, memory warnings.
    var markers: [Event] = []
    /// Events no lane knows, drawn on a lane of their own so nothing in the report is hidden.
    var others: [Event] = []
    var calls: [HandlerCall] = []
    /// Plugin names: the report's roster first, then any other name the timeline or calls use.
    var plugins: [String] = []
    var failedExpectations: [JSONValue] = []
    var termination: JSONValue?
    var outcome: String?
    var profile: String?

    /// The time span every picture shows.
    var duration: Double { max(end - start, 0.001) }

    init(_ run: RenderedRun) {
        let report = run.report
        outcome = report["outcome"].flatMap { if case .string(let s) = $0 { s } else { nil } }
        profile = report["profile"].flatMap { if case .string(let s) = $0 { s } else { nil } }
        if let limits = report["limits"] {
            budgetSeconds = limits["budget"]?.doubleValue.map { RunLanes.clamp($0, 0, 1e9) }
            expirationLead = limits["expirationLead"]?.doubleValue.map { RunLanes.clamp($0, 0, 1e9) }
        }
        if let term = report["termination"], term != .null { termination = term }
        if case .array(let items)? = report["expectations"] {
            failedExpectations = items.filter { $0["passed"] != .bool(true) }
        }
        if case .array(let roster)? = report["plugins"] {
            for p in roster { if case .string(let name)? = p["name"] { addPlugin(name) } }
        }
        if case .array(let timeline)? = report["timeline"] {
            var last = 0.0
            for (i, item) in timeline.enumerated() {
                guard case .object(let fields) = item else { continue }
                let t = item["t"]?.doubleValue.map { RunLanes.clamp($0, -1e9, 1e9) } ?? last
                last = t
                let name = item["event"].map(RunLanes.display) ?? "?"
                events.append(Event(index: i, t: t, name: name, fields: fields))
            }
        }
        calls = run.calls.map {
            var c = $0
            c.time = .seconds(RunLanes.clamp($0.time.seconds, -1e9, 1e9))
            c.milliseconds = RunLanes.clamp($0.milliseconds, 0, 1e9)
            return c
        }
        var lo = events.map(\.t).min() ?? 0
        var hi = events.map(\.t).max() ?? 0
        for c in calls {
            lo = min(lo, c.time.seconds)
            hi = max(hi, c.time.seconds + c.milliseconds / 1000)
        }
        if let t = termination?["t"]?.doubleValue { hi = max(hi, RunLanes.clamp(t, -1e9, 1e9)) }
        start = min(lo, 0)
        end = hi > start ? hi : start + 1
        read(events)
        for c in calls { addPlugin(c.plugin) }
    }

    private mutating func addPlugin(_ name: String) {
        if !plugins.contains(name) { plugins.append(name) }
    }

    // MARK: - Reading the timeline

    private mutating func read(_ events: [Event]) {
        var state = AppState.notRunning
        var stateFrom = start
        var stateCause: Event?
        var relaunching = false
        var openBudget: Budget?
        // Spans still open, by key, in the order they opened; HTTP keeps a queue per key because
        // the same request can be in flight twice.
        var open: [String: Int] = [:]
        var inFlight: [String: [Int]] = [:]

        // `restart`: a second didEnterBackground in a row starts a fresh budget.
        func enter(_ new: AppState, at t: Double, _ cause: Event, into lanes: inout RunLanes, restart: Bool = false) {
            if new == state && !restart { return }
            if t > stateFrom {
                lanes.states.append(StateSpan(from: stateFrom, to: t, state: state, cause: stateCause))
            }
            if new != .background || restart, var b = openBudget {
                b.until = max(t, b.start)
                lanes.budgets.append(b)
                openBudget = nil
            }
            if new == .background, openBudget == nil, let budget = lanes.budgetSeconds {
                let lead = min(lanes.expirationLead ?? 0, budget)
                openBudget = Budget(
                    start: t, expiration: t + budget - lead, runsOut: t + budget, until: t, cause: cause)
            }
            state = new
            stateFrom = max(t, stateFrom)
            stateCause = cause
        }

        // Tasks and queue operations belong to the app: when it ends they are gone, with no
        // taskEnded of their own (transfers are the host's and go on).
        func closeWithTheApp(at t: Double) {
            for (key, i) in open where spans[i].kind == .task || spans[i].kind == .op || spans[i].kind == .system {
                spans[i].to = max(t, spans[i].from)
                spans[i].ended = true
                spans[i].outcome = "app ended"
                open[key] = nil
            }
        }

        for e in events {
            let plugin = e.text("plugin") ?? ""
            if !plugin.isEmpty { addPlugin(plugin) }
            switch e.event {
            case .didFinishLaunching:
                // A launch in the background starts a budget of its own.
                enter(relaunching ? .background : .inactive, at: e.t, e, into: &self, restart: relaunching)
                relaunching = false
            case .didBecomeActive: enter(.active, at: e.t, e, into: &self)
            case .willResignActive, .willEnterForeground: enter(.inactive, at: e.t, e, into: &self)
            case .didEnterBackground: enter(.background, at: e.t, e, into: &self, restart: true)
            case .suspended: enter(.suspended, at: e.t, e, into: &self)
            case .willTerminate, .killed, .forceQuit, .terminated, .endedWhileSuspended:
                markers.append(e)
                enter(.notRunning, at: e.t, e, into: &self)
                closeWithTheApp(at: e.t)
            case .relaunch:
                markers.append(e)
                relaunching = true
            case .resumed:
                // The system woke the app in the background: a budget of its own starts.
                markers.append(e)
                enter(.background, at: e.t, e, into: &self, restart: true)
            case .memoryWarning, .didReceiveMemoryWarning, .pluginError, .watchdog, .endUnknownTask,
                .didFinishTransferEvents, .performFetch, .didReceiveRemoteNotification, .fetchCompleted,
                .pushCompleted, .runTasks, .charging, .network, .systemTaskSubmitted, .systemTaskCancelled,
                .systemTaskDropped, .transferEventsCompleted, .transferEventsTimedOut:
                markers.append(e)
            case .log: logs.append(e)
            case .taskBegan, .taskExpiring, .taskEnded:
                readTask(e, kind: .task, plugin: plugin, open: &open)
            case .systemTaskStarted, .systemTaskExpiring, .systemTaskCompleted:
                readTask(e, kind: .system, plugin: plugin, open: &open)
            case .httpRequest:
                let key = "http\u{0}\(plugin)\u{0}\(e.text("method") ?? "")\u{0}\(e.text("url") ?? "")"
                inFlight[key, default: []].append(spans.count)
                let label = [e.text("method"), e.text("url")].compactMap { $0 }.joined(separator: " ")
                spans.append(
                    Span(
                        kind: .http, plugin: plugin, lane: "", label: label, from: e.t, to: e.t, ended: false,
                        outcome: "open", failed: false, events: [e]))
            case .httpResponse:
                let key = "http\u{0}\(plugin)\u{0}\(e.text("method") ?? "")\u{0}\(e.text("url") ?? "")"
                guard var queue = inFlight[key], !queue.isEmpty else {
                    orphan(.http, e, plugin: plugin, lane: "", label: e.text("url") ?? "response")
                    continue
                }
                let i = queue.removeFirst()
                inFlight[key] = queue
                spans[i].events.append(e)
                spans[i].to = max(e.t, spans[i].from)
                spans[i].ended = true
                if let status = e["status"]?.doubleValue {
                    spans[i].outcome = e.text("status") ?? ""
                    spans[i].failed = status >= 400
                } else {
                    spans[i].outcome = "error"
                    spans[i].failed = true
                }
            case .opStarted:
                let queue = e.text("queue") ?? ""
                let key = "op\u{0}\(plugin)\u{0}\(queue)\u{0}\(e.text("op") ?? "")"
                open[key] = spans.count
                spans.append(
                    Span(
                        kind: .op, plugin: plugin, lane: queue, label: e.text("name") ?? "op \(e.text("op") ?? "?")",
                        from: e.t, to: e.t, ended: false, outcome: "open", failed: false, events: [e]))
            case .opFinished:
                let queue = e.text("queue") ?? ""
                let key = "op\u{0}\(plugin)\u{0}\(queue)\u{0}\(e.text("op") ?? "")"
                guard let i = open[key] else {
                    // An operation that never started (cancelled while queued) is a mark.
                    orphan(.op, e, plugin: plugin, lane: queue, label: e.text("name") ?? "op \(e.text("op") ?? "?")")
                    spans[spans.count - 1].outcome = RunLanes.operationResult(e)
                    spans[spans.count - 1].failed = spans[spans.count - 1].outcome != "finished"
                    continue
                }
                let result = RunLanes.operationResult(e)
                spans[i].events.append(e)
                spans[i].to = max(e.t, spans[i].from)
                spans[i].ended = true
                spans[i].outcome = result
                spans[i].failed = result != "finished"
                open[key] = nil
            case .opDropped:
                spans.append(
                    Span(
                        kind: .op, plugin: plugin, lane: e.text("queue") ?? "",
                        label: e.text("name") ?? "op \(e.text("op") ?? "?")", from: e.t, to: e.t, ended: true,
                        outcome: "dropped", failed: false, events: [e]))
            case .transferQueued, .transferStarted, .transferProgress, .transferResumed, .transferRestarted,
                .transferRetrying, .transferEnded, .transferError, .transferDidFinish, .transferDidFail:
                readTransfer(e, plugin: plugin, open: &open)
            default:
                others.append(e)
            }
        }
        // What is still open at the end runs to the end of the timeline, or to the moment the app
        // stopped running, when it did.
        let stopped = state == .notRunning ? stateFrom : end
        for i in spans.indices where !spans[i].ended {
            spans[i].to = max(spans[i].from, stopped)
        }
        if end > stateFrom || states.isEmpty {
            states.append(StateSpan(from: stateFrom, to: max(end, stateFrom), state: state, cause: stateCause))
        }
        if var b = openBudget {
            b.until = max(end, b.start)
            budgets.append(b)
        }
    }

    /// The end of a span whose beginning the timeline does not have: a span of no length.
    private mutating func orphan(_ kind: SpanKind, _ e: Event, plugin: String, lane: String, label: String) {
        let failed = e["error"] != nil || (e["status"]?.doubleValue ?? 0) >= 400
        spans.append(
            Span(
                kind: kind, plugin: plugin, lane: lane, label: label, from: e.t, to: e.t, ended: true,
                outcome: e.text("status") ?? (e["error"] != nil ? "error" : "ended"), failed: failed, events: [e]))
    }

    /// A background task's span, or a task the system ran: it begins, is marked when it expires,
    /// and ends, expired or unsuccessful in red.
    private mutating func readTask(_ e: Event, kind: SpanKind, plugin: String, open: inout [String: Int]) {
        let key = "\(kind.rawValue)\u{0}\(plugin)\u{0}\(e.text("task") ?? "")"
        if e.event == .taskBegan || e.event == .systemTaskStarted {
            open[key] = spans.count
            let label = kind == .task ? taskLabel(e) : "\(e.text("identifier") ?? "task") (\(e.text("kind") ?? "?"))"
            spans.append(
                Span(
                    kind: kind, plugin: plugin, lane: "", label: label, from: e.t, to: e.t, ended: false,
                    outcome: "open", failed: false, events: [e]))
            return
        }
        guard let i = open[key] else { return others.append(e) }
        spans[i].events.append(e)
        if e.event == .taskExpiring || e.event == .systemTaskExpiring { return spans[i].marks.append(e) }
        let (outcome, failed) =
            kind == .task
            ? (e["expired"] == .bool(true) ? ("expired", true) : ("ended", false))
            : (e["success"] == .bool(true) ? ("completed", false) : ("unsuccessful", true))
        spans[i].to = max(e.t, spans[i].from)
        spans[i].ended = true
        spans[i].outcome = outcome
        spans[i].failed = failed
        open[key] = nil
    }

    private mutating func readTransfer(_ e: Event, plugin: String, open: inout [String: Int]) {
        let key = "transfer\u{0}\(plugin)\u{0}\(e.text("transfer") ?? "")"
        var index = open[key]
        if index == nil {
            guard e.event == .transferQueued || e.event == .transferStarted else {
                others.append(e)
                return
            }
            let what = [e.text("kind"), e.text("url")].compactMap { $0 }.joined(separator: " ")
            index = spans.count
            open[key] = spans.count
            spans.append(
                Span(
                    kind: .transfer, plugin: plugin, lane: "",
                    label: what.isEmpty ? "transfer \(e.text("transfer") ?? "?")" : what, from: e.t, to: e.t,
                    ended: false, outcome: "open", failed: false, events: []))
        }
        guard let i = index else { return }
        spans[i].events.append(e)
        switch e.event {
        case .transferStarted:
            if spans[i].started == nil { spans[i].started = e.t }
        case .transferProgress:
            let received = e["received"]?.doubleValue
            let total = e["total"]?.doubleValue
            var fraction: Double?
            if let received, let total, total > 0 { fraction = RunLanes.clamp(received / total, 0, 1) }
            spans[i].progress.append((e.t, fraction))
        case .transferEnded:
            let state = e.text("state") ?? "ended"
            spans[i].to = max(e.t, spans[i].from)
            spans[i].ended = true
            spans[i].outcome = state
            spans[i].failed = !["completed", "finished", "done", "succeeded"].contains(state)
        // Delivery events (transferDidFinish/Fail) may still follow: they are ticks on the span.
        case .transferDidFinish, .transferDidFail, .transferError, .transferRetrying, .transferRestarted,
            .transferResumed:
            spans[i].marks.append(e)
        default: break
        }
    }

    private func taskLabel(_ e: Event) -> String {
        let id = e.text("task") ?? "?"
        if let name = e.text("name") { return "\(name) #\(id)" }
        return "task #\(id)"
    }

    /// How an event ended the app, so that the three pictures draw each end alike.
    enum Ending {
        /// `terminate`: `willTerminate`, or `endedWhileSuspended` when the app was suspended,
        /// which iOS ends without telling it. The ordinary end of an app, no failure.
        case ordinary
        /// `kill` or `force-quit`: the app was stopped at once, whatever it was doing.
        case killed
        /// `terminated`: a rule ended it (watchdog, budget, task limit, completion).
        case terminated
    }

    /// How the event called `name` ends the app; nil for any other event.
    static func ending(_ name: ReportEventName) -> Ending? {
        switch name {
        case .willTerminate, .endedWhileSuspended: return .ordinary
        case .killed, .forceQuit: return .killed
        case .terminated: return .terminated
        default: return nil
        }
    }

    /// `opFinished`'s `result`, or the v1 flags it replaced.
    static func operationResult(_ e: Event) -> String {
        if let r = e.text("result") { return r }
        for flag in ["timedOut", "cancelled", "expired", "failed"] where e[flag] == .bool(true) { return flag }
        return "finished"
    }

    // MARK: - Helpers

    /// A JSON value as a person reads it: strings without quotes, anything else as JSON.
    static func display(_ value: JSONValue) -> String {
        if case .string(let s) = value { return s }
        return value.serialized()
    }

    /// Seconds (or any quantity) as a JSON number rounded to thousandths, never trapping.
    static func number(_ x: Double) -> JSONValue {
        .number(ReportNumber.seconds(clamp(x, -1e12, 1e12)))
    }

    /// Seconds as whole microseconds, as trace events count time.
    static func microseconds(_ seconds: Double) -> Int64 {
        Int64(clamp(seconds * 1e6, -9e15, 9e15).rounded())
    }

    /// `x` kept within `lo...hi`; NaN becomes `lo`.
    static func clamp(_ x: Double, _ lo: Double, _ hi: Double) -> Double {
        guard x == x else { return lo }
        return min(max(x, lo), hi)
    }

    /// The state at time `t` (the last span that began at or before it).
    func state(at t: Double) -> AppState {
        var found = states.first?.state ?? .notRunning
        for s in states {
            if s.from <= t { found = s.state } else { break }
        }
        return found
    }

    /// Greedy rows for intervals so that none overlaps another in its row: the first row whose
    /// last interval ended `gap` before this one began. Rows beyond `maxRows` reuse the last row,
    /// so a pathological run stays a bounded picture.
    static func pack(_ intervals: [(from: Double, to: Double)], gap: Double, maxRows: Int) -> (rows: [Int], count: Int)
    {
        var rowEnds: [Double] = []
        var rows: [Int] = []
        for (from, to) in intervals {
            var row = rowEnds.firstIndex { $0 + gap <= from }
            if row == nil {
                if rowEnds.count < max(maxRows, 1) {
                    rowEnds.append(-.infinity)
                    row = rowEnds.count - 1
                } else {
                    // The row that frees first.
                    row = rowEnds.indices.min { rowEnds[$0] < rowEnds[$1] }
                }
            }
            let r = row ?? 0
            rowEnds[r] = max(rowEnds[r], to)
            rows.append(r)
        }
        return (rows, max(rowEnds.count, 1))
    }
}
