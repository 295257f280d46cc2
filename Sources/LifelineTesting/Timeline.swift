import Lifeline

/// One timeline event as a line: `27 taskEnded plugin=p task=1 expired=true`. A task's name is
/// shown where it begins only: the rules under test are about ids, and the report's own tests
/// check that it names the task on every task event.
public func line(_ event: TimelineEvent) -> String {
    let shownFields = event.name == .taskEnded || event.name == .taskExpiring
        ? event.fields.filter { $0.0 != "name" } : event.fields
    let fields = shownFields.map { key, value -> String in
        if case .string(let s) = value { return "\(key)=\(s)" }
        return "\(key)=\(value.serialized())"
    }
    return ([ReportNumber.seconds(event.time), event.event] + fields).joined(separator: " ")
}

/// The timeline as lines, keeping only the events named in `only` (all of them when nil).
public func lines(_ recorder: Recorder, only: Set<String>? = nil) -> [String] {
    recorder.timeline.filter { only?.contains($0.event) ?? true }.map(line)
}

/// The names of the timeline's events, in order.
public func eventNames(_ recorder: Recorder) -> [String] { recorder.timeline.map(\.event) }

/// The lifecycle notifications, and the suspension that follows the last of them.
public let lifecycleEvents: Set<String> = Set(LifecycleEventName.allCases.map(\.rawValue))
    .union([ReportEventName.suspended.rawValue])
/// What the task rules (SPEC 4) record.
public let taskEvents: Set<String> = Set(
    [ReportEventName.taskBegan, .taskExpiring, .taskEnded, .endUnknownTask, .suspended, .terminated].map(\.rawValue))

extension JSONValue {
    /// The string, when the value is one.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
}

/// The pluginError events of a run.
public func pluginErrors(_ recorder: Recorder) -> [(plugin: String, message: String, traceback: String)] {
    recorder.timeline.compactMap { e in
        guard e.name == .pluginError else { return nil }
        return (e["plugin"]?.stringValue ?? "", e["message"]?.stringValue ?? "", e["traceback"]?.stringValue ?? "")
    }
}

/// Whether `a` and `b` are the same JSON value, compared case by case. `JSONValue`'s own `==`
/// compares serialized text, so a round trip checked with it trusts the very code under test.
public func sameStructure(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.bool(let x), .bool(let y)): return x == y
    case (.int(let x), .int(let y)): return x == y
    case (.number(let x), .number(let y)): return x == y
    case (.string(let x), .string(let y)): return x == y
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { sameStructure($0, $1) }
    case (.object(let x), .object(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && sameStructure($0.1, $1.1) }
    default: return false
    }
}
