/// What became of one expectation.
public struct ExpectationResult: Equatable, Sendable {
    public var expectation: Expectation
    public var passed: Bool
    /// `FILE:LINE: expected …, found …` for a failure (`FILE: unexpected …` for an implicit one);
    /// `FILE:LINE: met: …` for a pass.
    public var message: String
    /// The message without its `FILE:LINE: ` (or `FILE: `): what the report keeps, so that it
    /// does not depend on how the scenario's path was written.
    public var reason: String
    /// For an unexpected `pluginError`, the error's own message, as the plugin raised it.
    public var pluginError: String?

    public init(
        expectation: Expectation, passed: Bool, message: String, reason: String? = nil, pluginError: String? = nil
    ) {
        self.expectation = expectation
        self.passed = passed
        self.message = message
        self.reason = reason ?? message
        self.pluginError = pluginError
    }
}

/// Checking expectations against a finished run's report.
///
/// Implicit expectations: a scenario with at least one `expect` line states everything it allows,
/// so besides its own lines
/// - a termination fails the run unless a line expects one (`expect outcome terminated`,
///   `expect termination KIND`, or `expect terminated …`, the timeline's event):
///   "FILE: unexpected termination: KIND REASON";
/// - each `pluginError` event fails the run unless a `pluginError` line matches that very event
///   (`expect pluginError plugin=a` expects it; `expect no pluginError plugin=a` fails by itself):
///   an error of one plugin, or outside a line's window, is not excused by a line about another:
///   "FILE: unexpected pluginError: …".
/// These come back as extra failed results, with line 0, after the lines' own. A scenario without
/// expect lines gets no results at all, and its exit code stays the recorder's (1 on a termination
/// or a plugin error).
extension Expectation {
    /// The most near misses a failure message lists.
    static let closestShown = 3
    /// Longer values are cut in messages: a traceback would drown the line.
    static let valueWidth = 60

    /// Checks `expectations` against `report` (the JSON object `--report` writes), in order, then
    /// the implicit ones. `fileName` starts every message. No expectations, no results.
    public static func check(_ expectations: [Expectation], report: JSONValue, fileName: String) -> [ExpectationResult]
    {
        guard !expectations.isEmpty else { return [] }
        var results = expectations.map { $0.check(report: report, fileName: fileName) }
        let acknowledgesTermination = expectations.contains {
            switch $0.kind {
            case .outcome(let terminated): return terminated
            case .termination: return true
            case .events(let query, let count):
                return query.event == ReportEventName.terminated.rawValue && count != .none
            default: return false
            }
        }
        if !acknowledgesTermination, let termination = report["termination"], termination != .null {
            let kind = termination["kind"]?.plainText ?? "?"
            let reason = termination["reason"]?.plainText ?? ""
            results.append(
                ExpectationResult(
                    expectation: Expectation(
                        line: 0, text: "no unexpected termination", kind: .noUnexpectedTermination),
                    passed: false, message: "\(fileName): unexpected termination: \(kind) \(reason)",
                    reason: "unexpected termination: \(kind) \(reason)"))
        }
        // The lines about plugin errors. An error one of them matches is accounted for: expected,
        // or already failing a line that forbids it. Any other error is unexpected.
        let errorLines: [EventQuery] = expectations.compactMap {
            guard case .events(let query, _) = $0.kind, query.event == ReportEventName.pluginError.rawValue else {
                return nil
            }
            return query
        }
        do {
            for event in timeline(report) where event["event"]?.plainText == ReportEventName.pluginError.rawValue {
                if errorLines.contains(where: { $0.differences(for: event).isEmpty }) { continue }
                var origin: [String] = []
                if let plugin = event["plugin"]?.plainText { origin.append("from \(plugin)") }
                if let t = event["t"]?.plainText { origin.append("at t=\(t)") }
                let message =
                    (event["message"]?.plainText ?? "")
                    + (origin.isEmpty ? "" : " (" + origin.joined(separator: " ") + ")")
                results.append(
                    ExpectationResult(
                        expectation: Expectation(
                            line: 0, text: "no unexpected pluginError", kind: .noUnexpectedPluginError),
                        passed: false, message: "\(fileName): unexpected pluginError: \(message)",
                        reason: "unexpected pluginError: \(message)", pluginError: event["message"]?.plainText ?? ""))
            }
        }
        return results
    }

    /// `simulate`'s exit code: with expectations (`results` not empty), 0 iff every one passed,
    /// else 1; without, `withoutExpectations` (the recorder's code).
    public static func exitCode(_ results: [ExpectationResult], withoutExpectations: Int32) -> Int32 {
        if results.isEmpty { return withoutExpectations }
        return results.allSatisfy(\.passed) ? 0 : 1
    }

