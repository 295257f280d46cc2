import Foundation
import Synchronization

/// One entry of the report's timeline.
public struct TimelineEvent: Equatable, Sendable {
    /// What the report keeps for one event, about, beside the text of its strings: a plugin's cap
    /// counts the events it causes (see docs/guarantees.md).
    public static let recordedBytes = 128

    public var time: HostTime
    /// The event's name: a lifecycle notification, `taskBegan`, `suspended`, …
    public var event: String
    private var storage: Storage

    /// The fields as the report writes them. The task events, which a plugin can make hundreds of
    /// thousands of, keep theirs inline: no array is made until the report or a reader asks.
    private enum Storage: Sendable {
        case fields([(String, JSONValue)])
        /// plugin, task, then `name` and `expired` when given.
        case task(plugin: String, task: Int, name: String?, expired: Bool?)
        /// plugin, queue, op, then `name` when given, then `result` when it finished.
        case operation(plugin: String, queue: String, op: Int, name: String?, finished: OperationEnding?)
    }

    /// How a queue operation finished: `opFinished`'s `result`.
    public struct OperationEnding: Sendable {
        public var timedOut, cancelled, expired, failed: Bool
        public init(timedOut: Bool, cancelled: Bool, expired: Bool, failed: Bool) {
            (self.timedOut, self.cancelled, self.expired, self.failed) = (timedOut, cancelled, expired, failed)
        }

        /// One word: `timedOut`, `cancelled` or `expired` when the host stopped it (which also
        /// makes its body fail), else `failed` when its body raised, else `finished`.
        public var result: String {
            if timedOut { return "timedOut" }
            if cancelled { return "cancelled" }
            if expired { return "expired" }
            return failed ? "failed" : "finished"
        }
    }

    public init(time: HostTime, event: String, fields: [(String, JSONValue)] = []) {
        self.time = time
        self.event = event
        self.storage = .fields(fields)
    }

    /// A task event (`taskBegan`, `taskEnded`, `taskExpiring`, `endUnknownTask`): the fields
    /// `plugin`, `task`, and `name` or `expired` when given, in that order.
    public static func task(
        time: HostTime, event: String, plugin: String, task: Int, name: String? = nil, expired: Bool? = nil
    ) -> TimelineEvent {
        var e = TimelineEvent(time: time, event: event)
        e.storage = .task(plugin: plugin, task: task, name: name, expired: expired)
        return e
    }

    /// A queue operation's event (`opStarted`, `opFinished`): the fields `plugin`, `queue`, `op`,
    /// `name` when given, and `result` when `finished` is given, in that order.
    public static func operation(
        time: HostTime, event: String, plugin: String, queue: String, op: Int, name: String?,
        finished: OperationEnding? = nil
    ) -> TimelineEvent {
        var e = TimelineEvent(time: time, event: event)
        e.storage = .operation(plugin: plugin, queue: queue, op: op, name: name, finished: finished)
        return e
    }

    /// The other fields, in the order the report writes them.
    public var fields: [(String, JSONValue)] {
        get {
            switch storage {
            case .fields(let fields): return fields
            case .task(let plugin, let task, let name, let expired):
                var fields: [(String, JSONValue)] = [("plugin", .string(plugin)), ("task", .int(Int64(task)))]
                if let name { fields.append(("name", .string(name))) }
                if let expired { fields.append(("expired", .bool(expired))) }
                return fields
            case .operation(let plugin, let queue, let op, let name, let finished):
                var fields: [(String, JSONValue)] = [
                    ("plugin", .string(plugin)), ("queue", .string(queue)), ("op", .int(Int64(op))),
                ]
                if let name { fields.append(("name", .string(name))) }
                if let f = finished { fields.append(("result", .string(f.result))) }
                return fields
            }
        }
        set { storage = .fields(newValue) }
    }

    public static func == (a: TimelineEvent, b: TimelineEvent) -> Bool { a.json == b.json }

    /// The field called `key`.
    public subscript(key: String) -> JSONValue? { fields.first { $0.0 == key }?.1 }

    public var json: JSONValue {
        .object([("t", .number(ReportNumber.seconds(time))), ("event", .string(event))] + fields)
    }

    /// One line for a person watching: `[  27.000s] taskEnded plugin=save-changes task=1`.
    public var humanLine: String {
        let t = TimelineEvent.paddedSeconds(time.seconds)
        let rest = fields.map { key, value -> String in
            if case .string(let s) = value { return "\(key)=\(s.contains(" ") ? "\"\(s)\"" : s)" }
            return "\(key)=\(value.serialized())"
        }
        return (["[\(t)s]", event] + rest).joined(separator: " ")
    }
}

extension TimelineEvent {
    /// Seconds with three decimals, padded to 9 columns, for the live timeline.
    public static func paddedSeconds(_ seconds: Double) -> String {
        let ms = Int64((seconds * 1000).rounded())
        let frac = String(ms % 1000)
        let text = String(ms / 1000) + "." + String(repeating: "0", count: 3 - frac.count) + frac
        return String(repeating: " ", count: max(0, 9 - text.count)) + text
    }
}

/// Collects the timeline and writes the report (SPEC 2.3).
///
/// Threading: appended on the main executor; read by the watchdog's thread when Swift code
/// overruns (W3), hence the lock.
public final class Recorder: Sendable {
    private struct State {
        var timeline: [TimelineEvent] = []
        var plugins: [(String, String, String)] = []
        var termination: Termination?
        var pluginErrors = 0
        var expectations: JSONValue?
        var calls: [HandlerCall] = []
    }

