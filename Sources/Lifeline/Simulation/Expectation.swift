/// One `expect` line of a scenario: what must have happened when the simulation ends.
///
/// ```
/// expect outcome completed                      # or: terminated
/// expect termination watchdog [plugin=sync]     # any kind of Termination.Kind
/// expect taskEnded plugin=save-changes expired=false at 7s
/// expect opFinished name="queue sync.refresh" result=finished between 1s and 30s times 2
/// expect no pluginError
/// expect log plugin=save-changes level=info contains "saved 3 edits"
/// ```
///
/// - `expect EVENT [FIELD=VALUE …] [at TIME | between TIME and TIME] [times N] [contains "TEXT"]`:
///   EVENT is any event name of the report's timeline. Without `times`, at least one event must
///   match; with it, exactly N. `at` compares to the millisecond; `between` is inclusive.
///   `contains` matches events whose `message` holds TEXT.
/// - `expect no EVENT …`: no event matches (`times` is not allowed there).
/// - `expect log …` is the same as any event, for the `log` events; `level` must be a log level.
///
/// A VALUE is a number (compared as a number: `1.5` matches `1.500`), `true`/`false`, `null`, a
/// bare word, or a quoted string with `\"` and `\\` escapes. A bare word also matches a string
/// field that reads the same (`transfer=1` matches `"1"`); a quoted string matches strings only.
/// A field absent from an event does not match.
///
/// `#` starts a comment outside quotes only. Words may come in any order after the event name,
/// and each clause at most once.
public struct Expectation: Equatable, Sendable {
    /// 1-based line number in the scenario file; 0 for the implicit expectations of `check`.
    public var line: Int
    /// The line as written, without its comment and outer blanks, blanks between words collapsed
    /// (not inside quotes): `expect outcome completed`.
    public var text: String
    /// What the line asks for.
    public var kind: Kind

    public init(line: Int, text: String, kind: Kind) {
        self.line = line
        self.text = text
        self.kind = kind
    }

    /// What an expectation asks for.
    public enum Kind: Equatable, Sendable {
        /// `expect outcome completed|terminated`.
        case outcome(terminated: Bool)
        /// `expect termination KIND [FIELD=VALUE …]`: fields match the report's `termination` object.
        case termination(Termination.Kind, fields: [FieldMatch])
        /// `expect [no] EVENT …` and `expect log …`.
        case events(EventQuery, count: Count)
        /// Added by `check` when a scenario has expect lines: a termination none of them expects.
        case noUnexpectedTermination
        /// Added by `check` when a scenario has expect lines: a `pluginError` none of them names.
        case noUnexpectedPluginError
    }

    /// How many timeline events must match.
    public enum Count: Equatable, Sendable {
        case atLeastOne
        case exactly(Int)
        /// `expect no …`.
        case none
    }

    /// Which timeline events an expectation is about.
    public struct EventQuery: Equatable, Sendable {
        public var event: String
        public var fields: [FieldMatch]
        public var window: Window?
        /// Text the event's `message` must contain.
        public var contains: String?

        public init(event: String, fields: [FieldMatch] = [], window: Window? = nil, contains: String? = nil) {
            self.event = event
            self.fields = fields
            self.window = window
            self.contains = contains
        }
    }

    /// When an event must have happened, in whole milliseconds (the report's precision).
    public enum Window: Equatable, Sendable {
        case at(Int64)
        /// Inclusive at both ends.
        case between(Int64, Int64)

        func contains(milliseconds t: Int64) -> Bool {
            switch self {
            case .at(let ms): return t == ms
            case .between(let a, let b): return a <= t && t <= b
            }
        }

        /// `at 7s`, `between 1s and 2.5s`.
        var description: String {
            switch self {
            case .at(let ms): return "at \(ReportNumber.milliseconds(ms))s"
            case .between(let a, let b):
                return "between \(ReportNumber.milliseconds(a))s and \(ReportNumber.milliseconds(b))s"
            }
        }
    }

    /// `FIELD=VALUE`.
    public struct FieldMatch: Equatable, Sendable {
        public var name: String
        public var value: Value

        public init(name: String, value: Value) {
            self.name = name
            self.value = value
        }
    }

    /// A value as written: bare or quoted, which decides what it matches.
    public enum Value: Equatable, Sendable {
        /// A number, `true`, `false`, `null` or a word.
        case word(String)
        /// A quoted string, escapes resolved.
        case quoted(String)
    }

    /// Every kind a termination can have, from the one list of them, so a new kind is named here too.
    static let termKinds = Termination.Kind.allCases.map(\.rawValue).joined(separator: ", ")
    static let logLevels = ["debug", "info", "warning", "error"]
    static let forms =
        "write 'expect outcome completed|terminated', 'expect termination KIND', "
        + "'expect EVENT [FIELD=VALUE …] [at TIME | between TIME and TIME] [times N]', 'expect no EVENT …' "
        + "or 'expect log [plugin=NAME] [level=LEVEL] contains \"TEXT\"'"

