/// Reading JSON back into a `JSONValue`: the store keeps values as JSON text.
///
/// Integers stay integers (`.int`) and other numbers keep their text (`.number`), so a value reads
/// back as it was written: Lua's `3` and `3.0` are different values, and stay so.
extension JSONValue {
    /// Why a text is not JSON.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// The deepest nesting `parse` accepts, as for Lua's tables (lua-cjson's default).
    public static let maximumDepth = 128

    /// Parses one JSON value, with nothing but white space after it.
    public static func parse(_ text: String) throws(ParseError) -> JSONValue {
        var parser = Parser(bytes: Array(text.utf8))
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.index == parser.bytes.count else { throw parser.fail("unexpected text after the value") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        func fail(_ message: String) -> ParseError { ParseError(message: "\(message) at character \(index + 1)") }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func literal(_ word: String, _ value: JSONValue) throws(ParseError) -> JSONValue {
            let w = Array(word.utf8)
            guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else {
                throw fail("invalid value")
            }
            index += w.count
            return value
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            guard depth <= JSONValue.maximumDepth else { throw fail("nested too deep") }
            skipSpace()
            guard index < bytes.count else { throw fail("unexpected end") }
            switch bytes[index] {
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "["):
                index += 1
                var items: [JSONValue] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                }
                while true {
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard index < bytes.count else { throw fail("unexpected end") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    guard bytes[index] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
                    index += 1
                    return .array(items)
                }
            case UInt8(ascii: "{"):
                index += 1
                var fields: [(String, JSONValue)] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(fields)
                }
                while true {
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                    let key = try string()
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                    index += 1
                    fields.append((key, try value(depth: depth + 1)))
                    skipSpace()
                    guard index < bytes.count else { throw fail("unexpected end") }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    guard bytes[index] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
                    index += 1
                    return .object(fields)
                }
            default: return try number()
            }
        }

        /// JSON's own grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. No '+', no leading
        /// zeros, no bare '.', no inf or nan; Double alone would take all of those.
        mutating func number() throws(ParseError) -> JSONValue {
            if let small = smallInteger() { return .int(small) }
            let start = index
            func digits() -> Int {
                let first = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                return index - first
            }
            func skip(_ c: Character) -> Bool {
                guard index < bytes.count, bytes[index] == c.asciiValue! else { return false }
                index += 1
                return true
            }
            _ = skip("-")
            let isZero = index < bytes.count && bytes[index] == UInt8(ascii: "0")
            let whole = isZero ? (skip("0") ? 1 : 0) : digits()
            var isInteger = true
            var valid = whole > 0
            if valid, skip(".") { (isInteger, valid) = (false, digits() > 0) }
            if valid, skip("e") || skip("E") {
                isInteger = false
                _ = skip("+") || skip("-")
                valid = digits() > 0
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard valid, let double = Double(text), double.isFinite else {
                index = start
                throw fail("invalid value")
            }
            if isInteger, let int = Int64(text) { return .int(int) }
            return .number(text)
        }

        /// An integer of at most 18 digits, read from the bytes without the strings `number` makes;
        /// nil (and nothing read) for any other number, which `number` reads.
        mutating func smallInteger() -> Int64? {
            var k = index
            let negative = k < bytes.count && bytes[k] == UInt8(ascii: "-")
            if negative { k += 1 }
            let first = k
            var value: Int64 = 0
            while k < bytes.count, k - first < 18, bytes[k] &- UInt8(ascii: "0") < 10 {
                value = value * 10 + Int64(bytes[k] &- UInt8(ascii: "0"))
                k += 1
            }
            let digits = k - first
            guard digits > 0, digits == 1 || bytes[first] != UInt8(ascii: "0") else { return nil }
            if k < bytes.count {  // a 19th digit, a fraction or an exponent: `number` reads it
                switch bytes[k] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    return nil
                default: break
                }
            }
            index = k
            return negative ? -value : value
        }

        mutating func string() throws(ParseError) -> String {
            index += 1  // the opening quote
            var out: [UInt8] = []
            while index < bytes.count {
                let b = bytes[index]
                index += 1
                switch b {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unexpected end") }
                    let e = bytes[index]
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    case UInt8(ascii: "/"): out.append(0x2F)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar), index + 1 < bytes.count,
                            bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        {
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("invalid surrogate pair") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        let s = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                        out.append(contentsOf: Array(String(Character(s)).utf8))
                    default: throw fail("invalid escape")
                    }
                case 0..<0x20:
                    index -= 1
                    throw fail("control character in string; write it as an escape")
                default:
                    out.append(b)
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count,
                let v = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
            else { throw fail("invalid \\u escape") }
            index += 4
            return v
        }
    }
}
