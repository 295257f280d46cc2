// How one event is compared with what an expect line asks for: the differences a near miss
// names, the distance that ranks near misses, and how a value in the line matches a field.

extension Expectation.Window {
    /// What a near miss says when its time is outside the window.
    var miss: String { "not \(description)" }
}

extension Expectation.EventQuery {
    /// What keeps `event` (already of the right name) from matching: empty when it matches.
    func differences(for event: JSONValue) -> [String] {
        var out: [String] = []
        for field in fields where event[field.name].map(field.value.matches) != true {
            out.append(Expectation.difference(field, in: event))
        }
        if let window {
            if let t = event["t"].flatMap(Expectation.milliseconds) {
                if !window.contains(milliseconds: t) { out.append(window.miss) }
            } else {
                out.append("no t")
            }
        }
        if let contains {
            if case .string(let message)? = event["message"] {
                if !message.contains(contains) {
                    out.append("message does not contain \(Expectation.display(.string(contains)))")
                }
            } else {
                out.append("no message")
            }
        }
        return out
    }

    /// How far `event` lies outside the window, in milliseconds; 0 inside it or without one.
    func distance(of event: JSONValue) -> Int64 {
        guard let window, let t = event["t"].flatMap(Expectation.milliseconds) else { return 0 }
        switch window {
        case .at(let ms): return abs(t - ms)
        case .between(let a, let b): return t < a ? a - t : (t > b ? t - b : 0)
        }
    }
}

extension Expectation {
    /// A report time (seconds) in whole milliseconds.
    static func milliseconds(_ value: JSONValue) -> Int64? {
        guard let seconds = value.doubleValue, seconds.isFinite, abs(seconds) < 9e15 else { return nil }
        return Int64((seconds * 1000).rounded())
    }
}

extension Expectation.Value {
    /// Whether a report value is this one: a quoted string matches the same string; a bare word
    /// matches a number of the same value, `true`/`false`/`null`, or a string that reads the same.
    func matches(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.quoted(let q), .string(let s)): return q == s
        case (.quoted, _): return false
        case (.word(let w), .string(let s)): return w == s
        case (.word(let w), .bool(let b)): return w == (b ? "true" : "false")
        case (.word(let w), .null): return w == "null"
        case (.word(let w), .int(let i)):
            if let n = Int64(w) { return n == i }
            return Self.number(w).map { $0 == Double(i) } ?? false
        case (.word(let w), .number(let s)):
            if let a = Int64(w), let b = Int64(s) { return a == b }
            guard let a = Self.number(w), let b = Double(s) else { return false }
            return a == b
        case (.word, .array), (.word, .object): return false
        }
    }

    /// A decimal number as written (`1.5`, `-2`, `1e3`); not `inf`, `nan` or hex, which Double
    /// would also read.
    private static func number(_ text: String) -> Double? {
        guard let first = text.unicodeScalars.first, ("0"..."9").contains(first) || first == "-" || first == ".",
            text.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) || "+-.eE".unicodeScalars.contains($0) })
        else { return nil }
        return Double(text)
    }
}
