import Foundation

/// One `http` line of a scenario: what the scripted network does with the requests it matches,
/// from `time` on, until a later line that matches them takes over (SPEC 2.2).
///
/// ```
/// 0s   http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
/// 0s   http GET api.example.com/feed -> 503, 503, 200 {"items": []}
/// 30s  http * * -> refuse
/// ```
///
/// The form is `TIME http METHOD TARGET -> RESULT[, RESULT…]`:
/// - METHOD: an HTTP method name (any case; kept uppercased), or `*` for any method.
/// - TARGET: `*` for any URL, or `HOST[:PORT]/PATH` without the scheme, where `*` matches any run
///   of characters. Without a port it matches any port. The path is as sent (percent-encoded) and
///   includes the query.
/// - RESULT: `STATUS [BODY] [in DURATION]` (STATUS 100–599; BODY is the rest of the answer and may
///   hold spaces, but not `#`, which starts a comment; a last `in DURATION` is the delay),
///   `STATUS size=SIZE [rate=SIZE/s] [in DURATION]` (a body of SIZE zero bytes at that rate, for
///   background transfers),
///   `hang` (no answer ever: the request's timeout or its task's expiration ends it), or
///   `refuse [in DURATION]` (connection refused).
/// - `STATUS body=PATH [header=NAME:VALUE]… [in DURATION]`: the answer `lifeline run --record`
///   writes. The body is the file at PATH (relative to the scenario's folder), and each header is
///   given with its value percent-encoded (`%20` a space, `%2C` a comma, `%23` a `#`).
/// - `TIME http once METHOD TARGET -> RESULT`: a recorded answer, given once. Such lines answer
///   before every other: the matching requests take them in file order, whatever their time, as a
///   cassette plays its exchanges back; once each is used, the other lines decide.
/// - Several RESULTs separated by commas are a sequence: the line's first request gets the first,
///   the second the second, and every request after the last gets the last. A comma separates
///   answers when it stands outside a JSON body's brackets and strings and a result (a status,
///   `hang` or `refuse`) follows it; any other comma is part of the body, so `200 yes, please`
///   is one answer.
public struct NetworkRule: Equatable, Sendable {
    /// What a matching request gets.
    public enum Result: Equatable, Sendable {
        /// A response with this status and body, `delay` seconds after the request is sent.
        case respond(status: Int, body: String, delay: Double)
        /// No answer, ever.
        case hang
        /// The connection is refused, `delay` seconds after the request is sent.
        case refuse(delay: Double)
        /// `STATUS size=N [rate=R/s]`: a body of `size` zero bytes that starts `delay` seconds
        /// after the request and arrives at `rate` bytes a second (all at once without a rate).
        /// Transfers write it to their file as it arrives; a plain request gets it in one piece.
        case stream(status: Int, size: Int64, rate: Double?, delay: Double)
        /// `STATUS body=PATH header=NAME:VALUE…`: an answer as a live run recorded it, its body in
        /// a file (nil: empty), its headers as they came.
        case recorded(status: Int, headers: [RecordedHeader], bodyFile: String?, delay: Double)
    }

    /// A header of a recorded answer.
    public struct RecordedHeader: Equatable, Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// When the rule takes effect: requests sent from then on, until a later matching rule's time.
    public var time: HostTime
    /// The method it matches, uppercased; nil for any method (`*`).
    public var method: String?
    /// The URL pattern: `*`, or `HOST[:PORT]/PATH` with `*` wildcards (the host lowercased).
    public var target: String
    /// The answers, in order: the n-th request this line decides gets the n-th, and every request
    /// past the end gets the last. Never empty.
    public var results: [Result]
    /// 1-based line number in the file, for messages.
    public var line: Int
    /// `http once`: it answers one request, before every line that is not `once` (a recording).
    public var once = false

    /// A rule with a sequence of answers; `results` must not be empty.
    public init(time: HostTime, method: String?, target: String, results: [Result], line: Int) {
        precondition(!results.isEmpty, "a network rule needs at least one answer")
        self.time = time
        self.method = method
        self.target = target
        self.results = results
        self.line = line
    }

    /// A rule that gives every request the same answer.
    public init(time: HostTime, method: String?, target: String, result: Result, line: Int) {
        self.init(time: time, method: method, target: target, results: [result], line: line)
    }

