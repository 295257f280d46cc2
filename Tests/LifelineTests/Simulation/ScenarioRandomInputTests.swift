import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The scenario parser meets users' typos first: every line it reads, steps, http lines with
// sequences and compound durations, and expect lines, must give a scenario or a clear error,
// never a trap. Fuzz/ runs the same parser under libFuzzer for longer; this is the quick,
// deterministic pass that every test run makes, seeded so that a failure names its input.

extension SplitMix64 {
    /// One of `items`, chosen by the next number.
    fileprivate mutating func pick<T>(_ items: [T]) -> T { items[Int(next() % UInt64(items.count))] }
}

private let pieces = [
    "0s", "5m10s", "1h30m", "2s500ms", "1.5s", "10s5m", "5m10", "-1s", "1e3s", "nan", "inf", "99999999h", "",
    "launch", "background", "foreground", "terminate", "kill", "force-quit", "memory-warning", "launch background",
    "http", "GET", "*", "127.0.0.1:8080/*", "[::1]:0/x", "->", "200", "503,", ", 200", "hang", "refuse", "in", "size=5MB",
    "rate=1MB/s", "{\"a\": [1, 2]}", "[", "}", "\"", "\\\"", "#", "expect", "no", "outcome", "completed", "terminated",
    "termination", "watchdog", "taskEnded", "plugin=p", "name=\"x y\"", "expired=false", "task=1.5", "at", "between",
    "and", "times", "3", "-2", "log", "level=info", "contains", "\"text", "uses", "heartbeat,", "é", "\t", "\r",
]

@Test(arguments: 0..<4)
func scenarioParser_randomLines_giveAScenarioOrAnError_neverATrap(_ seed: Int) {
    var random = SplitMix64(seed: UInt64(seed) &* 7919 &+ 1)
    for _ in 0..<2_000 {
        var lines: [String] = []
        for _ in 0..<Int(random.next() % 6 + 1) {
            lines.append((0..<Int(random.next() % 9 + 1)).map { _ in random.pick(pieces) }.joined(separator: " "))
        }
        let text = lines.joined(separator: "\n")
        do {
            let scenario = try Scenario.parse(text, fileName: "r.scenario")
            // What parses must also check against a report without trapping.
            _ = Lifeline.Expectation.check(
                scenario.expectations, report: .object([("timeline", .array([]))]), fileName: "r.scenario")
        } catch {
            #expect(error.message.hasPrefix("r.scenario:"), "\(error.message) for:\n\(text)")
        }
    }
}
