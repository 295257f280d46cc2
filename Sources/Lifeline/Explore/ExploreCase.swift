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
            lines += profile.map(Self.lines(naming:)) ?? []
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
            lines.append("0s http * * -> " + answers.map(Self.text(of:)).joined(separator: ", "))
        }
        let start = settings.scenario.entries.last?.time.milliseconds ?? 0
        for (move, t) in zip(moves, times(after: start)) {
            lines.append("\(Self.time(t)) \(move.step)")
        }
        lines.append(contentsOf: expectations ?? [])
        return lines.joined(separator: "\n") + "\n"
    }

    /// `profile` and `limit` lines that give `profile` (nothing for ios13 as it is): its name, and
    /// each figure that differs from that profile's own.
    static func lines(naming profile: Profile) -> [String] {
        guard let base = try? Profile.named(profile.name) else { return [] }
        var lines = profile.name == Profile.ios13.name ? [] : ["profile \(profile.name)"]
        for figure in Profile.Figure.allCases {
            if let seconds = figure.seconds {
                if profile[keyPath: seconds] != base[keyPath: seconds] {
                    lines.append("limit \(figure.rawValue) \(profile[keyPath: seconds])")
                }
            } else if profile.taskLimit != base.taskLimit {
                lines.append("limit \(figure.rawValue) \(profile.taskLimit)")
            }
        }
        return lines
    }

    /// A time in milliseconds as a scenario writes it: `0s`, `12s`, `1.5s`, `250ms`.
    package static func time(_ ms: Int64) -> String {
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        if ms < 1000 { return "\(ms)ms" }
        let fraction = String(ms % 1000)
        let padded = String(repeating: "0", count: 3 - fraction.count) + fraction
        return "\(ms / 1000).\(padded.reversed().drop { $0 == "0" }.reversed().map(String.init).joined())s"
    }

    /// A drawn answer as an `http` line writes it.
    static func text(of result: NetworkRule.Result) -> String {
        func after(_ seconds: Double) -> String {
            seconds > 0 ? " in \(time(Int64((seconds * 1000).rounded())))" : ""
        }
        switch result {
        case .respond(let status, let body, let delay): return "\(status)" + (body.isEmpty ? "" : " \(body)") + after(delay)
        case .hang: return "hang"
        case .refuse(let delay): return "refuse" + after(delay)
        case .stream(let status, let size, let rate, let delay):
            return "\(status) size=\(size)B" + (rate.map { " rate=\(Int64($0))B/s" } ?? "") + after(delay)
        case .recorded(let status, let headers, let file, let delay):
            let words = (file.map { ["body=\($0)"] } ?? [])
                + headers.map { "header=\($0.name):\(NetworkRule.encodeHeaderValue($0.value))" }
            return ([String(status)] + words).joined(separator: " ") + after(delay)
        }
    }
}