    /// The answer to the line's first request: the only answer unless the line gives a sequence.
    public var result: Result { results[0] }

    /// The answer to the request this line decides after `earlier` others: the last answer
    /// repeats once the sequence is used up.
    public func result(after earlier: Int) -> Result { results[min(max(earlier, 0), results.count - 1)] }

    /// Whether the target names a port; a target without one matches any port.
    public var targetHasPort: Bool {
        guard target != "*" else { return false }
        let hostPart = target.prefix(while: { $0 != "/" })
        if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {
            return hostPart[close...].hasPrefix("]:")
        }
        return hostPart.contains(":")
    }

    static let form =
        "write 'TIME http METHOD TARGET -> RESULT', as in '0s http GET 127.0.0.1:8080/* -> 200 {\"ok\": true}'"
    static let resultForms = "write a status ('200 [BODY] [in 300ms]'), 'hang' or 'refuse [in 1s]'"

    /// Parses what follows `http` on a scenario line (comment already removed). `at` is `file:line`.
    static func parse(
        _ text: Substring, at: String
    ) throws(LifelineError) -> (method: String?, target: String, results: [Result]) {
        var rest = text
        guard let methodWord = nextWord(&rest), methodWord != "->" else {
            throw .badInput("\(at): an http line needs a method, a target, '->' and a result; \(form)")
        }
        let method = try parseMethod(methodWord, at: at)
        guard let targetWord = nextWord(&rest), targetWord != "->" else {
            throw .badInput("\(at): the target is missing: write * or HOST[:PORT]/PATH before '->'; \(form)")
        }
        guard let arrow = nextWord(&rest), arrow == "->" else {
            let hint = targetWord.contains("->") ? " (put spaces around it)" : ""
            throw .badInput("\(at): missing '->' between the target and the result\(hint); \(form)")
        }
        let target = try parseTarget(targetWord, at: at)
        guard !trimmed(rest).isEmpty else {
            throw .badInput("\(at): the result is missing after '->'; \(resultForms)")
        }
        var results: [Result] = []
        for answer in splitAnswers(rest) {
            guard !trimmed(answer).isEmpty else {
                throw .badInput(
                    "\(at): an answer of the sequence is empty; write a result between commas, as in "
                        + "'-> 503, 503, 200'")
            }
            results.append(try parseResult(answer, at: at))
        }
        return (method, target, results)
    }