    /// Parses one whole `expect` line as written in the file (its comment included, since a quoted
    /// string may hold a `#`). `at` is `file:line`, for messages.
    ///
    /// - Throws: `LifelineError.badInput` with `at` and what was expected, for any malformed line.
    static func parse(rawLine: Substring, line: Int, at: String) throws(LifelineError) -> Expectation {
        let tokens = try Token.split(rawLine, at: at)
        if let single = tokens.first(where: { $0.bare.contains("'") }) {
            throw .badInput(
                "\(at): '\(single.source)': text goes in double quotes here, as in name=\"queue sync\"; "
                    + "a single quote is a plain character")
        }
        let text = tokens.map(\.source).joined(separator: " ")
        guard tokens.first?.word == "expect" else {
            throw .badInput("\(at): an expectation starts with 'expect'; \(forms)")
        }
        var rest = tokens.dropFirst()
        guard let first = rest.popFirst() else {
            throw .badInput("\(at): 'expect' needs what to expect; \(forms)")
        }
        let kind: Kind
        switch first.word {
        case "outcome":
            guard let word = rest.popFirst()?.word, word == "completed" || word == "terminated" else {
                throw .badInput("\(at): after 'expect outcome' write 'completed' or 'terminated'")
            }
            if let extra = rest.first {
                throw .badInput("\(at): unexpected '\(extra.source)' after 'expect outcome \(word)'")
            }
            kind = .outcome(terminated: word == "terminated")
        case "termination":
            guard let word = rest.popFirst() else {
                throw .badInput("\(at): after 'expect termination' write the kind: \(termKinds)")
            }
            guard let termKind = word.word.flatMap(Termination.Kind.init(rawValue:)) else {
                throw .badInput(
                    "\(at): unknown termination kind '\(word.source)'; the kinds are: \(termKinds)")
            }
            var fields: [FieldMatch] = []
            var names: Set<String> = []
            for token in rest {
                guard let field = try token.field(at: at) else {
                    throw .badInput(
                        "\(at): unexpected '\(token.source)' after 'expect termination \(termKind.rawValue)'; "
                            + "only FIELD=VALUE may follow, as in plugin=sync")
                }
                try checkUnique(field, in: &names, at: at)
                fields.append(field)
            }
            kind = .termination(termKind, fields: fields)
        case "no":
            guard let name = rest.popFirst() else {
                throw .badInput("\(at): after 'expect no' write an event name, as in 'expect no pluginError'")
            }
            kind = .events(try query(name, rest, negative: true, at: at).query, count: .none)
        default:
            let parsed = try query(first, rest, negative: false, at: at)
            kind = .events(parsed.query, count: parsed.times.map(Count.exactly) ?? .atLeastOne)
        }
        return Expectation(line: line, text: text, kind: kind)
    }

    /// An event name and the clauses after it.
    private static func query(
        _ name: Token, _ tokens: ArraySlice<Token>, negative: Bool, at: String
    ) throws(LifelineError) -> (query: EventQuery, times: Int?) {
        guard let event = name.word, isIdentifier(event) else {
            throw .badInput(
                "\(at): '\(name.source)' is not an event name; write one of the report's events, as in "
                    + "'expect taskEnded plugin=save-changes', or \(forms)")
        }
        var query = EventQuery(event: event)
        var fieldNames: Set<String> = []
        var times: Int?
        var rest = tokens
        let clauses =
            negative
            ? "FIELD=VALUE, 'at TIME', 'between TIME and TIME' or 'contains \"TEXT\"'"
            : "FIELD=VALUE, 'at TIME', 'between TIME and TIME', 'times N' or 'contains \"TEXT\"'"
        while let token = rest.popFirst() {
            switch token.word {
            case "at":
                guard query.window == nil else { throw .badInput("\(at): give at most one 'at' or 'between'") }
                guard let time = rest.popFirst()?.word else {
                    throw .badInput("\(at): 'at' needs a time, as in 'at 7s'")
                }
                query.window = .at(try Units.parseDuration(time, at: at).milliseconds)
            case "between":
                guard query.window == nil else { throw .badInput("\(at): give at most one 'at' or 'between'") }
                let form = "write 'between TIME and TIME', as in 'between 5s and 30s'"
                guard let a = rest.popFirst()?.word else {
                    throw .badInput("\(at): 'between' needs two times; \(form)")
                }
                guard rest.popFirst()?.word == "and", let b = rest.popFirst()?.word else {
                    throw .badInput("\(at): 'between \(a)' needs 'and TIME'; \(form)")
                }
                let start = try Units.parseDuration(a, at: at)
                let end = try Units.parseDuration(b, at: at)
                guard start <= end else {
                    throw .badInput("\(at): 'between \(a) and \(b)' goes backwards: put the earlier time first")
                }
                query.window = .between(start.milliseconds, end.milliseconds)
            case "times":
                guard !negative else {
                    throw .badInput("\(at): 'expect no' takes no 'times'; write 'expect EVENT … times N' instead")
                }
                guard times == nil else { throw .badInput("\(at): give 'times' once") }
                guard let word = rest.popFirst()?.word, word.allSatisfy({ $0.isASCII && $0.isNumber }),
                    let n = Int(word)
                else {
                    throw .badInput("\(at): 'times' needs a whole number, as in 'times 2'")
                }
                times = n
            case "contains":
                guard query.contains == nil else { throw .badInput("\(at): give 'contains' once") }
                guard let text = rest.popFirst(), let value = text.quoted ?? text.word else {
                    throw .badInput("\(at): 'contains' needs a text, as in 'contains \"saved\"'")
                }
                query.contains = value
            default:
                guard let field = try token.field(at: at) else {
                    throw .badInput("\(at): unexpected '\(token.source)' after '\(event)'; write \(clauses)")
                }
                if field.name == "event" {
                    throw .badInput("\(at): the event name goes right after 'expect', not as event=…")
                }
                try checkUnique(field, in: &fieldNames, at: at)
                if event == ReportEventName.log.rawValue, field.name == "level", !logLevels.contains(field.value.text) {
                    throw .badInput(
                        "\(at): unknown log level '\(field.value.text)'; the levels are: "
                            + logLevels.joined(separator: ", "))
                }
                query.fields.append(field)
            }
        }
        return (query, times)
    }

