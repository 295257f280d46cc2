/// Runs as Chrome trace-event JSON (`--trace`), which Perfetto (ui.perfetto.dev) and
/// chrome://tracing open.
///
/// Each run is a process (pid = index + 1) named after its title. The process has an `app` track
/// with the app state as slices, the budget's expiration as instants and a "background time
/// remaining" counter, then tracks per plugin: its handler calls (real durations) and log lines,
/// its tasks, HTTP exchanges, queue operations and transfers. Slices that could overlap are packed
/// into numbered tracks, because trace viewers nest slices of one track by time and would draw
/// two concurrent tasks as parent and child.
///
/// `ts` is virtual time and `dur` of a handler call its real duration, both in microseconds.
public enum ChromeTrace {
    /// The trace: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
    public static func json(_ runs: [RenderedRun]) -> JSONValue {
        var events: [JSONValue] = []
        for (index, run) in runs.enumerated() {
            var builder = Builder(pid: index + 1, lanes: RunLanes(run))
            builder.build(title: run.title, sortIndex: index)
            events += builder.events
        }
        return .object([("traceEvents", .array(events)), ("displayTimeUnit", .string("ms"))])
    }

    /// One run's events; tracks are numbered in the order they are first needed.
    private struct Builder {
        let pid: Int
        let lanes: RunLanes
        var events: [JSONValue] = []
        var tracks: [String: Int] = [:]

        init(pid: Int, lanes: RunLanes) {
            self.pid = pid
            self.lanes = lanes
        }

        mutating func build(title: String, sortIndex: Int) {
            metadata("process_name", tid: 0, ("name", .string(title)))
            metadata("process_sort_index", tid: 0, ("sort_index", .int(Int64(sortIndex))))
            let app = track("app")
            appState(on: app)
            budget(on: app)
            // Each plugin's tracks sit together, in the roster's order.
            for plugin in lanes.plugins {
                let main = track(plugin)
                calls(of: plugin, on: main)
                for log in lanes.logs where log.text("plugin") == plugin {
                    let message = log.text("message") ?? ""
                    instant(String(message.prefix(80)), cat: "log", t: log.t, tid: main, scope: "t", args: log.fields)
                }
                spans(of: plugin)
            }
            markers(app: app)
            for e in lanes.others {
                instant(e.name, cat: "event", t: e.t, tid: app, scope: "t", args: e.fields)
            }
        }

        /// The track called `name`, made (with its name and sort order) on first use.
        mutating func track(_ name: String) -> Int {
            if let tid = tracks[name] { return tid }
            let tid = tracks.count + 1
            tracks[name] = tid
            metadata("thread_name", tid: tid, ("name", .string(name)))
            metadata("thread_sort_index", tid: tid, ("sort_index", .int(Int64(tid))))
            return tid
        }

        mutating func metadata(_ name: String, tid: Int, _ arg: (String, JSONValue)) {
            events.append(
                .object([
                    ("name", .string(name)), ("ph", .string("M")), ("pid", .int(Int64(pid))),
                    ("tid", .int(Int64(tid))), ("args", .object([arg])),
                ]))
        }

        mutating func complete(
            _ name: String, cat: String, ts: Int64, dur: Int64, tid: Int, args: [(String, JSONValue)]
        ) {
            events.append(
                .object([
                    ("name", .string(name)), ("cat", .string(cat)), ("ph", .string("X")), ("ts", .int(ts)),
                    ("dur", .int(max(dur, 1))), ("pid", .int(Int64(pid))), ("tid", .int(Int64(tid))),
                    ("args", .object(args)),
                ]))
        }

        /// An instant; scope `t` marks its track, `p` the whole process (terminations).
        mutating func instant(
            _ name: String, cat: String, t: Double, tid: Int, scope: String, args: [(String, JSONValue)]
        ) {
            events.append(
                .object([
                    ("name", .string(name)), ("cat", .string(cat)), ("ph", .string("i")),
                    ("ts", .int(RunLanes.microseconds(t))), ("s", .string(scope)), ("pid", .int(Int64(pid))),
                    ("tid", .int(Int64(tid))), ("args", .object(args)),
                ]))
        }

        mutating func appState(on tid: Int) {
            for s in lanes.states {
                let ts = RunLanes.microseconds(s.from)
                var args: [(String, JSONValue)] = [("state", .string(s.state.rawValue))]
                if let cause = s.cause { args.append(("since", .object(cause.fields))) }
                complete(
                    s.state.rawValue, cat: "app", ts: ts, dur: RunLanes.microseconds(s.to) - ts, tid: tid,
                    args: args)
            }
        }

