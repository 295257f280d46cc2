import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// A scripted network that changes over time: a later `http` line takes over from its time on
// (ties go to file order), `http` lines sit anywhere in the file, and a line may answer with a
// sequence. Everything runs on a virtual clock.

// MARK: - Helpers

/// One request, sent `at` virtual seconds.
private struct Request {
    var at: Double
    var method = "GET"
    var url: String
    var timeout = 30.0
}

private func get(_ url: String, at: Double = 0, timeout: Double = 30) -> Request {
    Request(at: at, url: url, timeout: timeout)
}

/// What each request got, in the order the requests were sent: `"0.3 200 body"` (the time is when
/// the answer came) or `"2 connect: connection refused (scripted at t.scenario:2)"`, or
/// `"no answer"`.
private func answers(_ scenario: String, _ requests: [Request]) throws -> [String] {
    let parsed = try Scenario.parse(scenario, fileName: "t.scenario")
    let executor = MainExecutor(clock: VirtualClock())
    let network = ScriptedNetwork(rules: parsed.network, executor: executor, fileName: "t.scenario")
    let got = Shared<[Int: String]>([:])
    // Answers run as jobs on this executor, on the test's thread.
    let clock = Unchecked(value: executor)
    for (index, request) in requests.enumerated() {
        executor.schedule(at: .seconds(request.at)) {
            let http = HTTPRequest(method: request.method, url: request.url, timeout: request.timeout)
            _ = network.send(http) { result in
                let now = ReportNumber.seconds(clock.value.now)
                got.mutate { got in
                    switch result {
                    case .success(let response): got[index] = "\(now) \(response.status) \(response.text)"
                    case .failure(let failure): got[index] = "\(now) \(failure.kind.rawValue): \(failure.message)"
                    }
                }
            }
        }
    }
    executor.run(until: .seconds(3600), shouldStop: { false })
    return requests.indices.map { got.value[$0] ?? "no answer" }
}

// MARK: - Takeover

@Test func networkOverTime_laterLine_takesOverFromItsTime() throws {
    // The example of the task: the server goes down at 30 s.
    let got = try answers(
        """
        0s  http GET api.example.com/* -> 200 ok
        30s http * api.example.com/* -> refuse
        """,
        [
            get("https://api.example.com/feed"), get("https://api.example.com/feed", at: 29.999),
            get("https://api.example.com/feed", at: 30), get("https://api.example.com/feed", at: 90),
        ])
    #expect(
        got == [
            "0 200 ok", "29.999 200 ok", "30 connect: connection refused (scripted at t.scenario:2)",
            "90 connect: connection refused (scripted at t.scenario:2)",
        ])
}

@Test func networkOverTime_laterLine_takesOverOnlyWhatItMatches() throws {
    let got = try answers(
        """
        0s  http * api.example.com/* -> 200 up
        10s http GET api.example.com/feed -> 503 busy
        20s http * api.example.com/* -> 200 back
        """,
        [
            get("https://api.example.com/feed", at: 5), get("https://api.example.com/feed", at: 15),
            get("https://api.example.com/other", at: 15), get("https://api.example.com/feed", at: 25),
        ])
    #expect(got == ["5 200 up", "15 503 busy", "15 200 up", "25 200 back"])
}

@Test func networkOverTime_sameTime_firstLineInTheFileWins_catchAllBelowASpecificLine() throws {
    let got = try answers(
        """
        30s http GET api.example.com/health -> 200 still up
        30s http * * -> refuse
        0s  http * * -> 200 normal
        30s http GET api.example.com/* -> 500 never
        """,
        [
            get("https://api.example.com/health", at: 1), get("https://api.example.com/health", at: 31),
            get("https://api.example.com/feed", at: 31),
        ])
    #expect(
        got == ["1 200 normal", "31 200 still up", "31 connect: connection refused (scripted at t.scenario:2)"])
}

