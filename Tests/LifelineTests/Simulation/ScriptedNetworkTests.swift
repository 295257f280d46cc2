import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 2.2: a scenario's `http` lines script the network that simulate's plugins see, in virtual
// time. The parser reports every bad line with file:line; the transport answers from the rules.

// MARK: - Helpers

/// The error parsing `text` as t.scenario fails with, or nil when it parses.
private func parseError(_ text: String) -> LifelineError? {
    do {
        _ = try Scenario.parse(text, fileName: "t.scenario")
        return nil
    } catch {
        return error
    }
}

/// The rules of `text`, parsed as t.scenario.
private func rules(_ text: String) throws -> [NetworkRule] {
    try Scenario.parse(text, fileName: "t.scenario").network
}

/// One request a test plugin sends, `after` seconds after it loads (at 0s).
private struct Send {
    var after: Double = 0
    var request: HTTPRequest
}

/// What a request got, as a line: `0.3 200 {"ok": true}` or `5 timeout: no complete response...`.
private func describe(_ now: Double, _ result: Result<HTTPResponse, HTTPFailure>) -> String {
    switch result {
    case .success(let response): return "\(ReportNumber.seconds(now)) \(response.status) \(response.text)"
    case .failure(let failure): return "\(ReportNumber.seconds(now)) \(failure.kind.rawValue): \(failure.message)"
    }
}

/// A Swift plugin `net`, allowed to reach 127.0.0.1 and api.example.com on any port, that sends
/// `sends` once loaded and appends what each got to `log` (in the order the answers arrive).
private func requester(
    _ sends: [Send], log: Shared<[String]>, responses: Shared<[HTTPResponse]> = Shared([])
) throws -> PluginDescriptor {
    var descriptor = swiftPlugin("net") { context in
        for send in sends {
            let start = {
                _ = context.http(send.request) { result in
                    log.append(describe(context.now, result))
                    if case .success(let response) = result { responses.append(response) }
                }
            }
            if send.after == 0 { start() } else { context.after(send.after, perform: start) }
        }
    }
    descriptor.network = try NetworkPermissions(["127.0.0.1:*", "api.example.com:*"])
    return descriptor
}

/// Runs `scenario` with one `requester` plugin and returns what its requests got, in order.
private func outcomes(_ scenario: String, _ sends: [Send]) throws -> [String] {
    let log = Shared<[String]>([])
    _ = try simulate(scenario, [try requester(sends, log: log)])
    return log.value
}

private func get(_ url: String) -> Send { Send(request: HTTPRequest(url: url)) }

// MARK: - Parsing

@Test func scriptedNetwork_parse_statusWithBodyAndDelay() throws {
    let parsed = try rules(
        "0s launch\n0s   http POST 127.0.0.1:8080/session/end -> 200 {\"success\": true} in 300ms\n")
    #expect(
        parsed == [
            NetworkRule(
                time: .zero, method: "POST", target: "127.0.0.1:8080/session/end",
                result: .respond(status: 200, body: "{\"success\": true}", delay: 0.3), line: 2)
        ])
}

struct RuleCase: Sendable, CustomTestStringConvertible {
    var line: String
    var method: String?
    var target: String
    var result: NetworkRule.Result
    var testDescription: String { line }
}