        /// The counter falls from the budget to zero while the app is in the background: sampled
        /// where the budget starts, at every event meanwhile, at the expiration moment and where
        /// it runs out or the app leaves the background.
        mutating func budget(on tid: Int) {
            for b in lanes.budgets {
                let last = min(b.runsOut, b.until)
                var samples: [(Double, Double)] = [(b.start, b.runsOut - b.start)]
                var t = b.start
                for e in lanes.events where e.t > b.start && e.t < last && e.t > t {
                    samples.append((e.t, b.runsOut - e.t))
                    t = e.t
                }
                if b.expiration <= b.until {
                    samples.append((b.expiration, b.runsOut - b.expiration))
                    instant(
                        "expiration (budget - expirationLead)", cat: "budget", t: b.expiration, tid: tid,
                        scope: "t", args: [("remaining", RunLanes.number(b.runsOut - b.expiration))])
                }
                if b.runsOut <= b.until {
                    instant("budget runs out", cat: "budget", t: b.runsOut, tid: tid, scope: "t", args: [])
                }
                samples.append((last, 0))
                samples.sort { $0.0 < $1.0 }
                // The last sample at a moment wins: it is the one that holds until the next.
                var kept: [(Int64, Double)] = []
                for (t, value) in samples {
                    let ts = RunLanes.microseconds(t)
                    if let lastKept = kept.last, lastKept.0 == ts {
                        kept[kept.count - 1] = (ts, value)
                    } else {
                        kept.append((ts, value))
                    }
                }
                for (ts, value) in kept {
                    events.append(
                        .object([
                            ("name", .string("background time remaining")), ("cat", .string("budget")),
                            ("ph", .string("C")), ("ts", .int(ts)), ("pid", .int(Int64(pid))),
                            ("tid", .int(Int64(tid))),
                            ("args", .object([("seconds", RunLanes.number(max(value, 0)))])),
                        ]))
                }
            }
        }

        /// Handler calls at their virtual start, lasting their real time. Calls run one after
        /// another on the main executor, while virtual time stands still during a call; so a call
        /// starts no earlier than the previous one on its track ended, or the viewer would nest them.
        mutating func calls(of plugin: String, on tid: Int) {
            var cursor = Int64.min
            for call in lanes.calls where call.plugin == plugin {
                let virtual = RunLanes.microseconds(call.time.seconds)
                let ts = max(virtual, cursor)
                let dur = max(Int64(RunLanes.clamp(call.milliseconds * 1000, 1, 9e15).rounded()), 1)
                complete(
                    call.handler, cat: "handler", ts: ts, dur: dur, tid: tid,
                    args: [
                        ("plugin", .string(call.plugin)), ("handler", .string(call.handler)),
                        ("t", RunLanes.number(call.time.seconds)), ("ms", RunLanes.number(call.milliseconds)),
                    ])
                cursor = ts &+ dur
            }
        }

        mutating func spans(of plugin: String) {
            let mine = lanes.spans.filter { $0.plugin == plugin }
            let groups: [(String, [RunLanes.Span])] =
                [
                    ("tasks", mine.filter { $0.kind == .task }),
                    ("http", mine.filter { $0.kind == .http }),
                    ("transfers", mine.filter { $0.kind == .transfer }),
                    ("system tasks", mine.filter { $0.kind == .system }),
                ]
                + orderedQueues(mine).map { q in ("queue \(q)", mine.filter { $0.kind == .op && $0.lane == q }) }
            for (name, spans) in groups where !spans.isEmpty {
                // A microsecond apart at least, since a slice lasts one microsecond at least.
                let packed = RunLanes.pack(spans.map { ($0.from, max($0.to, $0.from + 1e-6)) }, gap: 0, maxRows: 64)
                for (span, row) in zip(spans, packed.rows) {
                    let tid = track(row == 0 ? "\(plugin) \(name)" : "\(plugin) \(name) \(row + 1)")
                    let ts = RunLanes.microseconds(span.from)
                    complete(
                        span.label, cat: span.kind.rawValue, ts: ts, dur: RunLanes.microseconds(span.to) - ts, tid: tid,
                        args: [
                            ("outcome", .string(span.outcome)), ("ended", .bool(span.ended)),
                            ("events", .array(span.events.map { .object($0.fields) })),
                        ])
                    for m in span.marks {
                        instant(m.name, cat: span.kind.rawValue, t: m.t, tid: tid, scope: "t", args: m.fields)
                    }
                }
            }
        }

        func orderedQueues(_ spans: [RunLanes.Span]) -> [String] {
            var queues: [String] = []
            for s in spans where s.kind == .op && !queues.contains(s.lane) { queues.append(s.lane) }
            return queues
        }

        /// Terminations and kills mark the whole process; a plugin's errors mark its track. The
        /// app's ordinary end (`terminate`, suspended or not) is an app event like the others.
        mutating func markers(app: Int) {
            var terminationShown = false
            for m in lanes.markers {
                var args = m.fields
                switch (RunLanes.ending(m.event), m.event) {
                case (.terminated, _), (.killed, _):
                    if m.event == .terminated, let term = lanes.termination, !terminationShown {
                        args.append(("termination", term))
                        terminationShown = true
                    }
                    instant(m.name, cat: "termination", t: m.t, tid: app, scope: "p", args: args)
                case (.ordinary, _):
                    instant(m.name, cat: "lifecycle", t: m.t, tid: app, scope: "t", args: args)
                case (nil, .pluginError), (nil, .watchdog), (nil, .endUnknownTask):
                    let plugin = m.text("plugin") ?? ""
                    instant(
                        m.name, cat: "error", t: m.t, tid: plugin.isEmpty ? app : track(plugin), scope: "t", args: args)
                default:
                    instant(m.name, cat: "event", t: m.t, tid: app, scope: "t", args: args)
                }
            }
            if let term = lanes.termination, !terminationShown {
                let t = term["t"]?.doubleValue.map { RunLanes.clamp($0, -1e9, 1e9) } ?? lanes.end
                instant("termination", cat: "termination", t: t, tid: app, scope: "p", args: [("termination", term)])
            }
        }
    }
}
