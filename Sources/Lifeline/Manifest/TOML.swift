/// A TOML value: everything TOML 1.0 has but dates and times.
public enum TOMLValue: Equatable, Sendable {
    /// A basic "..." or literal '...' string, on one line or multi-line, escapes decoded.
    case string(String)
    /// A decimal, 0x, 0o or 0b integer.
    case integer(Int64)
    /// A number with a fraction or exponent, or inf / nan.
    case float(Double)
    /// true or false.
    case bool(Bool)
    /// [a, b]; TOML 1.0 lets the items have different types. An array of tables ([[name]]) is one too.
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

/// TOML 1.0 without dates and times, as plugin.toml is written; docs/lua-api.md says what the
/// toml-test corpus checks.
public enum TOML {
    /// Parses `text`. Every problem throws `.badInput("fileName:line: message")`; no input makes it crash.
    public static func parse(_ text: String, fileName: String) throws(LifelineError) -> TOMLTable {
        var parser = TOMLParser(text: text, fileName: fileName)
        return try parser.parseDocument()
    }

    /// Parses a file's bytes, which must be UTF-8; one byte-order mark may start them. Reading the bytes
    /// with Foundation's `String(data:encoding:)` would drop a first mark unseen, and let a second one by.
    public static func parse(utf8 bytes: some Collection<UInt8>, fileName: String) throws(LifelineError) -> TOMLTable {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            // The line of the first byte that is not UTF-8: the longest valid start, then its new lines.
            var valid = 0, end = bytes.count
            while valid < end {
                let mid = (valid + end + 1) / 2
                if String(validating: bytes.prefix(mid), as: UTF8.self) != nil { valid = mid } else { end = mid - 1 }
            }
            let line = bytes.prefix(valid).reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
            throw .badInput("\(fileName):\(line): the file is not valid UTF-8")
        }
        return try parse(text, fileName: fileName)
    }
}

/// A table while it is being built: a class so that a `[header]` can keep adding to the table it opened.
final class TOMLNode {
    /// How a table came to exist decides what may still add to it (TOML 1.0, "Table").
    enum Origin { case implicit, header, dotted }
    /// A value (inline tables and static arrays included), a table, or an array of tables ([[name]]).
    enum Item { case value(TOMLValue), table(TOMLNode), tables([TOMLNode]) }

    var origin: Origin
    var line: Int
    /// The keys in the order they were written; add them with `append`, which keeps `positions`.
    private(set) var entries: [(key: String, item: Item, line: Int)] = []
    /// Where each key is in `entries`: a lookup by scanning them made a table of many keys take
    /// time that grew with the square of their number.
    private var positions: [String: Int] = [:]

    init(_ origin: Origin, line: Int) { (self.origin, self.line) = (origin, line) }

    func index(of key: String) -> Int? { positions[key] }

    /// Adds `key`, which must not be in the table yet.
    func append(_ key: String, _ item: Item, line: Int) {
        positions[key] = entries.count
        entries.append((key, item, line))
    }

    /// Adds `table` to the end of the array of tables at `k`, in place: rebuilding the array for
    /// each `[[name]]` made many of them quadratic.
    func appendTable(_ table: TOMLNode, at k: Int) {
        guard case .tables(var tables) = entries[k].item else { return }
        entries[k].item = .tables([])  // the array's only reference is now `tables`: appending copies nothing
        tables.append(table)
        entries[k].item = .tables(tables)
    }

    var table: TOMLTable {
        TOMLTable(entries.map { entry in
            switch entry.item {
            case .value(let value): return (entry.key, value, entry.line)
            // The node's line, not the entry's: `[a]` after `[a.b]` is where `a` is written.
            case .table(let node): return (entry.key, .table(node.table), node.line)
            case .tables(let nodes): return (entry.key, .array(nodes.map { .table($0.table) }), entry.line)
            }
        })
    }
}

/// Reads a document into `TOMLNode`s; TOML+Lexing.swift reads the strings, numbers and comments.
struct TOMLParser {
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

    func dotted<C: Collection<String>>(_ path: C) -> String { path.joined(separator: ".") }

    mutating func expectLineEnd(after what: String) throws(LifelineError) {
        try skipSpacesAndComment()
        guard atLineEnd else { throw fail("unexpected \(describe(peek)) after \(what); expected a new line") }
    }

