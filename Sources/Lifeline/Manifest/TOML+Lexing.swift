/// The TOML reader's tokens: white space and comments, strings, and the values written without quotes.
/// TOML.swift puts them together into tables.
extension TOMLParser {
    /// What a bare key is made of; bare values (numbers, booleans) add `+ . :` to it.
    static func isBare(_ c: Unicode.Scalar) -> Bool {
        "a"..."z" ~= c || "A"..."Z" ~= c || "0"..."9" ~= c || c == "_" || c == "-"
    }

    static let escapes: [Unicode.Scalar: Unicode.Scalar] = [
        "\"": "\"", "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\u{08}", "f": "\u{0C}",
    ]

    static let radixes: [String: Int] = ["0x": 16, "0o": 8, "0b": 2]

    static let keywords: [String: TOMLValue] = [
        "true": .bool(true), "false": .bool(false), "inf": .float(.infinity), "+inf": .float(.infinity),
        "-inf": .float(-.infinity), "nan": .float(.nan), "+nan": .float(.nan), "-nan": .float(.nan),
    ]

    var peek: Unicode.Scalar? { i < s.count ? s[i] : nil }
    func peek(_ offset: Int) -> Unicode.Scalar? { i + offset < s.count ? s[i + offset] : nil }
    var atLineEnd: Bool { peek == nil || peek == "\n" || (peek == "\r" && peek(1) == "\n") }

    func fail(_ message: String, line: Int? = nil) -> LifelineError {
        .badInput("\(fileName):\(line ?? self.line): \(message)")
    }

    func describe(_ c: Unicode.Scalar?) -> String { c.map { "'\($0.escaped(asASCII: false))'" } ?? "end of file" }

    func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String { String(String.UnicodeScalarView(scalars)) }

    mutating func skipSpaces() { while peek == " " || peek == "\t" { i += 1 } }

    /// Spaces and a comment, up to but not past the end of the line. A comment may hold any character
    /// but the control characters (tab aside), as a string may.
    mutating func skipSpacesAndComment() throws(LifelineError) {
        skipSpaces()
        guard peek == "#" else { return }
        while let c = peek, !atLineEnd {
            try checkNotControl(c, in: "comment")
            i += 1
        }
    }

    mutating func consumeNewline() -> Bool {
        if peek == "\n" { i += 1 } else if peek == "\r", peek(1) == "\n" { i += 2 } else { return false }
        line += 1
        return true
    }

    mutating func skipBlankLinesAndComments() throws(LifelineError) {
        repeat { try skipSpacesAndComment() } while consumeNewline()
    }

    func checkNotControl(_ c: Unicode.Scalar, in what: String = "string") throws(LifelineError) {
        if (c.value < 0x20 && c != "\t") || c.value == 0x7F {
            let advice = what == "string" ? "; write it as an escape" : ""
            throw fail("control character \(describe(c)) in \(what)\(advice)")
        }
    }

    mutating func parseBasicString() throws(LifelineError) -> String {
        i += 1
        var out = String.UnicodeScalarView()
        while true {
            guard let c = peek, !atLineEnd else { throw fail("unterminated string") }
            i += 1
            if c == "\"" { return String(out) }
            if c != "\\" {
                try checkNotControl(c)
                out.append(c)
                continue
            }
            out.append(try parseEscape())
        }
    }

    /// The character an escape after a backslash stands for.
    mutating func parseEscape() throws(LifelineError) -> Unicode.Scalar {
        guard let e = peek, !atLineEnd else { throw fail("unterminated string") }
        i += 1
        if let plain = Self.escapes[e] { return plain }
        guard e == "u" || e == "U" else { throw fail("invalid escape '\\\(e.escaped(asASCII: false))' in string") }
        let count = e == "u" ? 4 : 8
        var code: UInt32 = 0
        for _ in 0..<count {
            guard let h = peek, h.properties.isASCIIHexDigit, let digit = UInt32(String(h), radix: 16) else {
                throw fail("invalid escape: \\\(e) needs \(count) hex digits")
            }
            code = code * 16 + digit
            i += 1
        }
        guard let scalar = Unicode.Scalar(code) else {
            throw fail("invalid escape: U+\(String(code, radix: 16, uppercase: true)) is not a character")
        }
        return scalar
    }

    mutating func parseLiteralString() throws(LifelineError) -> String {
        i += 1
        let start = i
        while true {
            guard let c = peek, !atLineEnd else { throw fail("unterminated string") }
            if c == "'" { break }
            try checkNotControl(c)
            i += 1
        }
        i += 1
        return string(s[start..<(i - 1)])
    }

    /// `"""..."""` (escapes decoded) or `'''...'''` (as written). A new line right after the opening
    /// quotes is dropped, every other one is kept as "\n"; in a basic one, a backslash at the end of a
    /// line drops the line end and the white space after it. One or two quotes may end the content.
    mutating func parseMultiLineString(quote: Unicode.Scalar) throws(LifelineError) -> String {
        let openLine = line
        i += 3
        _ = consumeNewline()
        var out = String.UnicodeScalarView()
        while true {
            guard let c = peek else { throw fail("unterminated multi-line string (opened on line \(openLine))") }
            if c == quote {
                var run = 0
                while peek == quote { run += 1; i += 1 }
                if run > 5 { throw fail("too many quotes (\(run)) at the end of a multi-line string") }
                // One by one: `String.UnicodeScalarView.append(contentsOf:)` takes time that grows with
                // the view's length, which made a string of many quote pairs take minutes.
                for _ in 0..<(run >= 3 ? run - 3 : run) { out.append(quote) }
                if run >= 3 { return String(out) }
            } else if consumeNewline() {
                out.append("\n")
            } else if c == "\\" && quote == "\"" {
                i += 1
                if try skipLineEndingBackslash() { continue }
                out.append(try parseEscape())
            } else {
                try checkNotControl(c)
                out.append(c)
                i += 1
            }
        }
    }

