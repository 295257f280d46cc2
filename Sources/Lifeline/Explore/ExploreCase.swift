/// One generated run of `lifeline explore`: the steps after the `explore.scenario`'s own, each
/// with the wait before it, and the answers the drawn `http * * ->` line gives the plugin's
/// requests in turn. It becomes an ordinary scenario (`scenarioText`), which is what runs and
/// what is written: the file is the run.
public struct ExploreCase: Equatable, Sendable {
    public struct Move: Equatable, Sendable {
        /// Milliseconds after the step before (for the first, after the prefix's last step, or 0).
        public var wait: Int64
        public var step: Step

        public init(wait: Int64, step: Step) {
            self.wait = wait
            self.step = step
        }
    }

    public var moves: [Move]
    /// The drawn answers, one request after another; the last repeats. Empty: no drawn line, so a
    /// request that no `http` line of explore.scenario matches is refused, as in any scenario.
    public var answers: [NetworkRule.Result]

    public init(moves: [Move], answers: [NetworkRule.Result]) {
        self.moves = moves
        self.answers = answers
    }

    /// The plain answer shrinking puts in place of a drawn one.
    public static let plainAnswer = NetworkRule.Result.respond(status: 200, body: "", delay: 0)

    /// The time of each move, in milliseconds from the start, after a prefix that ends at `start`.
    public func times(after start: Int64) -> [Int64] {
        var t = start
        return moves.map {
            t += $0.wait
            return t
        }
    }

    /// The scenario of this run: `settings`' text (its steps are the prefix), then the drawn
    /// `http` line, after every line of the file so that theirs answer first (a tie in time goes
    /// to the earlier line), then the moves, then `expect` lines.
    ///
    /// - Parameter expectations: the expect lines to end with (the written file's); nil: none
    ///   beyond those in `settings`' text.
    /// - Parameter profile: with `expectations`, the profile the runs had: the written file
    ///   names it with `profile` and `limit` lines in place of the settings' own, so that it
    ///   fails under `lifeline simulate` without the flags explore was given.
    public func scenarioText(
        settings: ExploreSettings, header: [String] = [], expectations: [String]? = nil, profile: Profile? = nil
    ) -> String {
        var lines = header
        if let expectations {
            lines += profile.map(ScenarioText.lines(naming:)) ?? []
            // The written file: the settings' lines without their expect lines, which are
            // replaced, and without their profile and limit lines when those are given.
            let replaced: Set<Substring> = profile == nil ? ["expect"] : ["expect", "profile", "limit"]
            for line in settings.text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
                let first = line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).first
                if let first, !replaced.contains(first) { lines.append(String(line)) }
            }
        } else if !settings.text.isEmpty {
            lines.append(settings.text)
        }
        if !answers.isEmpty {
            lines.append("0s http * * -> " + answers.map(ScenarioText.text(of:)).joined(separator: ", "))
        }
        let start = settings.scenario.entries.last?.time.milliseconds ?? 0
        for (move, t) in zip(moves, times(after: start)) {
            lines.append("\(ScenarioText.time(t)) \(move.step)")
        }
        lines.append(contentsOf: expectations ?? [])
        return lines.joined(separator: "\n") + "\n"
    }

}