@Test func networkOverTime_answerUnderWay_isNotChangedByATakeover() throws {
    // The request is decided when it is sent: its delayed answer still comes after the takeover.
    let got = try answers(
        "0s http * * -> 200 slow in 20s\n10s http * * -> refuse",
        [get("http://127.0.0.1/x", at: 5), get("http://127.0.0.1/x", at: 11)])
    #expect(got == ["25 200 slow", "11 connect: connection refused (scripted at t.scenario:2)"])
}

// MARK: - Order of lines

@Test func networkOverTime_httpLines_mayFollowTheSteps_inAnyTimeOrder() throws {
    let scenario = try Scenario.parse(
        """
        0s   launch
        2s   background
        30s  http * * -> refuse
        0s   http GET 127.0.0.1/* -> 200 a
        10s  foreground
        """, fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background, .foreground])
    #expect(scenario.network.map(\.line) == [3, 4])
    let got = try answers(
        "30s http * * -> refuse\n0s http GET 127.0.0.1/* -> 200 a",
        [get("http://127.0.0.1/x", at: 1), get("http://127.0.0.1/x", at: 30)])
    #expect(got == ["1 200 a", "30 connect: connection refused (scripted at t.scenario:1)"])
}

@Test func networkOverTime_expectAndUsesLines_carryNoTime_beside_httpLines() throws {
    // `uses` and `expect` lines are read as they were; http lines around them need no order.
    let scenario = try Scenario.parse(
        "uses heartbeat\n0s launch\n30s http * * -> refuse\nexpect outcome completed\n0s http * * -> 200\n",
        fileName: "t.scenario")
    #expect(scenario.uses == ["heartbeat"])
    #expect(scenario.expectations.count == 1)
    #expect(scenario.network.map(\.line) == [3, 5])
}

/// The example of docs/async.md ("The network in `simulate`: scripted"), as written there: the
/// steps come after the http lines, and the 30 s line takes over from the others.
@Test func networkOverTime_asyncDocsExample_parsesAndRuns() throws {
    let example = """
        0s   http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
        0s   http GET api.example.com/feed -> 503, 503, 200 {"items": []}
        0s   http * api.example.com/* -> hang
        30s  http * * -> refuse
        0s   launch
        2s   background
        """
    let scenario = try Scenario.parse(example, fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background])
    let got = try answers(
        example,
        [
            Request(at: 2, method: "POST", url: "http://127.0.0.1:8080/session/end"),
            get("https://api.example.com/feed", at: 3), get("https://api.example.com/feed", at: 4),
            get("https://api.example.com/feed", at: 5), get("https://api.example.com/feed", at: 6),
            get("https://api.example.com/poll", at: 7),
            Request(at: 31, method: "POST", url: "http://127.0.0.1:8080/session/end"),
            get("https://api.example.com/feed", at: 31),
        ])
    #expect(
        got == [
            "2.3 200 {\"success\": true}", "3 503 ", "4 503 ", "5 200 {\"items\": []}", "6 200 {\"items\": []}",
            "no answer", "31 connect: connection refused (scripted at t.scenario:4)",
            "31 connect: connection refused (scripted at t.scenario:4)",
        ])
}

// Every scenario block of the docs is simulated by DocExamplesTests (the CLI's tests).

// MARK: - Sequences

@Test func networkOverTime_sequence_givesEachAnswerInTurn_thenRepeatsTheLast() throws {
    let got = try answers(
        "0s http GET 127.0.0.1/x -> 503, 503, 200 ok",
        (0..<5).map { get("http://127.0.0.1/x", at: Double($0)) })
    #expect(got == ["0 503 ", "1 503 ", "2 200 ok", "3 200 ok", "4 200 ok"])
}