    /// The report's `expectations` array: `[{"line", "text", "passed"}]`, implicit failures with
    /// line 0, and a failure's `message`: why it failed, as the terminal says it without the
    /// `FILE:LINE: ` in front, so that the pictures can say it too.
    public static func reportEntries(_ results: [ExpectationResult]) -> JSONValue {
        .array(
            results.map {
                var fields: [(String, JSONValue)] = [
                    ("line", .int(Int64($0.expectation.line))), ("text", .string($0.expectation.text)),
                    ("passed", .bool($0.passed)),
                ]
                if !$0.passed { fields.append(("message", .string($0.reason))) }
                return .object(fields)
            })
    }

    /// Checks this one expectation.
    func check(report: JSONValue, fileName: String) -> ExpectationResult {
        let at = "\(fileName):\(line)"
        // "expect taskEnded …" reads "expected taskEnded …" in a message.
        let wanted = "expected " + (text.hasPrefix("expect ") ? String(text.dropFirst("expect ".count)) : text)
        let failure: String?
        switch kind {
        case .outcome(let terminated):
            let outcome = report["outcome"]?.plainText ?? "missing"
            if outcome == (terminated ? "terminated" : "completed") {
                failure = nil
            } else if let termination = report["termination"], termination != .null {
                failure = "found \(outcome) (\(Self.describeTermination(termination)))"
            } else {
                failure = "found \(outcome)"
            }
        case .termination(let termKind, let fields):
            if let field = fields.first(where: { !ReportEvents.terminationFields.contains($0.name) }) {
                var message = "but a termination has no field \(field.name)"
                if let suggestion = Self.closestName(to: field.name, among: ReportEvents.terminationFields) {
                    message += " (did you mean \(suggestion)?)"
                }
                failure = message + "; its fields are " + ReportEvents.terminationFields.joined(separator: ", ")
                break
            }
            guard let termination = report["termination"], termination != .null else {
                failure = "found none: the run \(report["outcome"]?.plainText ?? "completed")"
                break
            }
            if termination["kind"]?.plainText != termKind.rawValue {
                failure = "found \(Self.describeTermination(termination))"
                break
            }
            let differing = fields.filter { field in termination[field.name].map(field.value.matches) != true }
            failure =
                differing.isEmpty
                ? nil
                : "found \(Self.describeTermination(termination)) ("
                    + differing.map { Self.difference($0, in: termination) }.joined(separator: ", ") + ")"
        case .events(let query, let count):
            failure = Self.checkEvents(query, count: count, in: Self.timeline(report))
        case .noUnexpectedTermination, .noUnexpectedPluginError:
            // Only `check(_:report:fileName:)` makes these, already decided.
            failure = nil
        }
        guard let failure else {
            return ExpectationResult(expectation: self, passed: true, message: "\(at): met: \(text)", reason: "met: \(text)")
        }
        return ExpectationResult(
            expectation: self, passed: false, message: "\(at): \(wanted), \(failure)", reason: "\(wanted), \(failure)")
    }

    /// What is wrong with the events for `query`, or nil when they are as expected.
    private static func checkEvents(_ query: EventQuery, count: Count, in timeline: [JSONValue]) -> String? {
        if let misnamed = misnamed(query) { return misnamed }
        let named = timeline.filter { $0["event"]?.plainText == query.event }
        let matching = named.filter { query.differences(for: $0).isEmpty }
        switch count {
        case .none:
            return matching.isEmpty ? nil : "found \(matching.count): " + list(matching)
        case .exactly(let n) where matching.count == n:
            return nil
        case .atLeastOne where !matching.isEmpty:
            return nil
        case .exactly, .atLeastOne:
            break
        }
        guard !named.isEmpty else {
            var names: [String] = []
            for event in timeline {
                if let name = event["event"]?.plainText, !names.contains(name) { names.append(name) }
            }
            // The name is a real event (`misnamed` said so), so no "did you mean".
            return "found no \(query.event) event at all"
                + (names.isEmpty
                    ? "; the timeline is empty"
                    : "; the events in this report are: " + names.sorted().joined(separator: ", "))
                + closest(nearMisses(query, in: timeline))
        }
        var message = matching.isEmpty ? "found none" : "found \(matching.count): " + list(matching)
        // Too few matched (too many needs no near misses): the near misses may be the missing ones.
        var short = true
        if case .exactly(let n) = count { short = matching.count < n }
        if short { message += closest(nearMisses(query, in: timeline)) }
        return message
    }