@Test(arguments: [
    RuleCase(line: "0s http * api.example.com/* -> hang", method: nil, target: "api.example.com/*", result: .hang),
    RuleCase(line: "30s http * * -> refuse", method: nil, target: "*", result: .refuse(delay: 0)),
    RuleCase(line: "0s http GET * -> refuse in 2s", method: "GET", target: "*", result: .refuse(delay: 2)),
    RuleCase(
        line: "0s http get 127.0.0.1/x -> 204", method: "GET", target: "127.0.0.1/x",
        result: .respond(status: 204, body: "", delay: 0)),
    RuleCase(
        line: "0s http PUT 127.0.0.1/x -> 204 in 1.5s", method: "PUT", target: "127.0.0.1/x",
        result: .respond(status: 204, body: "", delay: 1.5)),
    RuleCase(
        line: "0s http GET API.Example.com:443/Path?q=A -> 200 ok", method: "GET",
        target: "api.example.com:443/Path?q=A",
        result: .respond(status: 200, body: "ok", delay: 0)),
    RuleCase(
        line: "0s http GET 127.0.0.1:*/x -> 200 ok", method: "GET", target: "127.0.0.1:*/x",
        result: .respond(status: 200, body: "ok", delay: 0)),
    RuleCase(
        line: "0s http GET [::1]:8080/x -> 200 ok", method: "GET", target: "[::1]:8080/x",
        result: .respond(status: 200, body: "ok", delay: 0)),
    RuleCase(
        line: "0s\thttp  DELETE\t*/items/*   ->   503   try   again  later   in  2m  ", method: "DELETE",
        target: "*/items/*", result: .respond(status: 503, body: "try   again  later", delay: 120)),
    RuleCase(
        line: "0s http GET 127.0.0.1/x -> 200 a -> b in the box", method: "GET", target: "127.0.0.1/x",
        result: .respond(status: 200, body: "a -> b in the box", delay: 0)),
])
func scriptedNetwork_parse_eachForm(_ c: RuleCase) throws {
    let parsed = try rules(c.line)
    #expect(parsed == [NetworkRule(time: parsed.first?.time ?? .zero, method: c.method, target: c.target,
                                   result: c.result, line: 1)])
}

@Test func scriptedNetwork_parse_hashInABody_startsAComment() throws {
    // `#` starts a comment everywhere, http lines included: a body cannot hold one.
    let parsed = try rules("0s http GET 127.0.0.1/x -> 200 {\"tag\": \"#1\"} in 5s")
    #expect(parsed.map(\.result) == [.respond(status: 200, body: "{\"tag\": \"", delay: 0)])
}

@Test func scriptedNetwork_parse_rulesKeepFileOrderBesideSteps() throws {
    let scenario = try Scenario.parse(
        """
        0s   http GET 127.0.0.1/a -> 200 a
        0s   launch
        # a comment
        2s   http * * -> hang
        2s   background
        30s  http * * -> refuse
        """, fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background])
    #expect(scenario.entries.map(\.line) == [2, 5])
    #expect(scenario.network.map(\.line) == [1, 4, 6])
    #expect(scenario.network.map(\.time.seconds) == [0, 2, 30])
    #expect(scenario.network.map(\.result) == [.respond(status: 200, body: "a", delay: 0), .hang, .refuse(delay: 0)])
}

@Test func scriptedNetwork_parse_sizeAndRate_makeAStreamedBody() throws {
    #expect(
        try rules("0s http GET example.org/big.bin -> 200 size=50MB rate=2MB/s").map(\.result) == [
            .stream(status: 200, size: 50_000_000, rate: 2_000_000, delay: 0)
        ])
    #expect(
        try rules("0s http GET example.org/a -> 206 size=1KiB in 2s").map(\.result) == [
            .stream(status: 206, size: 1024, rate: nil, delay: 2)
        ])
    // A body that merely mentions size= later is a body.
    #expect(try rules("0s http GET example.org/a -> 200 ok size=1").map(\.result) == [
        .respond(status: 200, body: "ok size=1", delay: 0)
    ])
}

@Test func scriptedNetwork_parse_scenarioWithoutHttpLines_hasNoRules() throws {
    #expect(try rules("0s launch\n2s background\n").isEmpty)
    #expect(Scenario(entries: [], fileName: "t").network.isEmpty)
}

struct BadRule: Sendable, CustomTestStringConvertible {
    var rule: String
    var message: String
    var testDescription: String { rule }
}

