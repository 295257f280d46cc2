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
    var storage: Storage

    /// The fields as the report writes them. The task events, which a plugin can make hundreds of
    /// thousands of, keep theirs inline: no array is made until the report or a reader asks.
    enum Storage: Sendable {
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

    /// An event the host records: its name is one of `ReportEventName`'s.
    public init(time: HostTime, event: ReportEventName, fields: [(String, JSONValue)] = []) {
        self.init(time: time, event: event.rawValue, storage: .fields(fields))
    }

    /// An event named by a string, as a test or a report read back makes one: the recorder checks
    /// the name only under LIFELINE_CHECK_EVENTS.
    public init(time: HostTime, event: String, fields: [(String, JSONValue)] = []) {
        self.init(time: time, event: event, storage: .fields(fields))
    }

    private init(time: HostTime, event: String, storage: Storage) {
        self.time = time
        self.event = event
        self.storage = storage
    }

    /// A task event (`taskBegan`, `taskEnded`, `taskExpiring`, `endUnknownTask`): the fields
    /// `plugin`, `task`, and `name` or `expired` when given, in that order.
    public static func task(
        time: HostTime, event: String, plugin: String, task: Int, name: String? = nil, expired: Bool? = nil
    ) -> TimelineEvent {
        TimelineEvent(time: time, event: event, storage: .task(plugin: plugin, task: task, name: name, expired: expired))
    }

    /// A queue operation's event (`opStarted`, `opFinished`): the fields `plugin`, `queue`, `op`,
    /// `name` when given, and `result` when `finished` is given, in that order.
    public static func operation(
        time: HostTime, event: String, plugin: String, queue: String, op: Int, name: String?,
        finished: OperationEnding? = nil
    ) -> TimelineEvent {
        TimelineEvent(
            time: time, event: event, storage: .operation(plugin: plugin, queue: queue, op: op, name: name, finished: finished))
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

    /// Writes the event as the pretty report writes `json` at its depth in the timeline. Task and
    /// operation events, the most numerous, are written from their inline fields with no `json`
    /// made. Inlined into the report's loop, which runs once per event.
    @inline(__always) func write(into text: inout JSONText) {
        switch storage {
        case .fields(let fields):
            // An event with a nested field is not written on one line: the general writer knows how.
            guard fields.allSatisfy({ $0.1.isScalar }) else {
                text.value(json, pretty: true, indent: 2)
                return
            }
            Self.writeHead(into: &text, milliseconds: time.milliseconds, event: event)
            for (key, value) in fields {
                text.raw(", ")
                text.key(key, pretty: true)
                text.value(value, pretty: true, indent: 3)
            }
            text.raw("}")
        case .task(let plugin, let task, let name, let expired):
            Self.writeTask(
                into: &text, milliseconds: time.milliseconds, event: event, plugin: plugin, task: Int64(task),
                name: name.map(NameText.string) ?? .none, expired: expired)
        case .operation(let plugin, let queue, let op, let name, let finished):
            Self.writeOperation(
                into: &text, milliseconds: time.milliseconds, event: event, plugin: plugin, queue: queue,
                op: Int64(op), name: name.map(NameText.string) ?? .none, result: finished?.result)
        }
    }

    /// A task's or operation's `name` field: from a string, or from the bytes of the timeline's
    /// log (`TimelineStore`), which writes these events with the same layout as a value does.
    enum NameText {
        case none
        case string(String)
        case bytes(UnsafeBufferPointer<UInt8>)
    }

    /// A task event: `{"t": …, "event": …, "plugin": …, "task": …}`, with `name` and `expired`
    /// before the brace when given.
    @inline(__always) static func writeTask(
        into text: inout JSONText, milliseconds: Int64, event: String, plugin: String, task: Int64, name: NameText,
        expired: Bool?
    ) {
        writeHead(into: &text, milliseconds: milliseconds, event: event)
        text.raw(", \"plugin\": ")
        text.string(plugin)
        text.raw(", \"task\": ")
        text.integer(task)
        writeName(name, into: &text)
        if let expired { text.raw(expired ? ", \"expired\": true" : ", \"expired\": false") }
        text.raw("}")
    }

    /// An operation's event: `{"t": …, "event": …, "plugin": …, "queue": …, "op": …}`, with `name`
    /// and `result` before the brace when given.
    @inline(__always) static func writeOperation(
        into text: inout JSONText, milliseconds: Int64, event: String, plugin: String, queue: String, op: Int64,
        name: NameText, result: String?
    ) {
        writeHead(into: &text, milliseconds: milliseconds, event: event)
        text.raw(", \"plugin\": ")
        text.string(plugin)
        text.raw(", \"queue\": ")
        text.string(queue)
        text.raw(", \"op\": ")
        text.integer(op)
        writeName(name, into: &text)
        if let result { text.raw(", \"result\": "); text.string(result) }
        text.raw("}")
    }

    @inline(__always) private static func writeName(_ name: NameText, into text: inout JSONText) {
        switch name {
        case .none: return
        case .string(let s): text.raw(", \"name\": "); text.string(s)
        case .bytes(let b): text.raw(", \"name\": "); text.string(bytes: b)
        }
    }

    /// `{"t": …, "event": …`
    @inline(__always) private static func writeHead(into text: inout JSONText, milliseconds: Int64, event: String) {
        text.raw("{\"t\": ")
        text.seconds(milliseconds: milliseconds)
        text.raw(", \"event\": ")
        text.string(event)
    }

    /// `event` as a name to compare with the declared ones: `event.name == .pluginError`.
    public var name: ReportEventName { ReportEventName(rawValue: event) }

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
        let ms = Int64(saturating: seconds * 1000)
        let frac = String(ms % 1000)
        let text = String(ms / 1000) + "." + String(repeating: "0", count: 3 - frac.count) + frac
        return String(repeating: " ", count: max(0, 9 - text.count)) + text
    }
}