    /// `; closest: EVENT (WHY); …` for the first `closestShown` near misses; empty without any.
    private static func closest(_ misses: [(event: JSONValue, differences: [String])]) -> String {
        guard !misses.isEmpty else { return "" }
        return "; closest: "
            + misses.prefix(closestShown).map { describe($0.event) + " (" + $0.differences.joined(separator: ", ") + ")" }
            .joined(separator: "; ")
    }

    /// The fields that name what an event is about, most telling first: a line that names the
    /// operation, task or plugin it means is about that one, whatever else it got wrong.
    static let nameTiers: [Set<String>] = [["name", "identifier"], ["plugin", "queue", "op", "task", "transfer", "url"]]

    /// The events that almost match `query`, likeliest first, with what keeps each from matching.
    ///
    /// Ranked by what matches, names first: the event's own name (an event of another name
    /// comes only after every one of the right name, and only when it has the very `name` or
    /// `identifier` the line asks for: an operation dropped rather than finished), then the
    /// name-like fields (`name` and `identifier`, then `plugin`, `queue`, `op`, `task`, `transfer`,
    /// `url`), then the other fields and `contains`. The time is no field: an event right but for
    /// its time is the likeliest one meant, so among equals the one nearest the window comes first,
    /// then timeline order.
    ///
    /// Only the first `limit` are kept, so a timeline of a million events costs a pass over it and
    /// no sort.
    static func nearMisses(_ query: EventQuery, in timeline: [JSONValue], limit: Int = closestShown)
        -> [(event: JSONValue, differences: [String])]
    {
        guard limit > 0 else { return [] }
        // Each field's tier: 0 and 1 for the name-like ones, 2 for the others.
        let tiers = query.fields.map { field in nameTiers.firstIndex { $0.contains(field.name) } ?? nameTiers.count }
        let named = query.fields.filter { nameTiers[0].contains($0.name) }
        // Other name first, then the fields missed in each tier, the distance from the window,
        // and the place in the timeline.
        typealias Rank = (Int64, Int64, Int64, Int64, Int64, Int64)
        var kept: [(rank: Rank, event: JSONValue)] = []
        for (index, event) in timeline.enumerated() {
            guard let name = event["event"]?.plainText else { continue }
            let sameName = name == query.event
            // Another event about the same named thing: only when the line names one.
            if !sameName && (named.isEmpty || !named.allSatisfy({ event[$0.name].map($0.value.matches) == true })) {
                continue
            }
            var misses: (Int64, Int64, Int64) = (0, 0, 0)
            for (field, tier) in zip(query.fields, tiers) where event[field.name].map(field.value.matches) != true {
                switch tier {
                case 0: misses.0 += 1
                case 1: misses.1 += 1
                default: misses.2 += 1
                }
            }
            if let contains = query.contains {
                var holds = false
                if case .string(let message)? = event["message"] { holds = message.contains(contains) }
                if !holds { misses.2 += 1 }
            }
            let distance = query.distance(of: event)
            let inWindow = query.window.map { w in event["t"].flatMap(milliseconds).map { w.contains(milliseconds: $0) } ?? false } ?? true
            // An event of the name with nothing missed matches: it is no near miss.
            if sameName && misses == (0, 0, 0) && inWindow { continue }
            let rank: Rank = (sameName ? 0 : 1, misses.0, misses.1, misses.2, distance, Int64(index))
            guard kept.count < limit || rank < kept[kept.count - 1].rank else { continue }
            let at = kept.firstIndex { rank < $0.rank } ?? kept.count
            kept.insert((rank, event), at: at)
            if kept.count > limit { kept.removeLast() }
        }
        return kept.map { entry in
            var differences = query.differences(for: entry.event)
            if entry.rank.0 == 1 { differences.insert("is \(entry.event["event"]?.plainText ?? "?")", at: 0) }
            return (entry.event, differences)
        }
    }

    /// What in `query` names something no report can hold: an event, or a field of its event.
    /// Checked first, because such a line can never match; an `expect no` line would otherwise
    /// pass whatever happened.
    private static func misnamed(_ query: EventQuery) -> String? {
        guard let fields = ReportEvents.fields[query.event] else {
            var message = "but no report event is named \(query.event)"
            if let suggestion = closestName(to: query.event, among: ReportEvents.names) {
                message += " (did you mean \(suggestion)?)"
            }
            return message + "; docs/report.md lists them"
        }
        // `t` is every event's: `expect log t=5.25` is `at 5.25s` spelt as a field.
        for field in query.fields where field.name != "t" && !fields.contains(field.name) {
            var message = "but \(query.event) has no field \(field.name)"
            if let suggestion = closestName(to: field.name, among: fields) {
                message += " (did you mean \(suggestion)?)"
            }
            return message
                + (fields.isEmpty ? "; it has no fields" : "; its fields are " + fields.joined(separator: ", "))
        }
        for field in query.fields {
            guard let domain = ReportEvents.values[query.event]?[field.name], !domain.contains(field.value.text)
            else { continue }
            var message = "but \(query.event)'s \(field.name) is never \(display(.string(field.value.text)))"
            if let suggestion = closestName(to: field.value.text, among: domain) {
                message += " (did you mean \(suggestion)?)"
            }
            return message + "; it is one of " + domain.joined(separator: ", ")
        }
        if query.contains != nil, !fields.contains("message") {
            return "but \(query.event) has no message for 'contains' to look in"
        }
        return nil
    }

