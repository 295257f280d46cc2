/// A TOML value, as far as plugin manifests need: no dates, no multi-line strings, no arrays of tables.
public enum TOMLValue: Equatable, Sendable {
    /// A basic "..." or literal '...' string, escapes decoded.
    case string(String)
    /// A decimal, 0x, 0o or 0b integer.
    case integer(Int64)
    /// A number with a fraction or exponent, or inf / nan.
    case float(Double)
    /// true or false.
    case bool(Bool)
    /// [a, b]; TOML 1.0 lets the items have different types.
    case array([TOMLValue])
    /// A [header] table, a table made by dotted keys, or an inline { } table.
    case table(TOMLTable)
}

/// A TOML table that keeps its keys in the order they were written, each with its line, so that checks made
/// after parsing (such as `PluginManifest`'s) can still point at `file:line`.
public struct TOMLTable: Equatable, Sendable {
    /// The keys in the order they were written, with their values and 1-based lines.
    public var entries: [(key: String, value: TOMLValue, line: Int)]

    /// A table holding `entries` as given; duplicate keys are not checked here.
    public init(_ entries: [(key: String, value: TOMLValue, line: Int)] = []) {
        self.entries = entries
    }

    /// The value for `key`, or nil when the table has no such key.
    public subscript(key: String) -> TOMLValue? { entries.first { $0.key == key }?.value }

    /// The 1-based line `key` was written on, or nil when the table has no such key.
    public func line(of key: String) -> Int? { entries.first { $0.key == key }?.line }

    /// The keys in the order they were written.
    public var keys: [String] { entries.map(\.key) }

