import Foundation
import Lifeline

/// `expect` lines alone: each line of the input, after `expect `, read by the scenario's parser
/// (the only public way in: `Expectation`'s own parser is internal) and, when they parse,
/// checked against two small reports, one terminated and one that ran to its end.
enum ExpectLines {
    static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        var scenario = ""
        scenario.reserveCapacity(bytes.count + 64)
        // "\r\n" is one Character in Swift: named, so CRLF input splits as the scenario's parser does.
        for line in text(bytes).split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            scenario += "expect "
            scenario += line
            scenario += "\n"
        }
        guard let parsed = try? Scenario.parse(scenario, fileName: "f.scenario") else { return }
        for report in [sampleReport, endedReport] {
            let results = Expectation.check(parsed.expectations, report: report, fileName: "f.scenario")
            // One result per line, in order, then the implicit ones (no unexpected termination
            // or plugin error).
            guard results.count >= parsed.expectations.count,
                zip(results, parsed.expectations).allSatisfy({ $0.expectation == $1 })
            else {
                fatalError("expect: \(parsed.expectations.count) lines gave \(results.count) results, out of order")
            }
            _ = Expectation.reportEntries(results)
        }
    }

    /// A run that ended as planned, with numbers, nested fields and text worth matching.
    static let endedReport: JSONValue = {
        func event(_ t: String, _ name: String, _ fields: [(String, JSONValue)] = []) -> JSONValue {
            .object([("t", .number(t)), ("event", .string(name))] + fields)
        }
        let transfer: [(String, JSONValue)] = [
            ("plugin", .string("p")), ("id", .string("a\u{0}b")), ("kind", .string("download")),
            ("url", .string("http://127.0.0.1:9/x")),
        ]
        return .object([
            ("lifeline", .int(2)), ("outcome", .string("ended")),
            (
                "timeline",
                .array([
                    event("0", "didFinishLaunching"), event("0", "didBecomeActive"),
                    event("0.001", "log", [("plugin", .string("p")), ("level", .string("warning")), ("message", .string("é \"q\" #"))]),
                    event("10", "willResignActive"), event("10", "didEnterBackground"),
                    event("10", "transferStarted", transfer),
                    event("12.5", "transferEnded", transfer + [("state", .string("finished")), ("bytes", .int(1_000_000))]),
                    event("40", "suspended"), event("100", "fetch"),
                    event("100", "fetchCompleted", [("plugin", .string("p")), ("result", .string("newData"))]),
                    event("1e3", "memoryWarning", [("dropped", .bool(true))]),
                    event("86400", "willTerminate"),
                ])
            ),
        ])
    }()
}