    /// Up to `closestShown` events, and how many more.
    private static func list(_ events: [JSONValue]) -> String {
        let shown = events.prefix(closestShown).map(describe).joined(separator: "; ")
        return events.count > closestShown ? shown + "; and \(events.count - closestShown) more" : shown
    }

    /// The name among `names` a typo of `name` most likely meant: at most a third of it differs.
    ///
    /// The distance is at least the difference of the two lengths, so a name whose length is too far
    /// from a candidate's is not compared with it: the comparison costs the product of the lengths,
    /// and a line with a name of 200,000 letters took seconds. What is compared is then at most about
    /// one and a half times the longest candidate.
    static func closestName(to name: String, among names: [String]) -> String? {
        let lowered = Array(name.lowercased())
        let limit = max(2, name.count / 3)
        var best: (name: String, distance: Int)?
        for candidate in names {
            let other = Array(candidate.lowercased())
            guard abs(lowered.count - other.count) <= limit else { continue }
            let distance = editDistance(lowered, other)
            if distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        guard let best, best.distance <= limit else { return nil }
        return best.name
    }

    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, ca) in a.enumerated() {
            var current = [i + 1]
            for (j, cb) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (ca == cb ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// `t=7 taskEnded plugin=save-changes task=4 name=save expired=true`.
    static func describe(_ event: JSONValue) -> String {
        guard case .object(let fields) = event else { return event.serialized() }
        var parts: [String] = []
        if let t = event["t"] { parts.append("t=" + display(t)) }
        if let name = event["event"]?.plainText { parts.append(name) }
        for (key, value) in fields where key != "t" && key != "event" {
            parts.append(key + "=" + display(value))
        }
        return parts.joined(separator: " ")
    }

    /// `watchdog: REASON`.
    static func describeTermination(_ termination: JSONValue) -> String {
        let kind = termination["kind"]?.plainText ?? "?"
        guard let reason = termination["reason"]?.plainText, !reason.isEmpty else { return kind }
        return kind + ": " + reason
    }

    /// A value as an expect line would write it, cut to `valueWidth`.
    static func display(_ value: JSONValue) -> String {
        switch value {
        case .string(var s):
            if s.count > valueWidth { s = String(s.prefix(valueWidth)) + "…" }
            let plain =
                !s.isEmpty
                && s.unicodeScalars.allSatisfy {
                    $0.isASCII
                        && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
                            || "_-.:/@+".unicodeScalars.contains($0))
                }
            if plain { return s }
            let escaped = s.replacingScalars { c in
                switch c {
                case "\"": "\\\""
                case "\\": "\\\\"
                case "\n": "\\n"
                case "\t": "\\t"
                default: nil
                }
            }
            return "\"" + escaped + "\""
        case .array, .object:
            let text = value.serialized()
            return text.count > valueWidth ? String(text.prefix(valueWidth)) + "…" : text
        default:
            return value.serialized()
        }
    }

    /// `expired differs`, `no task`.
    static func difference(_ field: FieldMatch, in event: JSONValue) -> String {
        guard let value = event[field.name] else { return "no \(field.name)" }
        // A quoted value matches text only: say so where the two would read the same.
        if case .quoted(let q) = field.value {
            switch value {
            case .int, .number, .bool, .null:
                if display(value) == q {
                    return "\(field.name) is \(display(value)) unquoted; a quoted value matches text only"
                }
            default: break
            }
        }
        return "\(field.name) differs"
    }

    static func timeline(_ report: JSONValue) -> [JSONValue] {
        guard case .array(let events)? = report["timeline"] else { return [] }
        return events
    }
}

extension JSONValue {
    /// A string's text, or a scalar as JSON writes it; nil for arrays and objects.
    fileprivate var plainText: String? {
        switch self {
        case .string(let s): return s
        case .array, .object: return nil
        default: return serialized()
        }
    }
}