@Test func networkOverTime_sequence_ofHangRefuseAndStream() throws {
    let got = try answers(
        "0s http GET 127.0.0.1/x -> hang, refuse in 1s, 200 size=4 rate=2B/s in 1s, 204",
        [
            get("http://127.0.0.1/x", timeout: 5), get("http://127.0.0.1/x", at: 10),
            get("http://127.0.0.1/x", at: 20), get("http://127.0.0.1/x", at: 30), get("http://127.0.0.1/x", at: 40),
        ])
    #expect(
        got == [
            "no answer", "11 connect: connection refused (scripted at t.scenario:1)",
            "23 200 \u{0}\u{0}\u{0}\u{0}", "30 204 ", "40 204 ",
        ])
}

@Test func networkOverTime_sequence_eachLineCountsItsOwnRequests() throws {
    // The takeover's line starts at its own first answer; the first line's count goes on for what
    // only it matches.
    let got = try answers(
        """
        0s  http GET 127.0.0.1/* -> 500 a1, 200 a2
        10s http GET 127.0.0.1/x -> 503 b1, 200 b2
        """,
        [
            get("http://127.0.0.1/x", at: 1), get("http://127.0.0.1/x", at: 11), get("http://127.0.0.1/y", at: 12),
            get("http://127.0.0.1/x", at: 13), get("http://127.0.0.1/y", at: 14),
        ])
    #expect(got == ["1 500 a1", "11 503 b1", "12 200 a2", "13 200 b2", "14 200 a2"])
}

struct SequenceCase: Sendable, CustomTestStringConvertible {
    var result: String
    var expected: [NetworkRule.Result]
    var testDescription: String { result }
}

@Test(arguments: [
    SequenceCase(
        result: "503, 503, 200",
        expected: [
            .respond(status: 503, body: "", delay: 0), .respond(status: 503, body: "", delay: 0),
            .respond(status: 200, body: "", delay: 0),
        ]),
    SequenceCase(
        result: "200 {\"a\": 1, \"b\": 2}, 503",
        expected: [
            .respond(status: 200, body: "{\"a\": 1, \"b\": 2}", delay: 0), .respond(status: 503, body: "", delay: 0),
        ]),
    SequenceCase(
        result: "200 [1, 200, \"x, 503\"] in 1s,503 in 2s",
        expected: [
            .respond(status: 200, body: "[1, 200, \"x, 503\"]", delay: 1), .respond(status: 503, body: "", delay: 2),
        ]),
    SequenceCase(
        result: "200 {\"msg\": \"a \\\" quote, 503\"}, hang",
        expected: [.respond(status: 200, body: "{\"msg\": \"a \\\" quote, 503\"}", delay: 0), .hang]),
    SequenceCase(
        result: "hang, refuse in 1m30s, refuse",
        expected: [.hang, .refuse(delay: 90), .refuse(delay: 0)]),
    SequenceCase(
        result: "200 size=1MB rate=100KB/s in 2s, 503",
        expected: [
            .stream(status: 200, size: 1_000_000, rate: 100_000, delay: 2), .respond(status: 503, body: "", delay: 0),
        ]),
    // A comma that no result follows belongs to a text body.
    SequenceCase(
        result: "200 yes, please, 404 no, thanks",
        expected: [
            .respond(status: 200, body: "yes, please", delay: 0), .respond(status: 404, body: "no, thanks", delay: 0),
        ]),
    SequenceCase(result: "200 hangs, refuses", expected: [.respond(status: 200, body: "hangs, refuses", delay: 0)]),
])
func networkOverTime_parse_sequence(_ c: SequenceCase) throws {
    let rules = try Scenario.parse("0s http GET 127.0.0.1/x -> \(c.result)", fileName: "t.scenario").network
    #expect(rules.map(\.results) == [c.expected])
}

