/// A scripted lifecycle: one step per line, at an absolute time since start (SPEC 2.2).
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

    public init(entries: [Entry], fileName: String) {
        self.entries = entries
        self.fileName = fileName
    }

    /// Parses and validates a scenario. Every problem is reported with `fileName:line` before
    /// anything runs: syntax, unknown actions and units, times that go backwards, and steps the
    /// lifecycle does not allow.
    public static func parse(_ text: String, fileName: String) throws(LifelineError) -> Scenario {
        var entries: [Entry] = []
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
            let actionText = words[1...].joined(separator: " ")
            guard let step = Step.all.first(where: { $0.description == actionText }) else {
                let valid = Step.all.map(\.description).joined(separator: ", ")
                throw .badInput("\(at): unknown action '\(actionText)'; the actions are: \(valid)")
            }
            if time < lastTime {
                throw .badInput("\(at): time \(words[0]) goes backwards (the step before is at \(lastTime)s)")
            }
            do {
                _ = try lifecycle.apply(step)
            } catch {
                throw .badInput("\(at): invalid transition: \(error)")
            }
            lastTime = time
            entries.append(Entry(time: time, step: step, line: lineNumber))
        }
        return Scenario(entries: entries, fileName: fileName)
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
