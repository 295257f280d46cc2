/// JSON text as bytes: the one writer behind `JSONValue.serialized` and the streamed report, so
/// both give the same bytes for the same value.
///
/// Pretty text indents with two spaces, and keeps an object whose fields are all scalars on one
/// line once it is two levels deep: timeline entries read like a log.
///
/// The bytes live in a buffer this owns, written through a pointer: a report of a million events
/// is a hundred million appends, and an array's per-append checks would cost more than the bytes.
/// It cannot be copied, so no two writers ever share the buffer.
package struct JSONText: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    /// Bytes written so far.
    package private(set) var count = 0
    private var capacity: Int

    package init(capacity: Int = 256) {
        self.capacity = max(16, capacity)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written so far.
    package func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The bytes as a string (they are UTF-8: only valid strings and ASCII go in).
    package var text: String { withBytes { String(decoding: $0, as: UTF8.self) } }

    /// Forgets the bytes, keeping the buffer.
    package mutating func removeAll() { count = 0 }

    /// Room for `n` more bytes at `base + count`.
    @inline(__always) private mutating func reserve(_ n: Int) {
        if n > capacity - count { grow(to: count + n) }
    }

    @inline(never) private mutating func grow(to needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always) private mutating func byte(_ b: UInt8) {
        reserve(1)
        base[count] = b
        count += 1
    }

    @inline(__always) private mutating func bytes(_ p: UnsafePointer<UInt8>, _ n: Int) {
        reserve(n)
        (base + count).update(from: p, count: n)
        count += n
    }

    @inline(__always) package mutating func raw(_ s: StaticString) { bytes(s.utf8Start, s.utf8CodeUnitCount) }

    package mutating func newline(indent: Int) {
        reserve(1 + 2 * indent)
        base[count] = UInt8(ascii: "\n")
        (base + count + 1).update(repeating: UInt8(ascii: " "), count: 2 * indent)
        count += 1 + 2 * indent
    }

    package mutating func value(_ value: JSONValue, pretty: Bool, indent: Int) {
        switch value {
        case .null: raw("null")
        case .bool(let b): if b { raw("true") } else { raw("false") }
        case .int(let i): integer(i)
        case .number(let s): utf8(s)
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
    package mutating func key(_ key: String, pretty: Bool) {
        string(key)
        if pretty { raw(": ") } else { raw(":") }
    }

    package mutating func integer(_ i: Int64) {
        if i < 0 { byte(UInt8(ascii: "-")) }
        digits(i.magnitude)
    }

    /// `n` in decimal, written in place from its last digit back, two digits at a time.
    private mutating func digits(_ n: UInt64) {
        var length = 1
        var bound: UInt64 = 10
        while length < 20 && n >= bound {
            length += 1
            bound = bound &* 10
        }
        reserve(length)
        let pairs = Self.pairs.utf8Start
        var p = base + count + length
        var n = n
        while n >= 100 {
            let pair = Int(n % 100) &* 2
            n /= 100
            p -= 2
            p[0] = pairs[pair]
            p[1] = pairs[pair + 1]
        }
        if n >= 10 {
            p -= 2
            p[0] = pairs[Int(n) &* 2]
            p[1] = pairs[Int(n) &* 2 + 1]
        } else {
            p -= 1
            p[0] = UInt8(ascii: "0") + UInt8(n)
        }
        count += length
    }

    private static let pairs: StaticString = """
        00010203040506070809101112131415161718192021222324252627282930313233343536373839\
        40414243444546474849505152535455565758596061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """

    /// Milliseconds as seconds with no trailing zeros: `27`, `2.5`, `0.001` (`ReportNumber`).
    package mutating func seconds(milliseconds ms: Int64) {
        if ms < 0 { byte(UInt8(ascii: "-")) }
        digits(ms.magnitude / 1000)
        let frac = ms.magnitude % 1000
        if frac == 0 { return }
        reserve(4)
        base[count] = UInt8(ascii: ".")
        // Tenths always; hundredths and thousandths only up to the last digit that is not 0.
        base[count + 1] = UInt8(ascii: "0") + UInt8(frac / 100)
        count += 2
        if frac % 100 != 0 {
            base[count] = UInt8(ascii: "0") + UInt8(frac / 10 % 10)
            count += 1
        }
        if frac % 10 != 0 {
            base[count] = UInt8(ascii: "0") + UInt8(frac % 10)
            count += 1
        }
    }

    private static let hex: StaticString = "0123456789abcdef"

    /// The bytes of `s` as they are.
    private mutating func utf8(_ s: String) {
        var s = s
        s.withUTF8 { if let p = $0.baseAddress { bytes(p, $0.count) } }
    }

    /// `s` quoted, with `"`, `\` and the control characters escaped.
    package mutating func string(_ s: String) {
        // A native string lends its bytes without a copy; only another kind is made native.
        if s.utf8.withContiguousStorageIfAvailable({ quoted($0) }) == nil {
            var s = s
            s.withUTF8 { quoted($0) }
        }
    }

    /// `utf8`, which is valid UTF-8, quoted and escaped as `string` does.
    package mutating func string(bytes utf8: UnsafeBufferPointer<UInt8>) { quoted(utf8) }

    /// The common case first: the bytes checked eight at a time for one that needs an escape, then
    /// copied whole; only a string that has one is written byte by byte.
    @inline(__always) private mutating func quoted(_ utf8: UnsafeBufferPointer<UInt8>) {
        guard let p = utf8.baseAddress else { raw("\"\""); return }
        let n = utf8.count
        if Self.needsEscape(UnsafeRawPointer(p), n) { return escaped(utf8) }
        reserve(n + 2)
        let start = base + count
        start[0] = UInt8(ascii: "\"")
        if n >= 8 && n <= 16 {
            // Most strings here are names: two overlapping words, not a call to memmove.
            let source = UnsafeRawPointer(p), target = UnsafeMutableRawPointer(start + 1)
            let head = source.loadUnaligned(as: UInt64.self)
            let tail = source.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            target.storeBytes(of: head, as: UInt64.self)
            target.storeBytes(of: tail, toByteOffset: n - 8, as: UInt64.self)
        } else {
            (start + 1).update(from: p, count: n)
        }
        start[n + 1] = UInt8(ascii: "\"")
        count += n + 2
    }

    /// Whether any of the `n` bytes at `p` is a control character, `"` or `\`.
    @inline(__always) private static func needsEscape(_ p: UnsafeRawPointer, _ n: Int) -> Bool {
        // Exact tests for "some byte is zero" and "some byte is below 0x20" (bytes of 0x80 and
        // above, the rest of UTF-8, never match).
        @inline(__always) func any(_ x: UInt64) -> Bool {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            let quote = x ^ (ones &* 0x22), backslash = x ^ (ones &* 0x5c)
            return ((x &- ones &* 0x20) & ~x | (quote &- ones) & ~quote | (backslash &- ones) & ~backslash) & highs != 0
        }
        if n < 8 {
            for i in 0..<n {
                let b = p.load(fromByteOffset: i, as: UInt8.self)
                if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return true }
            }
            return false
        }
        var i = 0
        while i + 8 < n {
            if any(p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { return true }
            i += 8
        }
        // The last eight bytes, overlapping the ones before: no byte-by-byte tail.
        return any(p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
    }

    /// `utf8` quoted and escaped, a byte at a time.
    @inline(never) private mutating func escaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        byte(UInt8(ascii: "\""))
        for b in utf8 {
            if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { escape(b) } else { byte(b) }
        }
        byte(UInt8(ascii: "\""))
    }

    @inline(never) private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): raw("\\\"")
        case UInt8(ascii: "\\"): raw("\\\\")
        case UInt8(ascii: "\n"): raw("\\n")
        case UInt8(ascii: "\r"): raw("\\r")
        case UInt8(ascii: "\t"): raw("\\t")
        default:
            raw("\\u00")
            self.byte(Self.hex.utf8Start[Int(byte >> 4)])
            self.byte(Self.hex.utf8Start[Int(byte & 15)])
        }
    }
}

extension JSONValue {
    package var isScalar: Bool {
        switch self {
        case .array, .object: return false
        default: return true
        }
    }
}