@Test(arguments: [
    BadRule(rule: "http", message: "needs a method, a target, '->' and a result"),
    BadRule(rule: "http GET 127.0.0.1/x 200", message: "missing '->'"),
    BadRule(rule: "http GET 127.0.0.1/x->200", message: "put spaces around it"),
    BadRule(rule: "http G3T 127.0.0.1/x -> 200", message: "'G3T' is not an HTTP method"),
    BadRule(rule: "http -> 200", message: "needs a method"),
    BadRule(rule: "http GET -> 200", message: "the target is missing"),
    BadRule(rule: "http GET 127.0.0.1/x ->", message: "the result is missing"),
    BadRule(rule: "http GET 127.0.0.1/x -> 99", message: "'99' is not an HTTP status"),
    BadRule(rule: "http GET 127.0.0.1/x -> 600", message: "'600' is not an HTTP status"),
    BadRule(rule: "http GET 127.0.0.1/x -> 20x ok", message: "'20x' is not an HTTP status"),
    BadRule(rule: "http GET 127.0.0.1/x -> ok", message: "unknown result 'ok'"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 ok in 5x", message: "bad delay after 'in'"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 ok in soon", message: "bad delay after 'in'"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 ok in", message: "needs a duration"),
    BadRule(rule: "http GET 127.0.0.1/x -> refuse in 5", message: "bad delay after 'in'"),
    BadRule(rule: "http GET 127.0.0.1/x -> refuse soon", message: "after 'refuse' write nothing or 'in DURATION'"),
    BadRule(rule: "http GET 127.0.0.1/x -> hang in 5s", message: "'hang' takes no delay"),
    BadRule(rule: "http GET 127.0.0.1/x -> hang forever", message: "unexpected 'forever' after 'hang'"),
    BadRule(rule: "http GET http://127.0.0.1/x -> 200", message: "without the scheme"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 size=big", message: "'big' is not a size"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 size=5MB rate=2MB", message: "a rate is bytes a second"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 size=5MB rate=0/s", message: "'0' is not a rate"),
    BadRule(rule: "http GET 127.0.0.1/x -> 200 size=5MB fast", message: "unexpected 'fast' after 'size='"),
    BadRule(rule: "http GET 127.0.0.1 -> 200", message: "has no path"),
    BadRule(rule: "http GET /x -> 200", message: "has no host"),
    BadRule(rule: "http GET :80/x -> 200", message: "has no host"),
    BadRule(
        rule: "http GET 127.0.0.1:99999/x -> 200", message: "'99999' in the target '127.0.0.1:99999/x' is not a port"),
    BadRule(rule: "http GET 127.0.0.1:http/x -> 200", message: "is not a port"),
])
func scriptedNetwork_parse_badRule_namesFileLineAndProblem(_ c: BadRule) throws {
    let error = try #require(parseError("0s launch\n# a comment\n1s \(c.rule)\n2s background"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:3: "), "\(error.message)")
    #expect(error.message.contains(c.message), "\(error.message)")
}

@Test func scriptedNetwork_parse_rulesInAnyTimeOrder_besideSteps() throws {
    // Rules are not bound to the steps' order, nor to each other's: their times say when each
    // takes over.
    let scenario = try Scenario.parse(
        "0s launch\n5s background\n3s http * * -> refuse\n1s http * * -> hang\n6s foreground", fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background, .foreground])
    #expect(scenario.network.map(\.line) == [3, 4])
    #expect(scenario.network.map(\.time.seconds) == [3, 1])
}

@Test func scriptedNetwork_parse_stepGoingBackwardsAfterARule_comparesWithTheStepBefore() throws {
    // A rule at 5s does not move the steps' clock: a step at 3s after it is fine...
    _ = try Scenario.parse("0s launch\n5s http * * -> refuse\n3s background", fileName: "t.scenario")
    // ...but a step before the step above it is not.
    let error = try #require(parseError("0s launch\n5s background\n9s http * * -> refuse\n3s foreground"))
    #expect(error.exitCode == 65)
    #expect(error.message == "t.scenario:4: time 3s goes backwards (the step before is at 5s)")
}

@Test func scriptedNetwork_parse_rulesNeedNoLaunch() throws {
    // A rule is not a step: it may come before the app is launched.
    let scenario = try Scenario.parse("0s http * * -> hang\n1s launch", fileName: "t.scenario")
    #expect(scenario.network.count == 1)
    #expect(scenario.entries.map(\.step) == [.launch])
}

// MARK: - Matching

@Test func scriptedNetwork_sameTime_firstMatchingRuleInFileOrderWins() throws {
    let got = try outcomes(
        """
        0s launch
        0s http GET 127.0.0.1:8080/a -> 201 first
        0s http * * -> 500 second
        0s http GET 127.0.0.1:8080/a -> 202 third
        """, [get("http://127.0.0.1:8080/a"), get("http://127.0.0.1:8080/b")])
    #expect(got == ["0 201 first", "0 500 second"])
}

@Test func scriptedNetwork_rulesTakeEffectFromTheirTime() throws {
    let got = try outcomes(
        """
        0s  launch
        0s  http GET 127.0.0.1/a -> 200 a
        10s http * * -> 503 later
        """,
        [
            get("http://127.0.0.1/b"),
            Send(after: 9.999, request: HTTPRequest(url: "http://127.0.0.1/b")),
            Send(after: 10, request: HTTPRequest(url: "http://127.0.0.1/b")),
            Send(after: 11, request: HTTPRequest(url: "http://127.0.0.1/a")),
        ])
    #expect(got.count == 4)
    #expect(got[0].hasPrefix("0 connect: connection refused: no http line"), "\(got[0])")
    #expect(got[1].hasPrefix("9.999 connect: connection refused: no http line"), "\(got[1])")
    #expect(got[2] == "10 503 later")
    #expect(got[3] == "11 503 later", "the later rule takes over from the earlier one")
}

@Test func scriptedNetwork_wildcardMethod_matchesEveryMethod_namedMethodOnlyItself() throws {
    let got = try outcomes(
        """
        0s launch
        0s http post 127.0.0.1/x -> 201 posted
        0s http * 127.0.0.1/y -> 200 any
        """,
        [
            Send(request: HTTPRequest(method: "POST", url: "http://127.0.0.1/x")),
            Send(request: HTTPRequest(method: "GET", url: "http://127.0.0.1/x")),
            Send(request: HTTPRequest(method: "DELETE", url: "http://127.0.0.1/y")),
            Send(request: HTTPRequest(method: "patch", url: "http://127.0.0.1/y")),
        ])
    #expect(got.count == 4)
    #expect(got[0] == "0 201 posted")
    #expect(got[1].hasPrefix("0 connect: connection refused: no http line"), "\(got[1])")
    #expect(got[2] == "0 200 any")
    #expect(got[3] == "0 200 any")
}

@Test func scriptedNetwork_wildcardTarget_matchesAnyRunOfCharacters_queryIncluded() throws {
    let got = try outcomes(
        """
        0s launch
        0s http GET api.example.com/items/* -> 200 item
        0s http GET */search?q=* -> 200 search
        0s http GET *.example.com/* -> 200 sub
        0s http GET * -> 404 rest
        """,
        [
            get("https://api.example.com/items/42?full=1"),
            get("http://127.0.0.1:9000/search?q=swift"),
            get("http://127.0.0.1:9000/search"),
            get("https://API.EXAMPLE.COM/other"),
            get("http://127.0.0.1/other"),
        ])
    #expect(got == ["0 200 item", "0 200 search", "0 404 rest", "0 200 sub", "0 404 rest"])
}

@Test func scriptedNetwork_targetWithoutPort_matchesAnyPort_targetWithPortOnlyThatPort() throws {
    let got = try outcomes(
        """
        0s launch
        0s http GET 127.0.0.1:8080/x -> 200 on 8080
        0s http GET 127.0.0.1:80/y -> 200 on 80
        0s http GET 127.0.0.1/x -> 200 any port
        """,
        [
            get("http://127.0.0.1:8080/x"), get("http://127.0.0.1:9090/x"), get("http://127.0.0.1/x"),
            get("https://127.0.0.1/x"), get("http://127.0.0.1/y"),
        ])
    #expect(got == ["0 200 on 8080", "0 200 any port", "0 200 any port", "0 200 any port", "0 200 on 80"])
}

@Test func scriptedNetwork_noMatchingRule_refusesAtOnce_sayingTheScenarioDecides() throws {
    let got = try outcomes("0s launch\n0s http GET 127.0.0.1/other -> 200\n", [get("http://127.0.0.1:8080/x")])
    #expect(got.count == 1)
    let message = try #require(got.first)
    #expect(message.hasPrefix("0 connect: "), "\(message)")
    #expect(message.contains("no http line in t.scenario matches GET http://127.0.0.1:8080/x"), "\(message)")
    #expect(message.contains("the scenario's http lines decide"), "\(message)")
}

@Test func scriptedNetwork_noRulesAtAll_refusesEveryRequest() throws {
    let got = try outcomes("0s launch\n", [get("http://127.0.0.1:8080/x")])
    #expect(got.count == 1)
    #expect(got.first?.hasPrefix("0 connect: connection refused: no http line") == true, "\(got)")
}

@Test func scriptedNetwork_refuse_namesTheLineThatScriptedIt() throws {
    let got = try outcomes("0s launch\n\n0s http * * -> refuse\n", [get("http://127.0.0.1:8080/x")])
    #expect(got == ["0 connect: connection refused (scripted at t.scenario:3)"])
}

// MARK: - Time

@Test func scriptedNetwork_delays_passInVirtualTime() throws {
    let log = Shared<[String]>([])
    let recorder = try simulate(
        """
        0s launch
        0s http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
        0s http GET 127.0.0.1:8080/slow -> 200 slow in 2m
        0s http * * -> refuse in 2s
        """,
        [
            try requester(
                [
                    Send(request: HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/session/end")),
                    Send(after: 1, request: HTTPRequest(url: "http://127.0.0.1:8080/slow", timeout: 600)),
                    Send(after: 1, request: HTTPRequest(url: "http://127.0.0.1:8080/down")),
                ], log: log)
        ])
    #expect(log.value == [
        "0.3 200 {\"success\": true}", "3 connect: connection refused (scripted at t.scenario:4)", "121 200 slow",
    ])
    #expect(
        lines(recorder, only: ["httpResponse"]) == [
            "0.3 httpResponse plugin=net method=POST url=http://127.0.0.1:8080/session/end status=200",
            "3 httpResponse plugin=net method=GET url=http://127.0.0.1:8080/down error=connect",
            "121 httpResponse plugin=net method=GET url=http://127.0.0.1:8080/slow status=200",
        ])
}