    /// Adds the field's name to `names`, the names given so far on the line (a set: a line of many
    /// fields must not compare each with all the others).
    private static func checkUnique(_ field: FieldMatch, in names: inout Set<String>, at: String) throws(LifelineError) {
        guard names.insert(field.name).inserted else {
            throw .badInput("\(at): the field '\(field.name)' is given twice")
        }
    }

    static func isIdentifier(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, first.properties.isAlphabetic || first == "_" else {
            return false
        }
        return text.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || $0 == "_" || ("0"..."9").contains($0))
        }
    }
}

extension Expectation.Value {
    /// The value's text, escapes resolved.
    var text: String {
        switch self {
        case .word(let w): return w
        case .quoted(let q): return q
        }
    }
}

/// One blank-separated word of an `expect` line: a bare part, then maybe a quoted one
/// (`name="queue sync"`, `"saved 3"`, `plugin=sync`).
private struct Token {
    /// As written.
    var source: String
    /// The text before any quote.
    var bare: String
    /// The quoted text, escapes resolved; nil without quotes.
    var quoted: String?

    /// The word, when the token has no quotes.
    var word: String? { quoted == nil ? bare : nil }

    /// `FIELD=VALUE`, or nil when the token has no `=` before any quote.
    func field(at: String) throws(LifelineError) -> Expectation.FieldMatch? {
        guard let equals = bare.firstIndex(of: "=") else {
            if quoted != nil {
                throw .badInput(
                    "\(at): unexpected \(source): a quoted text goes after FIELD= or 'contains', as in "
                        + "name=\"queue sync\"")
            }
            return nil
        }
        let name = String(bare[..<equals])
        let after = String(bare[bare.index(after: equals)...])
        guard Expectation.isIdentifier(name) else {
            throw .badInput("\(at): '\(name)' in '\(source)' is not a field name; write FIELD=VALUE, as in task=1")
        }
        if let quoted {
            guard after.isEmpty else {
                throw .badInput("\(at): in '\(source)', quote the whole value: \(name)=\"…\"")
            }
            return .init(name: name, value: .quoted(quoted))
        }
        guard !after.isEmpty else {
            throw .badInput("\(at): '\(source)' has no value; write FIELD=VALUE, as in task=1 or name=\"queue sync\"")
        }
        return .init(name: name, value: .word(after))
    }

    // "\r\n" is one Character in Swift.
    static func isBlank(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\r" || c == "\n" || c == "\r\n" }

    /// The words of `line` up to a `#` outside quotes.
    static func split(_ line: Substring, at: String) throws(LifelineError) -> [Token] {
        var tokens: [Token] = []
        var i = line.startIndex
        while true {
            while i < line.endIndex, isBlank(line[i]) { i = line.index(after: i) }
            if i == line.endIndex || line[i] == "#" { return tokens }
            let start = i
            var bare = ""
            var quoted: String?
            while i < line.endIndex, !isBlank(line[i]), line[i] != "#" {
                if quoted != nil {
                    throw .badInput(
                        "\(at): unexpected text after the closing quote in \(line[start...].prefix { !isBlank($0) }); "
                            + "put a blank after it")
                }
                guard line[i] == "\"" else {
                    bare.append(line[i])
                    i = line.index(after: i)
                    continue
                }
                var text = ""
                i = line.index(after: i)
                while true {
                    guard i < line.endIndex else {
                        throw .badInput("\(at): a quoted text is not closed: add the closing \"")
                    }
                    let c = line[i]
                    i = line.index(after: i)
                    if c == "\"" { break }
                    if c == "\\" {
                        guard i < line.endIndex, line[i] == "\"" || line[i] == "\\" else {
                            throw .badInput(
                                "\(at): unknown escape in a quoted text: only \\\" and \\\\ are escapes")
                        }
                        text.append(line[i])
                        i = line.index(after: i)
                        continue
                    }
                    text.append(c)
                }
                quoted = text
            }
            tokens.append(Token(source: String(line[start..<i]), bare: bare, quoted: quoted))
        }
    }
}
