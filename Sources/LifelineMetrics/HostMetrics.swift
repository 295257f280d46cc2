#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Lifeline
import LifelineLua
import Prometheus
import Synchronization

/// The live host's counters and gauges, in the Prometheus text format (`page()`): what
/// `lifeline run --metrics` serves as /metrics (docs/operations.md, "Metrics").
///
/// Fed three ways, none of which touches the host from another thread:
/// - `observe(_:)` with each timeline event as the recorder records it (`LiveRun`'s `onEvent`):
///   terminations, plugin errors, HTTP answers, transfers, reloads;
/// - `noteHandlerCall(plugin:handler:seconds:)` from `HostConfiguration.onHandlerCall`, on the main
///   executor, after every call into plugin code;
/// - `reading(of:)` at scrape time, on the main executor between two jobs (`LiveRun.onMainExecutor`),
///   then `apply(_:)` on another thread: the app's state, the background tasks, the time left, the
///   plugins' memory.
///
/// Labels are bounded: plugin names, and kinds from closed sets (event kinds, termination kinds,
/// HTTP status classes and failure kinds, transfer states). A URL, a task's name or a queue's name
/// never becomes a label, so the page grows with the plugins and nothing else.
///
/// Threading: any thread. Counters and gauges are atomics; the tables that find them take a lock
/// held for a dictionary look-up.
public final class HostMetrics: Sendable {
    /// What the page is made from: swift-prometheus' registry, which `page()` emits.
    public let registry: PrometheusCollectorRegistry

    /// The version `lifeline_build_info` carries.
    public static let version = "0.1.0"

    private let handlerDuration: DurationHistogram
    private let appStates: [(AppState, Gauge)]
    private let timeRemaining: Gauge
    private let reloads: [String: Counter]
    private let transferGauges: [(TransferState, Gauge)]
    private let tables = Mutex(Tables())
    /// Held while a reading goes on the page.
    private let applying = Mutex(())

    /// The series made so far, by their labels, and the transfers under way.
    private struct Tables {
        /// plugin, then event kind.
        var handlerCalls: [String: [String: Counter]] = [:]
        var pluginErrors: [String: Counter] = [:]
        var terminations: [String: Counter] = [:]
        /// plugin, then outcome.
        var httpRequests: [String: [String: Counter]] = [:]
        var backgroundTasks: [String: Gauge] = [:]
        var memory: [String: Gauge] = [:]
        /// Each transfer not yet ended, by plugin and id, with its state.
        var transfers: [TransferKey: TransferState] = [:]
        /// How many of `transfers` are in each state.
        var transferCounts: [TransferState: Int] = [:]
    }

    private struct TransferKey: Hashable {
        var plugin: String
        var id: Int64
    }

    /// The states `lifeline_transfers` counts: the ones a transfer is in until it ends.
    enum TransferState: String, CaseIterable {
        case queued, running, retrying
    }

