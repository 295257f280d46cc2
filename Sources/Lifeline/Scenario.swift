/// A scripted lifecycle: one step per line, at an absolute time since start (SPEC 2.2), and the
/// scripted network: `http` lines that say what plugins' requests get.
public struct Scenario: Equatable, Sendable {
    /// One line of the file.
    public struct Entry: Equatable, Sendable {
        public var time: HostTime
        public var step: Step
        /// 1-based line number in the file, for messages.
        public var line: Int
    }

    /// The steps, in file order (which is time order).
    public var entries: [Entry]
    /// The file's name as given, for messages.
    public var fileName: String
    /// The network rules (`http` lines), in file order (which is time order).
    public var network: [NetworkRule]

    public init(entries: [Entry], fileName: String, network: [NetworkRule] = []) {
        self.entries = entries
        self.fileName = fileName
        self.network = network
    }

    /// Parses and validates a scenario. Every problem is reported with `fileName:line` before
    /// anything runs: syntax, unknown actions and units, times that go backwards (steps and `http`
    /// lines alike), steps the lifecycle does not allow, and malformed `http` lines.
    ///
    /// `#` starts a comment anywhere on a line, `http` lines included: a response body cannot hold
    /// a `#`.
    public static func parse(_ text: String, fileName: String) throws(LifelineError) -> Scenario {
        var entries: [Entry] = []
        var network: [NetworkRule] = []
        var lifecycle = Lifecycle()
        var lastTime = HostTime.zero
        var lineNumber = 0
        // "\r\n" is one Character in Swift, so CRLF files need it named as a separator.
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        for rawLine in lines {
            lineNumber += 1
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if words.isEmpty { continue }
            let at = "\(fileName):\(lineNumber)"
            guard words.count >= 2 else {
                throw .badInput("\(at): expected a time and an action, as in '2s background'")
            }
            let time = try parseTime(String(words[0]), at: at)
            if words[1] == "http" {
                // The rest of the line, untouched: a body keeps its spaces.
                let rest = line[words[1].endIndex...]
                let result = try NetworkRule.parse(rest, at: at)
                if time < lastTime {
                    throw .badInput("\(at): time \(words[0]) goes backwards (the line before is at \(lastTime)s)")
                }
                lastTime = time
                network.append(
                    NetworkRule(time: time, method: result.method, target: result.target, result: result.result,
                        line: lineNumber))
                continue
            }
            let actionText = words[1...].joined(separator: " ")
            guard let step = Step.all.first(where: { $0.description == actionText }) else {
                let valid = Step.all.map(\.description).joined(separator: ", ")
                throw .badInput(
                    "\(at): unknown action '\(actionText)'; the actions are: \(valid) "
                        + "(and 'http METHOD TARGET -> RESULT' for the network)")
            }
            if time < lastTime {
                throw .badInput("\(at): time \(words[0]) goes backwards (the line before is at \(lastTime)s)")
            }
            do {
                _ = try lifecycle.apply(step)
            } catch {
                throw .badInput("\(at): invalid transition: \(error)")
            }
            lastTime = time
            entries.append(Entry(time: time, step: step, line: lineNumber))
        }
        return Scenario(entries: entries, fileName: fileName, network: network)
    }

    /// The latest time a scenario can name: 100 years, well inside what `HostTime` holds.
    static let maximumSeconds: Double = 100 * 365 * 24 * 3600

    /// Parses `1.5s`, `250ms`, `2m`, `1h`.
    public static func parseTime(_ text: String, at: String) throws(LifelineError) -> HostTime {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            // "5ms" ends in "s" too; only accept a suffix when what precedes it is a number.
            guard let value = Double(number), value.isFinite, value >= 0,
                number.allSatisfy({ $0.isNumber || $0 == "." })
            else { continue }
            guard value * scale <= maximumSeconds else {
                throw .badInput("\(at): '\(text)' is too far: times go up to 100 years")
            }
            return HostTime.seconds(value * scale)
        }
        if let last = text.last, last.isLetter, text.contains(where: { $0.isNumber }) {
            let unit = String(text.drop(while: { $0.isNumber || $0 == "." }))
            throw .badInput("\(at): unknown unit '\(unit)' in '\(text)'; use ms, s, m or h")
        }
        throw .badInput("\(at): '\(text)' is not a time; write a number and a unit: 250ms, 1.5s, 2m, 1h")
    }
}

