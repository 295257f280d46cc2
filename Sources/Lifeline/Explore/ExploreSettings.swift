/// The kinds of step `lifeline explore` draws from, by the names an `explore.scenario`'s
/// `steps` line uses: each is the first word of the scenario action. `launch` draws both forms,
/// in the foreground and in the background.
public enum ExploreStepKind: String, CaseIterable, Sendable {
    case launch, background, foreground, resign, activate, terminate, kill
    case forceQuit = "force-quit"
    case memoryWarning = "memory-warning"
    case fetch, push
    case runTasks = "run-tasks"
    case charging, network

    /// Every kind's name, for messages.
    public static let names = allCases.map(\.rawValue).joined(separator: ", ")
}

/// What a plugin's optional `explore.scenario` says: the steps every run starts with, the `http`
/// lines that answer before any drawn answer, the `expect` lines that must hold in every run, the
/// other lines a scenario may hold (`uses`, `task-policy`, …), and `steps KIND[, KIND…]`, the
/// kinds of step to draw from.
public struct ExploreSettings: Sendable {
    /// The file's name as given, for messages; every run's scenario carries it.
    public var fileName: String
    /// The file's text with its `steps` lines blanked (so every other line keeps its number): the
    /// start of every run's scenario.
    public var text: String
    /// The file, parsed as a scenario.
    public var scenario: Scenario
    /// The kinds of step runs draw from, in `ExploreStepKind` order.
    public var kinds: [ExploreStepKind]

    /// No file: every kind of step, no prefix, no invariant beyond the host's own rules.
    public init(fileName: String) {
        self.fileName = fileName
        text = ""
        scenario = Scenario(entries: [], fileName: fileName)
        kinds = ExploreStepKind.allCases
    }

    /// Reads an `explore.scenario`. Throws a bad-input error (65) with `file:line` for a line a
    /// scenario would refuse, an unknown kind in a `steps` line, a second `steps` line, and an
    /// `expect` line with a time (`at`, `between`): the runs' times vary, so no such line can
    /// hold in every run.
    public init(text: String, fileName: String) throws(LifelineError) {
        self.fileName = fileName
        var kinds: [ExploreStepKind]?
        var lines: [Substring] = []
        var number = 0
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            let code = line.prefix { $0 != "#" }
            let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "," })
            guard words.first == "steps" else {
                lines.append(line)
                continue
            }
            let at = "\(fileName):\(number)"
            guard kinds == nil else { throw .badInput("\(at): a second 'steps' line; name every kind in one") }
            guard words.count > 1 else {
                throw .badInput("\(at): 'steps' needs the kinds of step to draw from, as in 'steps launch, background, fetch'")
            }
            var chosen: Set<ExploreStepKind> = []
            for word in words.dropFirst() {
                guard let kind = ExploreStepKind(rawValue: String(word)) else {
                    throw .badInput("\(at): unknown kind of step '\(word)'; the kinds are: \(ExploreStepKind.names)")
                }
                chosen.insert(kind)
            }
            kinds = ExploreStepKind.allCases.filter(chosen.contains)
            lines.append("")
        }
        self.text = lines.joined(separator: "\n")
        scenario = try Scenario.parse(self.text, fileName: fileName)
        self.kinds = kinds ?? ExploreStepKind.allCases
        for expectation in scenario.expectations {
            if case .events(let query, _) = expectation.kind, query.window != nil {
                throw .badInput(
                    "\(fileName):\(expectation.line): an expect line of explore.scenario cannot name a time ('at', "
                        + "'between'): each run has times of its own; say what must hold in every run, as in "
                        + "'expect no taskExpired plugin=NAME'")
            }
        }
    }
}