@Test func scriptedNetwork_hang_isEndedByTheRequestTimeout() throws {
    let log = Shared<[String]>([])
    let recorder = try simulate(
        "0s launch\n0s http * api.example.com/* -> hang\n",
        [try requester([Send(request: HTTPRequest(url: "https://api.example.com/poll", timeout: 5))], log: log)])
    #expect(log.value == ["5 timeout: no complete response from https://api.example.com/poll within 5 s"])
    #expect(
        lines(recorder, only: ["httpRequest", "httpResponse"]) == [
            "0 httpRequest plugin=net method=GET url=https://api.example.com/poll",
            "5 httpResponse plugin=net method=GET url=https://api.example.com/poll error=timeout",
        ])
}

@Test func scriptedNetwork_delayLongerThanTimeout_timesOut() throws {
    let got = try outcomes(
        "0s launch\n0s http * * -> 200 late in 30s\n",
        [Send(request: HTTPRequest(url: "http://127.0.0.1/x", timeout: 10))])
    #expect(got == ["10 timeout: no complete response from http://127.0.0.1/x within 10 s"])
}

@Test func scriptedNetwork_cancel_dropsTheScheduledAnswer() throws {
    let executor = MainExecutor(clock: VirtualClock())
    let network = ScriptedNetwork(
        rules: try rules("0s http * * -> 200 ok in 1s"), executor: executor, fileName: "t.scenario")
    let answers = Shared<[String]>([])
    let request = HTTPRequest(url: "http://127.0.0.1/x")
    executor.schedule(at: .zero) {
        _ = network.send(request) { result in answers.append(describe(1, result) + " kept") }
        let cancelled = network.send(request) { result in answers.append(describe(1, result) + " cancelled") }
        executor.schedule(at: .seconds(0.5)) { cancelled.cancel() }
    }
    executor.run(until: .seconds(10), shouldStop: { false })
    #expect(answers.value == ["1 200 ok kept"])
}

