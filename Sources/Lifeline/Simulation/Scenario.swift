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

    /// The most bytes a scenario file may hold: 1 MiB, as for plugin.toml. `lifeline simulate`
    /// refuses a larger one before reading past the limit.
    public static let maximumBytes = 1 << 20

    /// The steps, in file order (which is time order).
    public var entries: [Entry]
    /// The file's name as given, for messages.
    public var fileName: String
    /// The network rules (`http` lines), in file order. Their times may go in any order: the
    /// latest rule whose time has come answers a request (see `ScriptedNetwork`).
    public var network: [NetworkRule]
    /// The `expect` lines, in file order: checked when the simulation ends.
    public var expectations: [Expectation]
    /// The other plugins this scenario needs beside its own (`uses NAME[, NAME…]` lines), in file
    /// order: `lifeline test` loads them too.
    public var uses: [String]
    /// The line of each name's first `uses` line, for messages about it.
    public var useLines: [String: Int] = [:]
    /// How eager the system is to run scheduled tasks (`task-policy POLICY` line), unless
    /// `--task-policy` says otherwise.
    public var taskPolicy: TaskPolicy?
    /// The profile this scenario is written for (`profile NAME` line), unless `--profile` says
    /// otherwise; nil: ios13.
    public var profileName: String?
    /// The figures this scenario sets (`limit NAME VALUE` lines), in file order, each over its
    /// profile's and under its flag's (`--budget` for `limit budget`).
    public var limits: [Limit] = []

    /// A `limit NAME VALUE` line.
    public struct Limit: Equatable, Sendable {
        public var figure: Profile.Figure
        public var value: Profile.Figure.Value
        /// 1-based line number in the file.
        public var line: Int
    }

    /// The profile the scenario runs under, before the flags' own figures: the one named `flag`
    /// (`--profile`) when given, else the `profile` line's, else ios13; then its `limit` lines.
    /// `lifeline simulate` and `lifeline test` apply the figure flags over it.
    public func profile(named flag: String? = nil) throws(LifelineError) -> Profile {
        var profile = try Profile.named(flag ?? profileName ?? Profile.ios13.name)
        for limit in limits { limit.figure.apply(limit.value, to: &profile) }
        return profile
    }

    public init(
        entries: [Entry], fileName: String, network: [NetworkRule] = [], expectations: [Expectation] = [],
        uses: [String] = []
    ) {
        self.entries = entries
        self.fileName = fileName
        self.network = network
        self.expectations = expectations
        self.uses = uses
    }

    /// Whether a step reloads the plugins.
    public var reloads: Bool {
        entries.contains { if case .reload = $0.step { return true } else { return false } }
    }

    /// Parses and validates a scenario. Every problem is reported with `fileName:line` before
    /// anything runs: syntax, unknown actions and units, steps whose time goes backwards, steps the
    /// lifecycle does not allow, and malformed `http` lines.
    ///
    /// Steps go forward in time among themselves. `http` lines may sit anywhere and in any time
    /// order: which one answers a request is decided by their times (latest first, then file
    /// order; see `ScriptedNetwork`), so the file's order of lines only breaks ties.
    ///
    /// `profile NAME` and `limit NAME VALUE` lines (at most one of each NAME) say the figures the
    /// scenario is written for; `profile(named:)` applies them, and the CLI's flags go over them.
    ///
    /// `#` starts a comment anywhere on a line, `http` lines included: a response body cannot hold
    /// a `#`.
    public static func parse(_ text: String, fileName: String) throws(LifelineError) -> Scenario {
        var entries: [Entry] = []
        var network: [NetworkRule] = []
        var expectations: [Expectation] = []
        var uses: [String] = []
        var useLines: [String: Int] = [:]
        var taskPolicy: TaskPolicy?
        var profileName: String?
        var limits: [Limit] = []
        var lifecycle = Lifecycle()
        var lastStepTime = HostTime.zero
        var lineNumber = 0
        // "\r\n" is one Character in Swift, so CRLF files need it named as a separator.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
        // A recording (`lifeline run --record`) copied or cut while it was written may end in
        // half a line: that line is not the run's, and goes.
        if text.hasPrefix(RunRecording.headerStart), !text.hasSuffix("\n"), !lines.isEmpty { lines.removeLast() }
        for rawLine in lines {
            lineNumber += 1
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if words.isEmpty { continue }
            let at = "\(fileName):\(lineNumber)"
            if words[0] == "expect" {
                // The raw line: a quoted string in an expectation may hold a `#`.
                expectations.append(try Expectation.parse(rawLine: Substring(rawLine), line: lineNumber, at: at))
                continue
            }
            if words[0] == "task-policy" {
                guard words.count == 2 else {
                    throw .badInput("\(at): 'task-policy' takes one policy: earliest, manual or delay:DURATION")
                }
                guard taskPolicy == nil else { throw .badInput("\(at): a second 'task-policy' line") }
                do {
                    taskPolicy = try TaskPolicy.parse(String(words[1]), at: at)
                } catch {
                    throw .badInput(error.message)
                }
                continue
            }
            if words[0] == "profile" {
                let names = Profile.all.map(\.name).joined(separator: ", ")
                guard words.count == 2 else {
                    throw .badInput("\(at): 'profile' takes one profile name: \(names)")
                }
                guard profileName == nil else { throw .badInput("\(at): a second 'profile' line") }
                guard Profile.all.contains(where: { $0.name == words[1] }) else {
                    throw .badInput("\(at): unknown profile '\(words[1])'; the profiles are: \(names)")
                }
                profileName = String(words[1])
                continue
            }
            if words[0] == "limit" {
                guard words.count == 3 else {
                    throw .badInput(
                        "\(at): 'limit' takes a figure and its value, as in 'limit budget 10m'; the figures are: "
                            + Profile.Figure.names)
                }
                guard let figure = Profile.Figure(rawValue: String(words[1])) else {
                    throw .badInput(
                        "\(at): unknown figure '\(words[1])'; the figures are: \(Profile.Figure.names)")
                }
                if let first = limits.first(where: { $0.figure == figure }) {
                    throw .badInput("\(at): '\(figure.rawValue)' is set twice; the first is on line \(first.line)")
                }
                let value = try figure.value(String(words[2]), at: at)
                limits.append(Limit(figure: figure, value: value, line: lineNumber))
                continue
            }
            if words[0] == "uses" {
                for name in try parseUses(line[words[0].endIndex...], at: at) {
                    uses.append(name)
                    if useLines[name] == nil { useLines[name] = lineNumber }
                }
                continue
            }
            guard words.count >= 2 else {
                throw .badInput("\(at): expected a time and an action, as in '2s background'")
            }
            let time = try Units.parseDuration(String(words[0]), at: at)
            if words[1] == "http" {
                // The rest of the line, untouched: a body keeps its spaces. No order check: a rule's
                // time says when it takes over, whatever the lines around it.
                let once = words.count > 2 && words[2] == "once"
                let rest = line[(once ? words[2] : words[1]).endIndex...]
                let parsed = try NetworkRule.parse(rest, at: at)
                var rule = NetworkRule(
                    time: time, method: parsed.method, target: parsed.target, results: parsed.results, line: lineNumber)
                rule.once = once
                network.append(rule)
                continue
            }
            let parsed: Step?
            do {
                parsed = try Step.parse(line[words[0].endIndex...])
            } catch {
                throw .badInput("\(at): \(error.message)")
            }
            guard let step = parsed else {
                let actionText = words[1...].joined(separator: " ")
                throw .badInput(
                    "\(at): unknown action '\(actionText)'; the actions are: \(Step.actionList) "
                        + "(and 'http METHOD TARGET -> RESULT' for the network)")
            }
            if time < lastStepTime {
                throw .badInput("\(at): time \(words[0]) goes backwards (the step before is at \(lastStepTime)s)")
            }
            do {
                _ = try lifecycle.apply(step)
            } catch {
                throw .badInput("\(at): invalid transition: \(error)")
            }
            lastStepTime = time
            entries.append(Entry(time: time, step: step, line: lineNumber))
        }
        var scenario = Scenario(
            entries: entries, fileName: fileName, network: network, expectations: expectations, uses: uses)
        scenario.useLines = useLines
        scenario.taskPolicy = taskPolicy
        scenario.profileName = profileName
        scenario.limits = limits
        return scenario
    }

    /// `uses NAME[, NAME…]`: plugin names, separated by commas or blanks.
    private static func parseUses(_ rest: Substring, at: String) throws(LifelineError) -> [String] {
        let names = rest.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
        guard !names.isEmpty else {
            throw .badInput("\(at): 'uses' needs the names of the plugins this scenario needs, as in 'uses heartbeat'")
        }
        return names
    }
}
