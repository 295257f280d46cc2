import Foundation
import Synchronization

/// Collects the timeline and writes the report (SPEC 2.3).
///
/// Threading: appended on the main executor; read by the watchdog's thread when Swift code
/// overruns (W3), hence the lock.
public final class Recorder: Sendable {
    private struct State {
        let timeline = TimelineStore()
        var plugins: [(String, String, String)] = []
        /// Where each plugin is in `plugins`: a host loading 10,000 plugins noted each with a
        /// search of the list, which made loading quadratic.
        var pluginIndex: [String: Int] = [:]
        var termination: Termination?
        var pluginErrors = 0
        var expectations: JSONValue?
        var calls: [HandlerCall] = []
    }

    private let state = SpinLocked(State())
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
    /// table (and the `expect` checks that use it). A user's run never stops on it. The compiler
    /// now holds the host's own event names (`ReportEventName`); this still guards the fields and
    /// their values, and events made from strings, as tests and users' code make them.
    static let checksEvents = ProcessInfo.processInfo.environment["LIFELINE_CHECK_EVENTS"] != nil
    /// `checksEvents`, read once: the global's lazy initializer is otherwise checked on every event.
    private let checksEvents = Recorder.checksEvents

    /// Records one of `ReportEvents` (with LIFELINE_CHECK_EVENTS, anything else traps).
    public func record(_ event: consuming TimelineEvent) {
        check(event)
        observer?(event)
        guard keepsTimeline else { return }
        // Moved into the timeline, not copied: an event can hold several strings.
        state.withLock(moving: event) { $0.timeline.append($1) }
    }

    private func check(_ event: @autoclosure () -> TimelineEvent) {
        if checksEvents {
            let event = event()
            precondition(ReportEvents.admits(event), "not in ReportEvents: \(event.json.serialized())")
        }
    }

    /// Records `.task(time:event:plugin:task:name:expired:)`, a task event of `kind`, with no value
    /// made for it unless something reads each event as it comes.
    func recordTask(
        _ kind: TimelineStore.Kind, time: HostTime, plugin: String, task: Int, name: String? = nil, expired: Bool? = nil
    ) {
        func value() -> TimelineEvent {
            .task(time: time, event: kind.name, plugin: plugin, task: task, name: name, expired: expired)
        }
        check(value())
        observer?(value())
        guard keepsTimeline else { return }
        state.withLock { $0.timeline.appendTask(kind, time: time, plugin: plugin, task: task, name: name, expired: expired) }
    }

    /// Records a queue operation's event of `kind`, as `recordTask` records the tasks'.
    func recordOperation(
        _ kind: TimelineStore.Kind, time: HostTime, plugin: String, queue: String, op: Int, name: String?,
        finished: TimelineEvent.OperationEnding? = nil
    ) {
        func value() -> TimelineEvent {
            .operation(time: time, event: kind.name, plugin: plugin, queue: queue, op: op, name: name, finished: finished)
        }
        check(value())
        observer?(value())
        guard keepsTimeline else { return }
        state.withLock {
            $0.timeline.appendOperation(
                kind, time: time, plugin: plugin, queue: queue, op: op, name: name, finished: finished)
        }
    }

    /// Notes a plugin in the report's `plugins` list.
    public func notePlugin(name: String, kind: String, status: String) {
        state.withLock { s in
            if let i = s.pluginIndex[name] {
                s.plugins[i] = (name, kind, status)
            } else {
                s.pluginIndex[name] = s.plugins.count
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

    public var timeline: [TimelineEvent] { state.withLock { $0.timeline.events } }

    /// How many events the timeline holds, without reading them.
    public var eventCount: Int { state.withLock { $0.timeline.count } }

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
            var object = head(s, termination: s.termination ?? extra)
            object.append(("timeline", .array(s.timeline.events.map(\.json))))
            if let e = s.expectations { object.append(("expectations", e)) }
            return .object(object)
        }
    }

    /// The bytes of `RunOutput.text(of: report())`, given to `sink` a chunk at a time: the
    /// timeline is written event by event, with no JSON value made for it, so a report of a
    /// million events is never held whole.
    public func writeReport(_ sink: (UnsafeRawBufferPointer) throws(LifelineError) -> Void) throws(LifelineError) {
        try state.withLock { s throws(LifelineError) in
            var text = JSONText(capacity: 1 << 16)
            text.raw("{")
            for (i, (key, value)) in head(s, termination: s.termination).enumerated() {
                if i > 0 { text.raw(",") }
                text.newline(indent: 1)
                text.key(key, pretty: true)
                text.value(value, pretty: true, indent: 1)
            }
            text.raw(",")
            text.newline(indent: 1)
            text.key("timeline", pretty: true)
            if s.timeline.count == 0 {
                text.raw("[]")
            } else {
                text.raw("[")
                // The store's buffers, which the helper threads can share: they do not change
                // while the lock is held.
                try TimelineWriter.write(s.timeline.entries, through: &text, sink)
                text.newline(indent: 1)
                text.raw("]")
            }
            if let e = s.expectations {
                text.raw(",")
                text.newline(indent: 1)
                text.key("expectations", pretty: true)
                text.value(e, pretty: true, indent: 1)
            }
            text.newline(indent: 0)
            text.raw("}\n")
            try text.withBytes(sink)
        }
    }

    /// The report's fields before the timeline.
    private func head(_ s: State, termination: Termination?) -> [(String, JSONValue)] {
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
                        ("fetch", .number(ReportNumber.seconds(p.fetchLimit))),
                        ("refreshTask", .number(ReportNumber.seconds(p.refreshTaskLimit))),
                        ("processingTask", .number(ReportNumber.seconds(p.processingTaskLimit))),
                        ("transferEvents", .number(ReportNumber.seconds(p.transferEventsLimit))),
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
        ]
        return object
    }
}