/// One `http` line of a scenario: what the scripted network does with the requests it matches,
/// from `time` on (SPEC 2.2).
///
/// ```
/// 0s   http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
/// 0s   http * api.example.com/* -> hang
/// 30s  http * * -> refuse
/// ```
///
/// The form is `TIME http METHOD TARGET -> RESULT`:
/// - METHOD: an HTTP method name (any case; kept uppercased), or `*` for any method.
/// - TARGET: `*` for any URL, or `HOST[:PORT]/PATH` without the scheme, where `*` matches any run
///   of characters. Without a port it matches any port. The path is as sent (percent-encoded) and
///   includes the query.
/// - RESULT: `STATUS [BODY] [in DURATION]` (STATUS 100–599; BODY is the rest of the line and may
///   hold spaces, but not `#`, which starts a comment; a last `in DURATION` is the delay),
///   `STATUS size=SIZE [rate=SIZE/s] [in DURATION]` (a body of SIZE zero bytes at that rate, for
///   background transfers),
///   `hang` (no answer ever: the request's timeout or its task's expiration ends it), or
///   `refuse [in DURATION]` (connection refused).
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
    }

    /// When the rule takes effect: requests sent from then on.
    public var time: HostTime
    /// The method it matches, uppercased; nil for any method (`*`).
    public var method: String?
    /// The URL pattern: `*`, or `HOST[:PORT]/PATH` with `*` wildcards (the host lowercased).
    public var target: String
    public var result: Result
    /// 1-based line number in the file, for messages.
    public var line: Int

    public init(time: HostTime, method: String?, target: String, result: Result, line: Int) {
        self.time = time
        self.method = method
        self.target = target
        self.result = result
        self.line = line
    }

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
    static let results = "write a status ('200 [BODY] [in 300ms]'), 'hang' or 'refuse [in 1s]'"

    /// Parses what follows `http` on a scenario line (comment already removed). `at` is `file:line`.
    static func parse(
        _ text: Substring, at: String
    ) throws(LifelineError) -> (method: String?, target: String, result: Result) {
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
        return (method, target, try parseResult(rest, at: at))
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
            throw .badInput("\(at): the result is missing after '->'; \(results)")
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
                throw .badInput("\(at): unknown result '\(first)'; \(results)")
            }
            guard first.allSatisfy({ $0.isASCII && $0.isNumber }), let status = Int(first), (100...599).contains(status)
            else {
                throw .badInput("\(at): '\(first)' is not an HTTP status; write a number from 100 to 599")
            }
            // BODY is the rest, with its inner spaces; a last `in DURATION` is the delay.
            let bodyText = trimmed(rest)
            let words = bodyText.split(whereSeparator: isBlank)
            if words.last == "in" {
                throw .badInput("\(at): 'in' at the end of the line needs a duration, as in 'in 300ms'")
            }
            var body = bodyText
            var delay = 0.0
            if words.count >= 2, words[words.count - 2] == "in" {
                delay = try parseDelay(words[words.count - 1], at: at)
                body = trimmed(bodyText[..<words[words.count - 2].startIndex])
            }
            if let stream = try parseStream(body, status: status, delay: delay, at: at) { return stream }
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

    private static func parseBytes(_ text: Substring, what: String, at: String) throws(LifelineError) -> Int64 {
        do throws(PluginManifest.ByteCountError) {
            let bytes = try PluginManifest.byteCount(text)
            guard what == "size" || bytes > 0 else { throw .notASize }
            return Int64(bytes)
        } catch {
            throw .badInput(
                "\(at): '\(text)' is not a \(what); write a whole number with an optional unit (B, KB, MB, GB, KiB, "
                    + "MiB, GiB), as in 'size=50MB rate=2MB/s'")
        }
    }

    private static func parseDelay(_ word: Substring, at: String) throws(LifelineError) -> Double {
        try Scenario.parseTime(String(word), at: "\(at): bad delay after 'in'").seconds
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
