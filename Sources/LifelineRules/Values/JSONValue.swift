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

    /// Compact JSON, or indented with two spaces when `pretty` (see `JSONText`).
    public func serialized(pretty: Bool = false) -> String {
        var text = JSONText()
        text.value(self, pretty: pretty, indent: 0)
        return text.text
    }
}

/// Number formatting shared by the report and the logs.
public enum ReportNumber {
    /// Seconds rounded to the millisecond, with no trailing zeros: `27`, `2.5`, `0.001`.
    public static func seconds(_ time: HostTime) -> String { milliseconds(time.milliseconds) }

    /// Seconds, given a duration in seconds, formatted as `seconds(_:)` does.
    public static func seconds(_ seconds: Double) -> String {
        milliseconds(Int64(saturating: seconds * 1000))
    }

    package static func milliseconds(_ ms: Int64) -> String {
        var text = JSONText()
        text.seconds(milliseconds: ms)
        return text.text
    }
}
