/// A JSON value whose objects keep their keys in the order they were written.
///
/// The report is written with this instead of `JSONEncoder` so that key order and number
/// formatting are fixed by the code, which keeps `lifeline simulate` byte-identical across runs.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    /// A number written exactly as given (already formatted).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool { a.serialized() == b.serialized() }

    /// The value looked up by key, for objects.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let fields) = self else { return nil }
        return fields.first { $0.0 == key }?.1
    }

    /// Compact JSON, or indented with two spaces when `pretty`.
    public func serialized(pretty: Bool = false) -> String {
        var out = ""
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout String, pretty: Bool, indent: Int) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .number(let s): out += s
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            if items.isEmpty { out += "[]"; return }
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                if pretty { out += "\n" + String(repeating: "  ", count: indent + 1) }
                item.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { out += "\n" + String(repeating: "  ", count: indent) }
            out += "]"
        case .object(let fields):
            if fields.isEmpty { out += "{}"; return }
            // Timeline entries stay on one line each, so a report reads like a log.
            let inline = pretty && fields.allSatisfy { $0.1.isScalar }  && indent >= 2
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += inline ? ", " : "," }
                if pretty && !inline { out += "\n" + String(repeating: "  ", count: indent + 1) }
                JSONValue.writeString(key, into: &out)
                out += pretty ? ": " : ":"
                value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty && !inline { out += "\n" + String(repeating: "  ", count: indent) }
            out += "}"
        }
    }

    private var isScalar: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Number formatting shared by the report and the logs.
public enum ReportNumber {
    /// Seconds rounded to the millisecond, with no trailing zeros: `27`, `2.5`, `0.001`.
    public static func seconds(_ time: HostTime) -> String { milliseconds(time.milliseconds) }

    /// Seconds, given a duration in seconds, formatted as `seconds(_:)` does.
    public static func seconds(_ seconds: Double) -> String {
        milliseconds(Int64((seconds * 1000).rounded()))
    }

    static func milliseconds(_ ms: Int64) -> String {
        let sign = ms < 0 ? "-" : ""
        let whole = abs(ms) / 1000
        var frac = String(abs(ms) % 1000)
        if frac == "0" { return sign + String(whole) }
        frac = String(repeating: "0", count: 3 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return sign + String(whole) + "." + frac
    }
}