@Test func scriptedNetwork_pluginCancellingAWait_getsNoAnswer_andTheReportSaysCancelled() throws {
    let log = Shared<[String]>([])
    var plugin = swiftPlugin("net") { context in
        let id = context.http(HTTPRequest(url: "http://127.0.0.1/x")) { result in
            log.append(describe(context.now, result))
        }
        context.after(0.5) { context.cancelWait(id, recording: .cancelled) }
    }
    plugin.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate("0s launch\n0s http * * -> 200 ok in 1s\n", [plugin])
    #expect(log.value.isEmpty)
    #expect(
        lines(recorder, only: ["httpResponse"]) == [
            "0.5 httpResponse plugin=net method=GET url=http://127.0.0.1/x error=cancelled"
        ])
}

// MARK: - Responses

@Test func scriptedNetwork_response_hasContentTypeFromTheBody() throws {
    let log = Shared<[String]>([])
    let responses = Shared<[HTTPResponse]>([])
    _ = try simulate(
        """
        0s launch
        0s http GET 127.0.0.1/object -> 200 {"a": 1}
        0s http GET 127.0.0.1/array -> 200 [1, 2]
        0s http GET 127.0.0.1/text -> 418 I'm a teapot
        """,
        [
            try requester(
                [get("http://127.0.0.1/object"), get("http://127.0.0.1/array"), get("http://127.0.0.1/text")],
                log: log, responses: responses)
        ])
    let json: HTTPFields = [.contentType: "application/json"]
    let text: HTTPFields = [.contentType: "text/plain"]
    #expect(
        responses.value == [
            HTTPResponse(status: 200, headers: json, body: Array("{\"a\": 1}".utf8)),
            HTTPResponse(status: 200, headers: json, body: Array("[1, 2]".utf8)),
            HTTPResponse(status: 418, headers: text, body: Array("I'm a teapot".utf8)),
        ])
}