    /// The histogram's buckets, in seconds: handlers take microseconds to milliseconds, and the
    /// watchdog's limits run to tens of seconds.
    static let durationBuckets: [Duration] = [
        .microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(10),
        .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5), .seconds(10),
        .seconds(30),
    ]

    public init(version: String = HostMetrics.version) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        registry.makeGauge(descriptor: Family.buildInfo, labels: [("version", version)]).set(to: 1)
        appStates = AppState.allCases.map { state in
            (state, registry.makeGauge(descriptor: Family.appState, labels: [("state", state.rawValue)]))
        }
        appStates.first { $0.0 == .notRunning }?.1.set(to: 1)
        handlerDuration = registry.makeDurationHistogram(
            descriptor: Family.handlerDuration, buckets: Self.durationBuckets)
        timeRemaining = registry.makeGauge(descriptor: Family.timeRemaining)
        timeRemaining.set(to: .greatestFiniteMagnitude)
        reloads = Dictionary(uniqueKeysWithValues: ["ok", "failed"].map { result in
            (result, registry.makeCounter(descriptor: Family.reloads, labels: [("result", result)]))
        })
        transferGauges = TransferState.allCases.map { state in
            (state, registry.makeGauge(descriptor: Family.transfers, labels: [("state", state.rawValue)]))
        }
        for kind in Termination.Kind.allCases { _ = terminationCounter(kind.rawValue) }
    }

    /// The page's families: each name, after `lifeline_`, with its HELP line.
    private enum Family {
        static var buildInfo: MetricNameDescriptor {
            make("build_info", "Always 1; the version label says which lifeline serves the page.")
        }
        static var appState: MetricNameDescriptor { make("app_state", "1 for the app's state now, 0 for the others.") }
        static var handlerCalls: MetricNameDescriptor {
            make("handler_calls_total", "Calls into plugin code, by plugin and by the kind of event that made them.")
        }
        static var handlerDuration: MetricNameDescriptor {
            make("handler_duration_seconds", "Real time each call into plugin code took.")
        }
        static var backgroundTasks: MetricNameDescriptor {
            make("background_tasks", "Background tasks each plugin holds now.")
        }
        static var timeRemaining: MetricNameDescriptor {
            make(
                "background_time_remaining_seconds",
                "Background time left; 1.7976931348623157e+308 while the app is not in the background, as iOS says.")
        }
        static var terminations: MetricNameDescriptor {
            make("terminations_total", "Terminations of the app by a rule, by kind.")
        }
        static var pluginErrors: MetricNameDescriptor {
            make("plugin_errors_total", "Errors plugin code raised, by plugin.")
        }
        static var memory: MetricNameDescriptor {
            make("plugin_memory_bytes", "Bytes each Lua plugin's state holds now, with what the host keeps for it.")
        }
        static var httpRequests: MetricNameDescriptor {
            make(
                "http_requests_total",
                "HTTP requests plugins made, by plugin and outcome: the status class (2xx), or why no answer came.")
        }
        static var transfers: MetricNameDescriptor {
            make("transfers", "Background transfers not yet ended, by state.")
        }
        static var reloads: MetricNameDescriptor {
            make("reloads_total", "Reloads, by whether they were applied (ok) or changed nothing (failed).")
        }

        private static func make(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "lifeline", metricName: name, unitName: "", helpText: help)
        }
    }

    /// The page: every family with its HELP and TYPE lines, in the Prometheus text format 0.0.4.
    /// A family with no series yet (HTTP requests before the first answer, memory when no plugin
    /// is Lua, the per-plugin gauges before the first reading) still has its HELP and TYPE lines,
    /// which swift-prometheus writes only for a family with a series: every name is on every page.
    public func page() -> [UInt8] {
        var page = registry.emitToBuffer()
        // Decided from the page itself, not from the tables: a series made or removed after the
        // registry wrote the page (a reading, a first handler call on the main executor) would
        // otherwise leave a family on the page twice, or on it not at all.
        let families = [
            (Family.handlerCalls, "counter"), (Family.pluginErrors, "counter"), (Family.httpRequests, "counter"),
            (Family.backgroundTasks, "gauge"), (Family.memory, "gauge"),
        ]
        for (family, type) in families {
            let typeLine = Array("# TYPE \(family.name) \(type)\n".utf8)
            guard !Self.contains(page, typeLine) else { continue }
            page += Array("# HELP \(family.name) \(family.helpText ?? "")\n".utf8) + typeLine
        }
        return page
    }

    /// Whether `page` holds `line` at the start of one of its lines. It jumps from `#` to `#`
    /// (memchr), which only the HELP and TYPE lines start with, so it is quick on a long page.
    static func contains(_ page: [UInt8], _ line: [UInt8]) -> Bool {
        page.withUnsafeBytes { haystack in
            line.withUnsafeBytes { needle in
                guard let base = haystack.baseAddress, let want = needle.baseAddress, needle.count > 0 else { return false }
                var at = 0
                while at + needle.count <= haystack.count {
                    guard let hash = memchr(base + at, Int32(UInt8(ascii: "#")), haystack.count - at) else { return false }
                    let offset = base.distance(to: UnsafeRawPointer(hash))
                    if (offset == 0 || haystack[offset - 1] == UInt8(ascii: "\n")), offset + needle.count <= haystack.count,
                        memcmp(base + offset, want, needle.count) == 0
                    {
                        return true
                    }
                    at = offset + 1
                }
                return false
            }
        }
    }

    // MARK: - Handler calls

    /// One call into plugin code, `seconds` long. Main executor; a dictionary look-up under an
    /// uncontended lock, an atomic add and a histogram's lock.
    public func noteHandlerCall(plugin: String, handler: HandlerName, seconds: Double) {
        let event = Self.eventKind(handler)
        let counter = tables.withLock { tables in
            if let counter = tables.handlerCalls[plugin]?[event] { return counter }
            let counter = registry.makeCounter(
                descriptor: Family.handlerCalls, labels: [("plugin", plugin), ("event", event)])
            tables.handlerCalls[plugin, default: [:]][event] = counter
            return counter
        }
        counter.increment()
        handlerDuration.record(.nanoseconds(Int64((seconds * 1e9).rounded())))
    }

    /// The handler names the host gives that are already a kind of event.
    private static let fixedKinds: Set<String> = [
        "timer", "expiration handler", "expirationHandler", "Swift task", "load",
    ]

    /// The kinds a handler named with a number, a queue's or a task's name, or an identifier
    /// falls into: the name's first words, never the rest.
    private static let prefixedKinds: [(prefix: String, kind: String)] = [
        ("background task", "background task"), ("operation", "operation"), ("queue ", "queue"),
        ("task ", "system task"),
    ]

    /// The `event` label of a handler: a lifecycle notification's name, or one of a few fixed
    /// kinds; never a name a plugin chose.
    static func eventKind(_ handler: HandlerName) -> String {
        let name = handler.description
        if LifecycleEventName(rawValue: name) != nil || fixedKinds.contains(name) { return name }
        for (prefix, kind) in prefixedKinds where name.hasPrefix(prefix) { return kind }
        return "other"
    }

    // MARK: - Timeline events

    /// Counts what `event` tells: terminations, plugin errors, HTTP answers, transfers, reloads.
    /// Any thread (the recorder's, which is the main executor's in a live run).
    public func observe(_ event: TimelineEvent) {
        switch ReportEventName(rawValue: event.event) {
        case .terminated:
            terminationCounter(Self.string(event["kind"]) ?? "unknown").increment()
        case .pluginError:
            guard let plugin = Self.string(event["plugin"]) else { return }
            pluginErrorCounter(plugin).increment()
        case .httpResponse:
            guard let plugin = Self.string(event["plugin"]) else { return }
            httpCounter(plugin, Self.outcome(event)).increment()
        case .reloaded:
            let result = Self.string(event["result"]) == "failed" ? "failed" : "ok"
            reloads[result]?.increment()
        case .transferQueued: moveTransfer(event, to: .queued)
        case .transferStarted, .transferResumed, .transferRestarted: moveTransfer(event, to: .running)
        case .transferRetrying: moveTransfer(event, to: .retrying)
        case .transferEnded: moveTransfer(event, to: nil)
        default: return
        }
    }

    /// `httpResponse`'s outcome: the status's class (`2xx`), or the failure's kind (`timeout`).
    static func outcome(_ event: TimelineEvent) -> String {
        if case .int(let status) = event["status"], (100...599).contains(status) { return "\(status / 100)xx" }
        if let error = string(event["error"]), HTTPFailure.Kind(rawValue: error) != nil { return error }
        return "other"
    }

    private static func string(_ value: JSONValue?) -> String? {
        if case .string(let s) = value { return s }
        return nil
    }

    /// Counts the terminations that earlier runs on the same state dir ended in, one for each
    /// crash report in `folder` (`LiveRun.crashReportsFolder`, read by `LiveRun.crashReportKind`).
    /// A termination ends the run that suffered it, so no page of that run could show it; the
    /// next run's page does (after systemd's `Restart=on-failure`, say). Only the kinds this
    /// version knows count, so a stray file cannot add a label. Call it before the run starts.
    public func countEarlierTerminations(inReports folder: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for kind in names.compactMap(LiveRun.crashReportKind(fileName:)) { terminationCounter(kind.rawValue).increment() }
    }

    private func terminationCounter(_ kind: String) -> Counter {
        // The kinds are a closed set; one this version does not know still gets a series.
        tables.withLock { tables in
            if let counter = tables.terminations[kind] { return counter }
            let counter = registry.makeCounter(descriptor: Family.terminations, labels: [("kind", kind)])
            tables.terminations[kind] = counter
            return counter
        }
    }

    private func pluginErrorCounter(_ plugin: String) -> Counter {
        tables.withLock { tables in
            if let counter = tables.pluginErrors[plugin] { return counter }
            let counter = registry.makeCounter(descriptor: Family.pluginErrors, labels: [("plugin", plugin)])
            tables.pluginErrors[plugin] = counter
            return counter
        }
    }

    private func httpCounter(_ plugin: String, _ outcome: String) -> Counter {
        tables.withLock { tables in
            if let counter = tables.httpRequests[plugin]?[outcome] { return counter }
            let counter = registry.makeCounter(
                descriptor: Family.httpRequests, labels: [("plugin", plugin), ("outcome", outcome)])
            tables.httpRequests[plugin, default: [:]][outcome] = counter
            return counter
        }
    }

    /// Moves a transfer to `state`, or forgets it (nil: it ended), and sets the gauges: the two
    /// states it left and entered, counted as it moves, so a move costs the same with 10,000
    /// transfers under way as with one.
    private func moveTransfer(_ event: TimelineEvent, to state: TransferState?) {
        guard let plugin = Self.string(event["plugin"]), case .int(let id) = event["transfer"] else { return }
        let key = TransferKey(plugin: plugin, id: id)
        let counts = tables.withLock { tables in
            let old: TransferState?
            if let state { old = tables.transfers.updateValue(state, forKey: key) } else {
                old = tables.transfers.removeValue(forKey: key)
            }
            if let old { tables.transferCounts[old, default: 0] -= 1 }
            if let state { tables.transferCounts[state, default: 0] += 1 }
            return tables.transferCounts
        }
        for (state, gauge) in transferGauges { gauge.set(to: Double(counts[state] ?? 0)) }
    }

    // MARK: - Readings at scrape time

    /// What only the host knows, taken on the main executor as plain values (`reading(of:)`) and
    /// put on the page elsewhere (`apply`): the app's state, the background time left, and each
    /// plugin's tasks and memory.
    public struct Reading: Sendable {
        public var state: AppState
        public var timeRemaining: Double
        /// The plugins the host runs, retiring generations included.
        public var plugins: [String]
        /// Background tasks by plugin, 0 for a plugin that holds none.
        public var tasks: [String: Int]
        /// Bytes by Lua plugin; Swift plugins have no cap and no count.
        public var memory: [String: Int]
    }

    /// Reads the host now. Main executor only (`LiveRun.onMainExecutor`). It makes no series and
    /// takes no lock of the page's: making a plugin's first series copies its family's table
    /// (swift-prometheus), which with a thousand plugins is the main executor's time to spare.
    public static func reading(of host: LifelineHost) -> Reading {
        var reading = Reading(
            state: host.state, timeRemaining: host.backgroundTimeRemaining, plugins: [], tasks: [:], memory: [:])
        for (name, code) in host.pluginCodes {
            reading.plugins.append(name)
            reading.tasks[name] = 0
            if let lua = code as? LuaPlugin { reading.memory[name, default: 0] += lua.memoryUsed }
        }
        for task in host.activeTasks { reading.tasks[task.plugin, default: 0] += 1 }
        return reading
    }

    /// Puts `reading` on the page: makes the series it needs, drops those of plugins gone, sets
    /// the values. Any thread, one reading at a time; the caller keeps them in the order taken.
    public func apply(_ reading: Reading) {
        applying.withLock { _ in
            for (s, gauge) in appStates { gauge.set(to: s == reading.state ? 1 : 0) }
            timeRemaining.set(to: reading.timeRemaining)
            // Each plugin's error counter is on the page from the start, at 0, as a counter
            // should be: a query for a rise then sees the first error.
            for plugin in reading.plugins { _ = pluginErrorCounter(plugin) }
            setGauges(reading.tasks, \.backgroundTasks, Family.backgroundTasks)
            setGauges(reading.memory, \.memory, Family.memory)
        }
    }

    /// Reads the host and puts the reading on the page, both on the caller's thread, which must
    /// be the main executor's. `MetricsServer.reading` reads there and applies on its own side.
    public func read(_ host: LifelineHost) { apply(Self.reading(of: host)) }

    /// Sets one gauge per plugin in `values`. A plugin that was there before and is gone now (a
    /// reload removed it, and its old generation has ended) loses its series: the page lists the
    /// plugins the host runs, and plugins renamed over many reloads do not pile up on it.
    private func setGauges(
        _ values: [String: Int], _ table: WritableKeyPath<Tables, [String: Gauge]>, _ family: MetricNameDescriptor
    ) {
        let gauges = tables.withLock { tables in
            for plugin in values.keys where tables[keyPath: table][plugin] == nil {
                tables[keyPath: table][plugin] = registry.makeGauge(descriptor: family, labels: [("plugin", plugin)])
            }
            // Under the lock, as series are made, so the table and the registry agree.
            for plugin in tables[keyPath: table].keys where values[plugin] == nil {
                if let gauge = tables[keyPath: table].removeValue(forKey: plugin) { registry.unregisterGauge(gauge) }
            }
            return tables[keyPath: table]
        }
        for (plugin, gauge) in gauges { gauge.set(to: Double(values[plugin] ?? 0)) }
    }
}