    private let state = Locked(State())
    /// Mirrors `termination != nil`, so the host's check after every call takes no lock.
    private let terminated = Atomic<Bool>(false)
    private let observer: (@Sendable (TimelineEvent) -> Void)?
    /// Whether the events are kept for the report (and so count against the plugins' caps).
    public let keepsTimeline: Bool
    public let profileName: String
    /// The profile's figures, as the report's `limits` writes them; nil when only a name was given.
    public let profile: Profile?

    /// The report's format: 2 since `log` events, task names on every task event, `result` on
    /// `opFinished`, step events, `limits` and `expectations` (docs/report.md).
    public static let formatVersion = 2

    /// - Parameters:
    ///   - observer: sees each event as it is recorded (the live timeline of `run`).
    ///   - keepsTimeline: whether to keep the events for the report; a long `run` with no
    ///     `--report` passes false, so its memory does not grow with every event.
    public init(
        profileName: String, keepsTimeline: Bool = true, observer: (@Sendable (TimelineEvent) -> Void)? = nil
    ) {
        self.profileName = profileName
        self.profile = nil
        self.keepsTimeline = keepsTimeline
        self.observer = observer
    }

    /// A recorder whose report carries the profile's figures under `limits`.
    public init(
        profile: Profile, keepsTimeline: Bool = true, observer: (@Sendable (TimelineEvent) -> Void)? = nil
    ) {
        self.profileName = profile.name
        self.profile = profile
        self.keepsTimeline = keepsTimeline
        self.observer = observer
    }

    /// The `expectations` list of the report (simulate sets it once the scenario's `expect`
    /// lines are checked).
    public func setExpectations(_ list: JSONValue) { state.withLock { $0.expectations = list } }

    /// Whether every recorded event is held to `ReportEvents`: set LIFELINE_CHECK_EVENTS, as
    /// scripts/test does, so that a new event, field or value cannot reach reports without the
    /// table (and the `expect` checks that use it). A user's run never stops on it.
    static let checksEvents = ProcessInfo.processInfo.environment["LIFELINE_CHECK_EVENTS"] != nil

    /// Records one of `ReportEvents` (with LIFELINE_CHECK_EVENTS, anything else traps).
    public func record(_ event: consuming TimelineEvent) {
        if Self.checksEvents {
            precondition(ReportEvents.admits(event), "not in ReportEvents: \(event.json.serialized())")
        }
        observer?(event)
        guard keepsTimeline else { return }
        // Moved into the timeline, not copied: a task event holds several strings.
        var moving = Optional(event)
        state.withLock { $0.timeline.append(moving.take()!) }
    }

    /// Notes a plugin in the report's `plugins` list.
    public func notePlugin(name: String, kind: String, status: String) {
        state.withLock { s in
            if let i = s.plugins.firstIndex(where: { $0.0 == name }) {
                s.plugins[i] = (name, kind, status)
            } else {
                s.plugins.append((name, kind, status))
            }
        }
    }

    public func noteTermination(_ t: Termination) {
        state.withLock { $0.termination = $0.termination ?? t }
        terminated.store(true, ordering: .releasing)
    }

    /// Whether a termination was noted.
    public var isTerminated: Bool { terminated.load(ordering: .acquiring) }
    public func notePluginError() { state.withLock { $0.pluginErrors += 1 } }

    public var timeline: [TimelineEvent] { state.withLock { $0.timeline } }

    /// Notes a call into plugin code with its real duration, for the pictures (never the report).
    public func recordCall(_ call: HandlerCall) { state.withLock { $0.calls.append(call) } }

    /// The calls noted with `recordCall`, in the order they were made.
    public var handlerCalls: [HandlerCall] { state.withLock { $0.calls } }
    public var termination: Termination? { state.withLock { $0.termination } }
    public var pluginErrorCount: Int { state.withLock { $0.pluginErrors } }

    /// The exit code of SPEC 2.4 for what happened: 1 if the app was terminated by a rule or a
    /// plugin raised an error, else 0.
    public var exitCode: Int32 { state.withLock { $0.termination != nil || $0.pluginErrors > 0 ? 1 : 0 } }

    /// The report, as one JSON object.
    public func report(with extra: Termination? = nil) -> JSONValue {
        state.withLock { s in
            let termination = s.termination ?? extra
            var object: [(String, JSONValue)] = [
                ("lifeline", .int(Int64(Recorder.formatVersion))),
                ("profile", .string(profileName)),
            ]
            if let p = profile {
                object.append(
                    (
                        "limits",
                        .object([
                            ("budget", .number(ReportNumber.seconds(p.budget))),
                            ("expirationLead", .number(ReportNumber.seconds(p.expirationLead))),
                            ("launch", .number(ReportNumber.seconds(p.launchLimit))),
                            ("didEnterBackground", .number(ReportNumber.seconds(p.backgroundLimit))),
                            ("transition", .number(ReportNumber.seconds(p.transitionLimit))),
                            ("willTerminate", .number(ReportNumber.seconds(p.terminateLimit))),
                            ("expirationHandler", .number(ReportNumber.seconds(p.expirationHandlerLimit))),
                            ("taskLimit", .int(Int64(p.taskLimit))),
                        ])
                    ))
            }
            object += [
                ("outcome", .string(termination == nil ? "completed" : "terminated")),
                ("termination", termination?.json ?? .null),
                (
                    "plugins",
                    .array(
                        s.plugins.map {
                            .object([("name", .string($0.0)), ("kind", .string($0.1)), ("status", .string($0.2))])
                        })
                ),
                ("timeline", .array(s.timeline.map(\.json))),
            ]
            if let e = s.expectations { object.append(("expectations", e)) }
            return .object(object)
        }
    }
}
