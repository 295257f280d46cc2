/// Scenario lines as the tools that write scenarios write them: `lifeline explore`'s kept runs
/// and `lifeline run --record`'s recordings, so both read back as the parser reads them.
public enum ScenarioText {
    /// `profile` and `limit` lines that give `profile` (nothing for ios13 as it is): its name, and
    /// each figure that differs from that profile's own.
    public static func lines(naming profile: Profile) -> [String] {
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
    public static func time(_ ms: Int64) -> String {
        if ms % 1000 == 0 { return "\(ms / 1000)s" }
        if ms < 1000 { return "\(ms)ms" }
        let fraction = String(ms % 1000)
        let padded = String(repeating: "0", count: 3 - fraction.count) + fraction
        return "\(ms / 1000).\(padded.reversed().drop { $0 == "0" }.reversed().map(String.init).joined())s"
    }

    /// An answer as an `http` line writes it.
    public static func text(of result: NetworkRule.Result) -> String {
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
            // The path encoded as a header value is: a recording named "my run.scenario" parses too.
            let words = (file.map { ["body=\(NetworkRule.encodeHeaderValue($0))"] } ?? [])
                + headers.map { "header=\($0.name):\(NetworkRule.encodeHeaderValue($0.value))" }
            return ([String(status)] + words).joined(separator: " ") + after(delay)
        }
    }
}