@Test(arguments: [
    ("503, ", "an answer of the sequence is empty"),
    ("503,, 200", "an answer of the sequence is empty"),
    (", 200", "an answer of the sequence is empty"),
    ("503, 50x", "'50x' is not an HTTP status"),
    ("503, hang in 2s", "'hang' takes no delay"),
    ("503, refuse soon", "after 'refuse' write nothing or 'in DURATION'"),
    ("200 ok in, 503", "'in' at the end of an answer needs a duration"),
    ("200 ok in 5m10, 503", "bad delay after 'in': '5m10' ends with a number without a unit"),
])
func networkOverTime_parse_badSequence_namesFileLine(_ result: String, _ message: String) throws {
    do {
        _ = try Scenario.parse("0s launch\n0s http GET 127.0.0.1/x -> \(result)", fileName: "t.scenario")
        Issue.record("'\(result)' parsed")
    } catch {
        #expect(error.exitCode == 65)
        #expect(error.message.hasPrefix("t.scenario:2: "), "\(error.message)")
        #expect(error.message.contains(message), "\(error.message)")
    }
}

// MARK: - Transfers

/// A scripted transfer of example.org/a.bin sent at `at` seconds, resuming from byte 400 with
/// `ifRange` when given; what it ended with.
private func transferResults(
    _ scenario: String, _ attempts: [(at: Double, ifRange: String?)]
) throws -> [TransferAttemptResult?] {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("net-over-time-\(UUID())").path
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let parsed = try Scenario.parse(scenario, fileName: "t.scenario")
    let executor = MainExecutor(clock: VirtualClock())
    let network = ScriptedNetwork(rules: parsed.network, executor: executor, fileName: "t.scenario")
    let results = Shared<[Int: TransferAttemptResult]>([:])
    for (index, attempt) in attempts.enumerated() {
        executor.schedule(at: .seconds(attempt.at)) {
            var headers: HTTPFields = [:]
            var from: Int64 = 0
            if let ifRange = attempt.ifRange {
                headers = [.range: "bytes=400-", .ifRange: ifRange]
                from = 400
            }
            let transfer = TransferAttempt(
                kind: .download, request: HTTPRequest(url: "http://example.org/a.bin", headers: headers), root: root,
                name: "a\(index).bin", id: Int64(index), resumeFrom: from, sha256: nil)
            _ = network.transfer(transfer, report: { _ in }) { result in results.mutate { $0[index] = result } }
        }
    }
    executor.run(until: .seconds(3600), shouldStop: { false })
    return attempts.indices.map { results.value[$0] }
}

/// The status and ETag of a transfer's response, or what else it ended with.
private func summary(_ result: TransferAttemptResult?) -> String {
    switch result {
    case .response(let status, let headers, let bytes)?:
        let etag = headers[.eTag] ?? "-"
        return "\(status) \(etag) \(bytes)"
    case .failed(let failure)?: return "\(failure.kind.rawValue): \(failure.message)"
    case let other?: return "\(other)"
    case nil: return "no answer"
    }
}

@Test func networkOverTime_transfer_laterLineTakesOver_andItsETagEndsTheResume() throws {
    let scenario = """
        0s  http GET example.org/a.bin -> 200 size=1000
        30s http GET example.org/a.bin -> 200 size=1000
        60s http * example.org/* -> refuse
        """
    let got = try transferResults(
        scenario,
        [(10, nil), (11, "\"line-1\""), (40, "\"line-1\""), (41, "\"line-2\""), (61, "\"line-2\"")])
    #expect(
        got.map(summary) == [
            "200 \"line-1\" 1000",
            "206 \"line-1\" 1000",  // the same line serves the URL: the rest only
            "200 \"line-2\" 1000",  // line 2 took over: a new resource, whole again
            "206 \"line-2\" 1000",
            "connect: connection refused (scripted at t.scenario:3)",
        ])
}

@Test func networkOverTime_transfer_eachAttemptIsOneRequestOfTheSequence() throws {
    let got = try transferResults(
        "0s http GET example.org/a.bin -> 503, refuse, 200 size=1000", [(0, nil), (1, nil), (2, nil), (3, nil)])
    #expect(
        got.map(summary) == [
            "503 - 0", "connect: connection refused (scripted at t.scenario:1)", "200 \"line-1\" 1000",
            "200 \"line-1\" 1000",
        ])
}