    /// The answers of a sequence: `text` cut at each comma that separates two of them.
    ///
    /// A comma separates when it is outside every `{}`/`[]` and every string inside them (a JSON
    /// body's own commas), and what follows it is a result or nothing: a digit, `hang`, `refuse`,
    /// another comma or the end. Any other comma belongs to a text body, as in `200 yes, please`,
    /// which is why the test looks ahead rather than splitting at every comma. An empty answer is
    /// kept, so the caller can name it.
    static func splitAnswers(_ text: Substring) -> [Substring] {
        var answers: [Substring] = []
        var start = text.startIndex
        var depth = 0
        var inString = false
        var escaped = false
        var index = text.startIndex
        while index < text.endIndex {
            let c = text[index]
            if inString {
                if escaped {
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == "\"" {
                    inString = false
                }
            } else if c == "\"", depth > 0 {
                inString = true
            } else if c == "{" || c == "[" {
                depth += 1
            } else if c == "}" || c == "]" {
                depth = max(0, depth - 1)
            } else if c == ",", depth == 0, startsAnAnswer(text[text.index(after: index)...]) {
                answers.append(text[start..<index])
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        answers.append(text[start...])
        return answers
    }

    /// Whether `text`, the rest after a comma, begins a result (or is where one is missing).
    private static func startsAnAnswer(_ text: Substring) -> Bool {
        let rest = text.drop(while: isBlank)
        guard let first = rest.first else { return true }
        if first == "," || (first.isASCII && first.isNumber) { return true }
        for word in ["hang", "refuse"] where rest.hasPrefix(word) {
            // The whole word: `hangs, …` is a body's text.
            guard let after = rest.dropFirst(word.count).first else { return true }
            if after == "," || isBlank(after) { return true }
        }
        return false
    }

    private static func parseMethod(_ word: Substring, at: String) throws(LifelineError) -> String? {
        if word == "*" { return nil }
        guard word.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic }) else {
            throw .badInput(
                "\(at): '\(word)' is not an HTTP method; write a name such as GET or POST, or * for any method")
        }
        return word.uppercased()
    }

    private static func parseTarget(_ word: Substring, at: String) throws(LifelineError) -> String {
        if word == "*" { return "*" }
        if let scheme = word.range(of: "://") {
            let bare = word[scheme.upperBound...]
            throw .badInput("\(at): write the target without the scheme: '\(bare)', not '\(word)'")
        }
        guard let slash = word.firstIndex(of: "/") else {
            throw .badInput(
                "\(at): the target '\(word)' has no path; write HOST[:PORT]/PATH, as in '\(word)/*' for every path")
        }
        let hostPart = word[..<slash]
        let path = word[slash...]
        // An IPv6 literal in brackets keeps its colons.
        var host = hostPart
        var port: Substring?
        if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {
            host = hostPart[...close]
            let after = hostPart[hostPart.index(after: close)...]
            if after.hasPrefix(":") {
                port = after.dropFirst()
            } else if !after.isEmpty {
                throw .badInput("\(at): the target '\(word)' is not HOST[:PORT]/PATH")
            }
        } else if let colon = hostPart.firstIndex(of: ":") {
            host = hostPart[..<colon]
            port = hostPart[hostPart.index(after: colon)...]
        }
        guard !host.isEmpty, host != "[]" else {
            throw .badInput("\(at): the target '\(word)' has no host; write HOST[:PORT]/PATH, or */PATH for any host")
        }
        if let port {
            guard port == "*" || (port.allSatisfy(\.isASCII) && Int(port).map { (1...65535).contains($0) } == true)
            else {
                throw .badInput("\(at): '\(port)' in the target '\(word)' is not a port (1-65535, or *)")
            }
            return host.lowercased() + ":" + port + path
        }
        return host.lowercased() + path
    }

    private static func parseResult(_ text: Substring, at: String) throws(LifelineError) -> Result {
        var rest = text
        guard let first = nextWord(&rest) else {
            throw .badInput("\(at): the result is missing after '->'; \(resultForms)")
        }
        switch first {
        case "hang":
            if let word = nextWord(&rest) {
                if word == "in" {
                    throw .badInput(
                        "\(at): 'hang' takes no delay: a hung request never answers; its timeout or its task's "
                            + "expiration ends it")
                }
                throw .badInput("\(at): unexpected '\(word)' after 'hang'")
            }
            return .hang
        case "refuse":
            let words = rest.split(whereSeparator: isBlank)
            if words.isEmpty { return .refuse(delay: 0) }
            guard words.count == 2, words[0] == "in" else {
                throw .badInput("\(at): after 'refuse' write nothing or 'in DURATION', as in 'refuse in 2s'")
            }
            return .refuse(delay: try parseDelay(words[1], at: at))
        default:
            guard first.first?.isASCII == true, first.first?.isNumber == true else {
                throw .badInput("\(at): unknown result '\(first)'; \(resultForms)")
            }
            guard first.allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(first), (100...599).contains(status)
            else {
                throw .badInput("\(at): '\(first)' is not an HTTP status; write a number from 100 to 599")
            }
            // BODY is the rest, with its inner spaces; a last `in DURATION` is the delay.
            let bodyText = trimmed(rest)
            let words = bodyText.split(whereSeparator: isBlank)
            if words.last == "in" {
                throw .badInput("\(at): 'in' at the end of an answer needs a duration, as in 'in 300ms'")
            }
            var body = bodyText
            var delay = 0.0
            if words.count >= 2, words[words.count - 2] == "in" {
                delay = try parseDelay(words[words.count - 1], at: at)
                body = trimmed(bodyText[..<words[words.count - 2].startIndex])
            }
            if let stream = try parseStream(body, status: status, delay: delay, at: at) { return stream }
            if let recorded = try parseRecorded(body, status: status, delay: delay, at: at) { return recorded }
            return .respond(status: status, body: String(body), delay: delay)
        }
    }

    /// `size=50MB [rate=2MB/s]` in place of a body; nil when the body is not that.
    private static func parseStream(
        _ body: Substring, status: Int, delay: Double, at: String
    ) throws(LifelineError) -> Result? {
        let words = body.split(whereSeparator: isBlank)
        guard let first = words.first, first.hasPrefix("size=") else { return nil }
        var size: Int64?
        var rate: Double?
        for word in words {
            if word.hasPrefix("size="), size == nil {
                size = try parseBytes(word.dropFirst(5), what: "size", at: at)
            } else if word.hasPrefix("rate="), rate == nil {
                let text = word.dropFirst(5)
                guard text.hasSuffix("/s") else {
                    throw .badInput("\(at): a rate is bytes a second, as in 'rate=2MB/s'")
                }
                rate = Double(try parseBytes(text.dropLast(2), what: "rate", at: at))
            } else {
                throw .badInput(
                    "\(at): unexpected '\(word)' after 'size='; write 'STATUS size=SIZE [rate=SIZE/s] [in DURATION]', "
                        + "as in '200 size=50MB rate=2MB/s'")
            }
        }
        return .stream(status: status, size: size!, rate: rate, delay: delay)
    }

    /// `body=PATH header=NAME:VALUE…` in place of a body; nil when the body is not that.
    private static func parseRecorded(
        _ body: Substring, status: Int, delay: Double, at: String
    ) throws(LifelineError) -> Result? {
        let words = body.split(whereSeparator: isBlank)
        guard let first = words.first, first.hasPrefix("body=") || first.hasPrefix("header=") else { return nil }
        var file: String?
        var headers: [RecordedHeader] = []
        for word in words {
            if word.hasPrefix("body="), file == nil, word.count > 5 {
                // Percent-encoded where the path has a blank, a '#' or a '%' (as a recording writes it).
                let raw = String(word.dropFirst(5))
                file = raw.removingPercentEncoding ?? raw
            } else if word.hasPrefix("header="), let colon = word.firstIndex(of: ":"), colon > word.index(word.startIndex, offsetBy: 7),
                let value = String(word[word.index(after: colon)...]).removingPercentEncoding
            {
                headers.append(RecordedHeader(name: String(word[word.index(word.startIndex, offsetBy: 7)..<colon]), value: value))
            } else {
                throw .badInput(
                    "\(at): unexpected '\(word)' in a recorded answer; write 'STATUS body=PATH [header=NAME:VALUE]… "
                        + "[in DURATION]', as in '200 body=run.scenario.d/1.body header=content-type:text/plain'")
            }
        }
        return .recorded(status: status, headers: headers, bodyFile: file, delay: delay)
    }

    /// A header's value as a recorded answer writes it: percent-encoded where it would end the
    /// word, start a comment or split a sequence, and where it is not plain visible ASCII.
    public static func encodeHeaderValue(_ value: String) -> String {
        var text = ""
        for byte in value.utf8 {
            let c = Character(Unicode.Scalar(byte))
            if byte > 0x20 && byte < 0x7F && c != "%" && c != "," && c != "#" {
                text.append(c)
            } else {
                text += String(format: "%%%02X", byte)
            }
        }
        return text
    }

    private static func parseBytes(_ text: Substring, what: String, at: String) throws(LifelineError) -> Int64 {
        do throws(Units.ByteCountError) {
            let bytes = try Units.parseByteCount(text)
            guard what == "size" || bytes > 0 else { throw .notASize }
            return Int64(bytes)
        } catch {
            throw .badInput(
                "\(at): '\(text)' is not a \(what); write a whole number with an optional unit (B, KB, MB, GB, KiB, "
                    + "MiB, GiB), as in 'size=50MB rate=2MB/s'")
        }
    }

    private static func parseDelay(_ word: Substring, at: String) throws(LifelineError) -> Double {
        try Units.parseDuration(String(word), at: "\(at): bad delay after 'in'").seconds
    }

    private static func isBlank(_ c: Character) -> Bool { c == " " || c == "\t" || c == "\r" }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text.drop(while: isBlank)
        while let last = text.last, isBlank(last) { text = text.dropLast() }
        return text
    }

    /// The next word of `text`, which moves past it; nil at the end.
    private static func nextWord(_ text: inout Substring) -> Substring? {
        text = text.drop(while: isBlank)
        guard !text.isEmpty else { return nil }
        let word = text.prefix(while: { !isBlank($0) })
        text = text[word.endIndex...]
        return word
    }
}
