/// JSON text as bytes: the one writer behind `JSONValue.serialized` and the streamed report, so
/// both give the same bytes for the same value.
///
/// Pretty text indents with two spaces, and keeps an object whose fields are all scalars on one
/// line once it is two levels deep: timeline entries read like a log.
struct JSONText {
    var bytes: [UInt8] = []

    mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func newline(indent: Int) {
        bytes.append(UInt8(ascii: "\n"))
        for _ in 0..<indent { bytes.append(UInt8(ascii: " ")); bytes.append(UInt8(ascii: " ")) }
    }

    mutating func value(_ value: JSONValue, pretty: Bool, indent: Int) {
        switch value {
        case .null: raw("null")
        case .bool(let b): if b { raw("true") } else { raw("false") }
        case .int(let i): integer(i)
        case .number(let s): bytes.append(contentsOf: s.utf8)
        case .string(let s): string(s)
        case .array(let items):
            if items.isEmpty { raw("[]"); return }
            raw("[")
            for (i, item) in items.enumerated() {
                if i > 0 { raw(",") }
                if pretty { newline(indent: indent + 1) }
                self.value(item, pretty: pretty, indent: indent + 1)
            }
            if pretty { newline(indent: indent) }
            raw("]")
        case .object(let fields):
            if fields.isEmpty { raw("{}"); return }
            let inline = pretty && indent >= 2 && fields.allSatisfy { $0.1.isScalar }
            raw("{")
            for (i, (key, field)) in fields.enumerated() {
                if i > 0 { if inline { raw(", ") } else { raw(",") } }
                if pretty && !inline { newline(indent: indent + 1) }
                self.key(key, pretty: pretty)
                self.value(field, pretty: pretty, indent: indent + 1)
            }
            if pretty && !inline { newline(indent: indent) }
            raw("}")
        }
    }

    /// `"key": ` (pretty) or `"key":`.
    mutating func key(_ key: String, pretty: Bool) {
        string(key)
        if pretty { raw(": ") } else { raw(":") }
    }

    mutating func integer(_ i: Int64) {
        if i < 0 { bytes.append(UInt8(ascii: "-")) }
        digits(i.magnitude)
    }

    private mutating func digits(_ n: UInt64) {
        if n >= 10 { digits(n / 10) }
        bytes.append(UInt8(ascii: "0") + UInt8(n % 10))
    }

    /// Milliseconds as seconds with no trailing zeros: `27`, `2.5`, `0.001` (`ReportNumber`).
    mutating func seconds(milliseconds ms: Int64) {
        if ms < 0 { bytes.append(UInt8(ascii: "-")) }
        digits(ms.magnitude / 1000)
        let frac = ms.magnitude % 1000
        if frac == 0 { return }
        bytes.append(UInt8(ascii: "."))
        // Tenths always; hundredths and thousandths only up to the last digit that is not 0.
        bytes.append(UInt8(ascii: "0") + UInt8(frac / 100))
        if frac % 100 != 0 { bytes.append(UInt8(ascii: "0") + UInt8(frac / 10 % 10)) }
        if frac % 10 != 0 { bytes.append(UInt8(ascii: "0") + UInt8(frac % 10)) }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                start = i + 1
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case UInt8(ascii: "\n"): raw("\\n")
                case UInt8(ascii: "\r"): raw("\\r")
                case UInt8(ascii: "\t"): raw("\\t")
                default:
                    raw("\\u00")
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 15)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    var isScalar: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }
}