    mutating func parseDocument() throws(LifelineError) -> TOMLTable {
        let root = TOMLNode(.header, line: 1)
        var current = root
        while true {
            try skipBlankLinesAndComments()
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

    /// `[a.b]` or `[[a.b]]`: the table that the lines after it add to.
    mutating func parseHeader(_ root: TOMLNode) throws(LifelineError) -> TOMLNode {
        let headerLine = line
        let isArray = peek(1) == "["
        i += isArray ? 2 : 1
        skipSpaces()
        let path = try parseKeyPath()
        let close = isArray ? "]]" : "]"
        guard peek == "]", !isArray || peek(1) == "]" else {
            let found = describe(peek == "]" ? peek(1) : peek)
            throw fail("expected '\(close)' to close \(isArray ? "[[" : "[")\(dotted(path)), found \(found)")
        }
        i += close.count
        var node = root
        for n in path.indices.dropLast() {
            node = try child(path, n, of: node, making: .implicit, line: headerLine) { _, _ in nil }
        }
        if isArray { return try appendTable(to: path, in: node, line: headerLine) }
        node = try child(path, path.count - 1, of: node, making: .header, line: headerLine) { name, table in
            guard table.origin != .implicit else { return nil }
            return "table [\(name)] is defined twice (first on line \(table.line))"
        }
        if node.origin == .implicit {
            // Until now the table only existed as part of a longer header; this is where it is written.
            node.origin = .header
            node.line = headerLine
        }
        return node
    }

    /// `[[path]]`: a new table at the end of the array of tables `path`, made when missing.
    func appendTable(to path: [String], in node: TOMLNode, line: Int) throws(LifelineError) -> TOMLNode {
        let table = TOMLNode(.header, line: line), name = dotted(path)
        guard let k = node.index(of: path[path.count - 1]) else {
            node.append(path[path.count - 1], .tables([table]), line: line)
            return table
        }
        let first = node.entries[k].line
        switch node.entries[k].item {
        case .tables: node.appendTable(table, at: k)
        case .table: throw fail("[[\(name)]] adds to an array of tables, but [\(name)] is a table (line \(first))")
        case .value: throw fail("[[\(name)]] adds to an array of tables, but '\(name)' is a value (line \(first))")
        }
        return table
    }

    mutating func parseKeyValue(into table: TOMLNode, depth: Int) throws(LifelineError) {
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

    func assign(_ value: TOMLValue, to path: [String], in table: TOMLNode, line keyLine: Int) throws(LifelineError) {
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
        node.append(last, .value(value), line: keyLine)
    }

    /// The table `path[n]` in `node`, made as `origin` when missing. `refusal` says why an existing table may not
    /// be entered, or nil when it may; values, inline tables included, never may. A header enters the last
    /// table of an array of tables; dotted keys may not.
    func child(
        _ path: [String], _ n: Int, of node: TOMLNode, making origin: TOMLNode.Origin, line: Int,
        refusal: (_ name: String, _ table: TOMLNode) -> String?
    ) throws(LifelineError) -> TOMLNode {
        guard let k = node.index(of: path[n]) else {
            let child = TOMLNode(origin, line: line)
            node.append(path[n], .table(child), line: line)
            return child
        }
        let name = dotted(path.prefix(n + 1)), first = node.entries[k].line
        switch node.entries[k].item {
        case .value(.table): throw fail("inline table '\(name)' (line \(first)) cannot be extended", line: line)
        case .value: throw fail("key '\(name)' is both a value (line \(first)) and a table", line: line)
        case .tables(let tables):
            guard origin == .implicit, let last = tables.last else {
                throw fail(
                    "[[\(name)]] (line \(first)) is an array of tables; [\(name)] cannot also be a table", line: line)
            }
            return last
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
        case "\"", "'":
            let quote = peek!
            if peek(1) == quote, peek(2) == quote { return .string(try parseMultiLineString(quote: quote)) }
            return .string(try quote == "\"" ? parseBasicString() : parseLiteralString())
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
            try skipBlankLinesAndComments()
            if peek == "]" { break }
            guard peek != nil else { throw unterminated }
            items.append(try parseValue(depth: depth))
            try skipBlankLinesAndComments()
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
        let node = TOMLNode(.dotted, line: line)
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
}