    /// After a backslash: when only spaces stand before the end of the line, skips them, the line end,
    /// and every blank and new line after it; true when it did.
    mutating func skipLineEndingBackslash() throws(LifelineError) -> Bool {
        let start = i
        skipSpaces()
        guard peek != nil, atLineEnd else {
            i = start
            return false
        }
        while consumeNewline() { skipSpaces() }
        return true
    }

    /// Booleans and numbers: everything that is written without quotes or brackets.
    mutating func parseBareValue() throws(LifelineError) -> TOMLValue {
        let start = i
        while let c = peek, Self.isBare(c) || c == "+" || c == "." || c == ":" { i += 1 }
        if i == start { throw fail("expected a value, found \(describe(peek))") }
        if let small = Self.smallInteger(s[start..<i]) { return .integer(small) }
        let token = string(s[start..<i])
        let scalars = Array(s[start..<i])
        let isDigit = { (c: Unicode.Scalar) in "0"..."9" ~= c }
        // The whole unquoted run, for messages: `http://x` rather than the `http:` read so far.
        var written: String {
            var end = i
            while end < s.count, !" \t\r\n#,]}".unicodeScalars.contains(s[end]) { end += 1 }
            return string(s[start..<end])
        }
        let startsWithDigit = scalars.first.map(isDigit) ?? false
        let looksLikeDate =
            token.contains(":") || (scalars.count > 4 && scalars[..<4].allSatisfy(isDigit) && scalars[4] == "-")
        if startsWithDigit && looksLikeDate {
            throw fail("dates are not supported; quote '\(written)' to make it a string")
        }
        if let keyword = Self.keywords[token] { return keyword }
        if let number = try parseNumber(token, scalars) { return number }
        throw fail("invalid value '\(written)'; a string must be quoted, as in \"\(written)\"")
    }

    /// A decimal integer of at most 18 digits, without underscores or a leading zero: what most
    /// numbers of a plugin.toml are, read without the general path's strings. nil for anything else,
    /// which the general path reads (or refuses) as before.
    static func smallInteger(_ c: ArraySlice<Unicode.Scalar>) -> Int64? {
        var k = c.startIndex
        let negative = c[k] == "-"
        if negative || c[k] == "+" { k += 1 }
        guard k < c.endIndex, c.endIndex - k <= 18, c[k] != "0" || c.endIndex - k == 1 else { return nil }
        var value: Int64 = 0
        while k < c.endIndex {
            let digit = c[k].value &- 48  // "0"
            guard digit < 10 else { return nil }
            value = value * 10 + Int64(digit)
            k += 1
        }
        return negative ? -value : value
    }

    func parseNumber(_ token: String, _ scalars: [Unicode.Scalar]) throws(LifelineError) -> TOMLValue? {
        let radix = Self.radixes[String(token.prefix(2))]
        // Underscores go between digits of the number proper: `0x_1` has one after the prefix's letter.
        let digits = radix == nil ? scalars[...] : scalars.dropFirst(2)
        let isDigit = { (c: Unicode.Scalar) in radix == nil ? "0"..."9" ~= c : c.properties.isASCIIHexDigit }
        for k in digits.indices where digits[k] == "_" {
            guard k > digits.startIndex, k + 1 < digits.endIndex, isDigit(digits[k - 1]), isDigit(digits[k + 1]) else {
                throw fail("misplaced '_' in '\(token)'; underscores go between digits")
            }
        }
        let clean = token.filter { $0 != "_" }
        if let radix {
            let digits = clean.dropFirst(2)
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.hexDigitValue ?? radix) < radix }) else {
                return nil
            }
            guard let value = Int64(digits, radix: radix) else { throw fail("integer '\(token)' is out of range") }
            return .integer(value)
        }
        guard let shape = Self.decimalShape(Array(clean.unicodeScalars)) else { return nil }
        if shape.leadingZero { throw fail("leading zeros are not allowed in '\(token)'") }
        if shape.isInteger {
            guard let value = Int64(clean) else { throw fail("integer '\(token)' is out of range") }
            return .integer(value)
        }
        return Double(clean).map(TOMLValue.float)
    }

    /// Whether `c` is a decimal number, `[+-]? DIGITS (. DIGITS)? ([eE] [+-]? DIGITS)?`, read in one
    /// pass: nil when it is not; else whether its whole part has a leading zero, and whether it is an
    /// integer (no fraction, no exponent). A `Regex` here was compiled for every value, which made a
    /// plugin.toml of many numbers take minutes.
    static func decimalShape(_ c: [Unicode.Scalar]) -> (leadingZero: Bool, isInteger: Bool)? {
        var k = 0
        func digits() -> Int {
            let start = k
            while k < c.count, "0"..."9" ~= c[k] { k += 1 }
            return k - start
        }
        if k < c.count, c[k] == "+" || c[k] == "-" { k += 1 }
        let wholeStart = k
        let whole = digits()
        guard whole > 0 else { return nil }
        var isInteger = true
        if k < c.count, c[k] == "." {
            k += 1
            guard digits() > 0 else { return nil }
            isInteger = false
        }
        if k < c.count, c[k] == "e" || c[k] == "E" {
            k += 1
            if k < c.count, c[k] == "+" || c[k] == "-" { k += 1 }
            guard digits() > 0 else { return nil }
            isInteger = false
        }
        guard k == c.count else { return nil }
        return (whole > 1 && c[wholeStart] == "0", isInteger)
    }
}