@Test func scriptedNetwork_bodyLongerThanTheCap_failsTooLarge_afterTheDelay() throws {
    let log = Shared<[String]>([])
    let recorder = try simulate(
        "0s launch\n0s http * * -> 200 12345 in 1s\n",
        [
            try requester(
                [
                    Send(request: HTTPRequest(url: "http://127.0.0.1/small", maximumBodyBytes: 4)),
                    Send(request: HTTPRequest(url: "http://127.0.0.1/exact", maximumBodyBytes: 5)),
                ], log: log)
        ])
    #expect(log.value.count == 2)
    let first = try #require(log.value.first)
    #expect(first.hasPrefix("1 tooLarge: the body scripted at t.scenario:2 is 5 bytes"), "\(first)")
    #expect(log.value.last == "1 200 12345")
    #expect(
        lines(recorder, only: ["httpResponse"]) == [
            "1 httpResponse plugin=net method=GET url=http://127.0.0.1/small error=tooLarge",
            "1 httpResponse plugin=net method=GET url=http://127.0.0.1/exact status=200",
        ])
}

// MARK: - The report

@Test func scriptedNetwork_timeline_recordsRequestAndResponse() throws {
    let log = Shared<[String]>([])
    let recorder = try simulate(
        """
        0s launch
        0s http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
        0s http * api.example.com/* -> refuse
        """,
        [
            try requester(
                [
                    Send(request: HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/session/end")),
                    Send(after: 2, request: HTTPRequest(method: "PUT", url: "https://api.example.com/v1")),
                ], log: log)
        ])
    #expect(
        lines(recorder, only: ["httpRequest", "httpResponse"]) == [
            "0 httpRequest plugin=net method=POST url=http://127.0.0.1:8080/session/end",
            "0.3 httpResponse plugin=net method=POST url=http://127.0.0.1:8080/session/end status=200",
            "2 httpRequest plugin=net method=PUT url=https://api.example.com/v1",
            "2 httpResponse plugin=net method=PUT url=https://api.example.com/v1 error=connect",
        ])
}

@Test func scriptedNetwork_twoRuns_giveByteIdenticalReports() throws {
    let scenario = """
        0s   launch
        0s   http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
        0s   http * api.example.com/* -> hang
        2s   background
        5s   http * * -> refuse in 250ms
        6s   foreground
        """
    func report() throws -> String {
        let log = Shared<[String]>([])
        let sends = [
            Send(request: HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/session/end")),
            Send(request: HTTPRequest(url: "https://api.example.com/feed", timeout: 1.5)),
            Send(after: 1, request: HTTPRequest(url: "http://127.0.0.1:1/nothing")),
            Send(after: 1, request: HTTPRequest(method: "DELETE", url: "http://127.0.0.1:8080/session/end")),
            Send(after: 7, request: HTTPRequest(url: "http://127.0.0.1:8080/later")),
        ]
        let recorder = try simulate(scenario, [try requester(sends, log: log)])
        #expect(log.value.count == 5)
        return recorder.report().serialized(pretty: true)
    }
    let first = try report()
    let second = try report()
    #expect(first == second)
    #expect(first.contains("\"httpResponse\""))
}