    /// Same keys with the same values in the same order. Lines say where a table was written, not what it
    /// holds, so the same table written with other spacing is still equal.
    public static func == (a: TOMLTable, b: TOMLTable) -> Bool {
        a.entries.count == b.entries.count
            && zip(a.entries, b.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// The TOML subset that plugin.toml uses (TOML 1.0 without dates, multi-line strings and arrays of tables).
public enum TOML {
    /// Parses `text`. Every problem throws `.badInput("fileName:line: message")`; no input makes it crash.
    public static func parse(_ text: String, fileName: String) throws(LifelineError) -> TOMLTable {
        var parser = Parser(text: text, fileName: fileName)
        return try parser.parseDocument()
    }
}

/// A table while it is being built: a class so that a `[header]` can keep adding to the table it opened.
private final class Node {
    /// How a table came to exist decides what may still add to it (TOML 1.0, "Table").
    enum Origin { case implicit, header, dotted }
    enum Item { case value(TOMLValue), table(Node) }

    var origin: Origin
    var line: Int
    var entries: [(key: String, item: Item, line: Int)] = []

    init(_ origin: Origin, line: Int) { (self.origin, self.line) = (origin, line) }

    func index(of key: String) -> Int? { entries.firstIndex { $0.key == key } }

    var table: TOMLTable {
        TOMLTable(entries.map { entry in
            switch entry.item {
            case .value(let value): return (entry.key, value, entry.line)
            // The node's line, not the entry's: `[a]` after `[a.b]` is where `a` is written.
            case .table(let node): return (entry.key, .table(node.table), node.line)
            }
        })
    }
}

private struct Parser {
    /// Bounds recursion (arrays, inline tables, dotted keys) so that hostile input fails instead of
    /// overflowing the stack.
    static let maximumDepth = 64

    let s: [Unicode.Scalar]
    let fileName: String
    var i = 0
    var line = 1

    init(text: String, fileName: String) {
        // Scalars, not Characters: "\r\n" is one Character, and a combining mark after a quote would merge with it.
        s = Array(text.unicodeScalars)
        self.fileName = fileName
        if s.first == "\u{FEFF}" { i = 1 }
    }

    /// What a bare key is made of; bare values (numbers, booleans) add `+ . :` to it.
    static func isBare(_ c: Unicode.Scalar) -> Bool {
        "a"..."z" ~= c || "A"..."Z" ~= c || "0"..."9" ~= c || c == "_" || c == "-"
    }

    static let escapes: [Unicode.Scalar: Unicode.Scalar] = [
        "\"": "\"", "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\u{08}", "f": "\u{0C}",
    ]

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

    func dotted<C: Collection<String>>(_ path: C) -> String { path.joined(separator: ".") }

    mutating func skipSpaces() { while peek == " " || peek == "\t" { i += 1 } }

    /// Spaces and a comment, up to but not past the end of the line.
    mutating func skipSpacesAndComment() {
        skipSpaces()
        if peek == "#" { while let c = peek, c != "\n" { i += 1 } }
    }

    mutating func consumeNewline() -> Bool {
        if peek == "\n" { i += 1 } else if peek == "\r", peek(1) == "\n" { i += 2 } else { return false }
        line += 1
        return true
    }

    mutating func skipBlankLinesAndComments() {
        repeat { skipSpacesAndComment() } while consumeNewline()
    }

    mutating func expectLineEnd(after what: String) throws(LifelineError) {
        skipSpacesAndComment()
        guard atLineEnd else { throw fail("unexpected \(describe(peek)) after \(what); expected a new line") }
    }

    mutating func parseDocument() throws(LifelineError) -> TOMLTable {
        let root = Node(.header, line: 1)
        var current = root
        while true {
            skipBlankLinesAndComments()
            if peek == nil { return root.table }
            if peek == "[" {
                current = try parseHeader(root)
                try expectLineEnd(after: "the table header")
            } else {
                try parseKeyValue(into: current, depth: 0)
                try expectLineEnd(after: "the value")
            }
        }
    }

    mutating func parseHeader(_ root: Node) throws(LifelineError) -> Node {
        let headerLine = line
        i += 1
        if peek == "[" { throw fail("arrays of tables ([[...]]) are not supported") }
        skipSpaces()
        let path = try parseKeyPath()
        guard peek == "]" else { throw fail("expected ']' to close [\(dotted(path)), found \(describe(peek))") }
        i += 1
        var node = root
        for n in path.indices {
            let isLast = n == path.count - 1
            node = try child(path, n, of: node, making: isLast ? .header : .implicit, line: headerLine) { name, table in
                guard isLast, table.origin != .implicit else { return nil }
                return "table [\(name)] is defined twice (first on line \(table.line))"
            }
        }
        if node.origin == .implicit {
            // Until now the table only existed as part of a longer header; this is where it is written.
            node.origin = .header
            node.line = headerLine
        }
        return node
    }

    mutating func parseKeyValue(into table: Node, depth: Int) throws(LifelineError) {
        let keyLine = line
        let path = try parseKeyPath()
        guard peek == "=" else {
            let found = atLineEnd ? "" : ", found \(describe(peek))"
            throw fail("expected '=' after key '\(dotted(path))'\(found)")
        }
        i += 1
        skipSpaces()
        if atLineEnd || peek == "#" { throw fail("missing value for key '\(dotted(path))'") }
        let value = try parseValue(depth: depth + path.count)
        try assign(value, to: path, in: table, line: keyLine)
    }

    func assign(_ value: TOMLValue, to path: [String], in table: Node, line keyLine: Int) throws(LifelineError) {
        guard let last = path.last else { throw fail("expected a key", line: keyLine) }
        var node = table
        for n in path.indices.dropLast() {
            node = try child(path, n, of: node, making: .dotted, line: keyLine) { name, table in
                // Dotted keys may only add to tables that dotted keys made (TOML 1.0).
                guard table.origin != .dotted else { return nil }
                return "table [\(name)] (line \(table.line)) cannot be extended with dotted keys"
            }
        }
        if let k = node.index(of: last) {
            throw fail("duplicate key '\(dotted(path))' (first defined on line \(node.entries[k].line))", line: keyLine)
        }
        node.entries.append((last, .value(value), keyLine))
    }

    /// The table `path[n]` in `node`, made as `origin` when missing. `refusal` says why an existing table may not
    /// be entered, or nil when it may; values, inline tables included, never may.
    func child(
        _ path: [String], _ n: Int, of node: Node, making origin: Node.Origin, line: Int,
        refusal: (_ name: String, _ table: Node) -> String?
    ) throws(LifelineError) -> Node {
        guard let k = node.index(of: path[n]) else {
            let child = Node(origin, line: line)
            node.entries.append((path[n], .table(child), line))
            return child
        }
        let name = dotted(path.prefix(n + 1)), first = node.entries[k].line
        switch node.entries[k].item {
        case .value(.table): throw fail("inline table '\(name)' (line \(first)) cannot be extended", line: line)
        case .value: throw fail("key '\(name)' is both a value (line \(first)) and a table", line: line)
        case .table(let child):
            if let refusal = refusal(name, child) { throw fail(refusal, line: line) }
            return child
        }
    }

    /// `a`, `"a b"`, `a.b.'c'`; consumes the spaces after it.
    mutating func parseKeyPath() throws(LifelineError) -> [String] {
        var path: [String] = []
        while true {
            switch peek {
            case "\"": path.append(try parseBasicString())
            case "'": path.append(try parseLiteralString())
            default:
                let start = i
                while let c = peek, Self.isBare(c) { i += 1 }
                guard i > start else { throw fail("expected a key, found \(describe(peek))") }
                path.append(string(s[start..<i]))
            }
            if path.count > Self.maximumDepth { throw fail("key '\(dotted(path))' has too many parts") }
            skipSpaces()
            guard peek == "." else { return path }
            i += 1
            skipSpaces()
        }
    }

    mutating func parseValue(depth: Int) throws(LifelineError) -> TOMLValue {
        guard depth <= Self.maximumDepth else { throw fail("values are nested too deeply") }
        switch peek {
        case "\"":
            if peek(1) == "\"", peek(2) == "\"" { throw fail("multi-line strings (\"\"\") are not supported") }
            return .string(try parseBasicString())
        case "'":
            if peek(1) == "'", peek(2) == "'" { throw fail("multi-line strings (''') are not supported") }
            return .string(try parseLiteralString())
        case "[": return try parseArray(depth: depth + 1)
        case "{": return try parseInlineTable(depth: depth + 1)
        default: return try parseBareValue()
        }
    }

    mutating func parseArray(depth: Int) throws(LifelineError) -> TOMLValue {
        let openLine = line
        let unterminated = fail("unterminated array (opened on line \(openLine))", line: openLine)
        i += 1
        var items: [TOMLValue] = []
        while true {
            skipBlankLinesAndComments()
            if peek == "]" { break }
            guard peek != nil else { throw unterminated }
            items.append(try parseValue(depth: depth))
            skipBlankLinesAndComments()
            if peek == "," { i += 1; continue }
            if peek == "]" { break }
            guard peek != nil else { throw unterminated }
            throw fail("expected ',' or ']' in the array opened on line \(openLine), found \(describe(peek))")
        }
        i += 1
        return .array(items)
    }

    /// `{ a = 1, b.c = "x" }`, on one line as TOML 1.0 asks; the table is frozen once closed.
    mutating func parseInlineTable(depth: Int) throws(LifelineError) -> TOMLValue {
        let unterminated = fail("unterminated inline table; inline tables must be on one line")
        let node = Node(.dotted, line: line)
        i += 1
        skipSpaces()
        if peek == "}" { i += 1; return .table(node.table) }
        while true {
            skipSpaces()
            if atLineEnd { throw unterminated }
            try parseKeyValue(into: node, depth: depth)
            skipSpaces()
            if peek == "," { i += 1; continue }
            if peek == "}" { i += 1; return .table(node.table) }
            throw atLineEnd ? unterminated : fail("expected ',' or '}' in inline table, found \(describe(peek))")
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
            guard let e = peek, !atLineEnd else { throw fail("unterminated string") }
            i += 1
            if let plain = Self.escapes[e] {
                out.append(plain)
                continue
            }
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
            out.append(scalar)
        }
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

    func checkNotControl(_ c: Unicode.Scalar) throws(LifelineError) {
        if (c.value < 0x20 && c != "\t") || c.value == 0x7F {
            throw fail("control character \(describe(c)) in string; write it as an escape")
        }
    }

    /// Booleans and numbers: everything that is written without quotes or brackets.
    mutating func parseBareValue() throws(LifelineError) -> TOMLValue {
        let start = i
        while let c = peek, Self.isBare(c) || c == "+" || c == "." || c == ":" { i += 1 }
        let token = string(s[start..<i])
        if token.isEmpty { throw fail("expected a value, found \(describe(peek))") }
        let scalars = Array(token.unicodeScalars)
        let isDigit = { (c: Unicode.Scalar) in "0"..."9" ~= c }
        // The whole unquoted run, for messages: `http://x` rather than the `http:` read so far.
        var end = i
        while end < s.count, !" \t\r\n#,]}".unicodeScalars.contains(s[end]) { end += 1 }
        let written = string(s[start..<end])
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

    func parseNumber(_ token: String, _ scalars: [Unicode.Scalar]) throws(LifelineError) -> TOMLValue? {
        let radixes: [String: Int] = ["0x": 16, "0o": 8, "0b": 2]
        let radix = radixes[String(token.prefix(2))]
        let isDigit = { (c: Unicode.Scalar) in radix == nil ? "0"..."9" ~= c : c.properties.isASCIIHexDigit }
        for (k, c) in scalars.enumerated() where c == "_" {
            guard k > 0, k + 1 < scalars.count, isDigit(scalars[k - 1]), isDigit(scalars[k + 1]) else {
                throw fail("misplaced '_' in '\(token)'; underscores go between digits")
            }
        }
        let clean = token.filter { $0 != "_" }
        if let radix {
            let digits = clean.dropFirst(2)
            guard !digits.isEmpty, digits.allSatisfy({ Int(String($0), radix: radix) != nil }) else { return nil }
            guard let value = Int64(digits, radix: radix) else { throw fail("integer '\(token)' is out of range") }
            return .integer(value)
        }
        guard let match = clean.wholeMatch(of: /[+-]?([0-9]+)(\.[0-9]+)?([eE][+-]?[0-9]+)?/) else { return nil }
        if match.1.count > 1 && match.1.first == "0" { throw fail("leading zeros are not allowed in '\(token)'") }
        if match.2 == nil && match.3 == nil {
            guard let value = Int64(clean) else { throw fail("integer '\(token)' is out of range") }
            return .integer(value)
        }
        return Double(clean).map(TOMLValue.float)
    }

    func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String { String(String.UnicodeScalarView(scalars)) }
}
