import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// Scenario `expect` lines: the grammar, every bad line reported with file:line before anything
// runs, the matching rules against a report, the messages of a failure, and the implicit rules.

/// Parses one expect line as line 3 of t.scenario.
private func expectation(_ line: String) throws(LifelineError) -> Lifeline.Expectation {
    try Lifeline.Expectation.parse(rawLine: Substring(line), line: 3, at: "t.scenario:3")
}

/// The message parsing `line` fails with, or nil when it parses.
private func parseError(_ line: String) -> String? {
    do {
        _ = try expectation(line)
        return nil
    } catch {
        return error.message
    }
}

/// A report with these timeline events (JSON objects without braces) and no termination.
private func report(_ events: [String], termination: String? = nil) throws -> JSONValue {
    let timeline = events.map { "{\($0)}" }.joined(separator: ",")
    let outcome = termination == nil ? "completed" : "terminated"
    return try JSONValue.parse(
        """
        {"lifeline": 2, "profile": "ios13", "outcome": "\(outcome)", "termination": \(termination ?? "null"),
         "plugins": [], "timeline": [\(timeline)]}
        """)
}

/// The save-changes run of the examples, in report v2 form.
private func saveReport() throws -> JSONValue {
    try report([
        #""t": 0, "event": "didFinishLaunching""#,
        #""t": 5, "event": "didEnterBackground""#,
        #""t": 5, "event": "taskBegan", "plugin": "save-changes", "task": 4, "name": "save""#,
        #""t": 5.250, "event": "log", "plugin": "save-changes", "level": "info", "message": "saving 3 edits # now""#,
        #""t": 7, "event": "taskEnded", "plugin": "save-changes", "task": 4, "name": "save", "expired": true"#,
        #""t": 8, "event": "opFinished", "plugin": "sync", "queue": "sync", "op": 1, "name": "queue sync.refresh", "result": "finished""#,
        #""t": 9.5, "event": "opFinished", "plugin": "sync", "queue": "sync", "op": 2, "name": "say \"hi\"", "result": "timedOut""#,
        #""t": 30, "event": "suspended""#,
    ])
}

/// Checks the lines against the report; one result per line (plus implicit ones).
private func check(_ lines: [String], _ report: JSONValue) throws -> [ExpectationResult] {
    let expectations = try lines.enumerated().map { i, line throws(LifelineError) in
        try Lifeline.Expectation.parse(rawLine: Substring(line), line: i + 1, at: "t.scenario:\(i + 1)")
    }
    return Lifeline.Expectation.check(expectations, report: report, fileName: "t.scenario")
}

private func passes(_ line: String, _ report: JSONValue) throws -> Bool {
    try check([line], report).allSatisfy(\.passed)
}

// MARK: - Grammar

@Test func expect_outcomeAndTermination_parse() throws {
    #expect(try expectation("expect outcome completed").kind == .outcome(terminated: false))
    #expect(try expectation("expect   outcome\tterminated  # why").kind == .outcome(terminated: true))
    #expect(try expectation("expect termination watchdog").kind == .termination(.watchdog, fields: []))
    #expect(
        try expectation("expect termination taskLimit plugin=sync").kind
            == .termination(.taskLimit, fields: [.init(name: "plugin", value: .word("sync"))]))
}

@Test func expect_eventLine_parsesFieldsWindowAndTimes() throws {
    let e = try expectation(#"expect taskEnded plugin=save-changes name="queue \"a\" \\ b" between 1s and 2m times 2"#)
    let query = Lifeline.Expectation.EventQuery(
        event: "taskEnded",
        fields: [
            .init(name: "plugin", value: .word("save-changes")), .init(name: "name", value: .quoted(#"queue "a" \ b"#)),
        ],
        window: .between(1000, 120_000))
    #expect(e.kind == .events(query, count: .exactly(2)))
    #expect(e.line == 3)
}

@Test func expect_text_dropsTheCommentOutsideQuotesOnly() throws {
    let e = try expectation(#"  expect   log   contains "a # b"   # the comment "x"  "#)
    #expect(e.text == #"expect log contains "a # b""#)
    #expect(e.kind == .events(.init(event: "log", contains: "a # b"), count: .atLeastOne))
    let f = try expectation("expect no pluginError#trailing")
    #expect(f.text == "expect no pluginError")
    #expect(f.kind == .events(.init(event: "pluginError"), count: .none))
}

@Test func expect_insideAScenario_keepsItsLineAndTheRestStillParses() throws {
    let text = "0s launch\n# note\nexpect taskEnded at 250ms  # c\r\nexpect outcome completed\n5s background\n"
    let scenario = try Scenario.parse(text, fileName: "t.scenario")
    #expect(scenario.expectations.map(\.line) == [3, 4])
    #expect(scenario.expectations.map(\.text) == ["expect taskEnded at 250ms", "expect outcome completed"])
    #expect(scenario.entries.count == 2)
}

struct BadLine: Sendable, CustomTestStringConvertible {
    var line: String
    /// A part of the message that says what was expected.
    var says: String
    var testDescription: String { line }
}

@Test(arguments: [
    BadLine(line: "expect", says: "'expect' needs what to expect"),
    BadLine(line: "expect # only a comment", says: "'expect' needs what to expect"),
    BadLine(line: "expect outcome", says: "write 'completed' or 'terminated'"),
    BadLine(line: "expect outcome done", says: "write 'completed' or 'terminated'"),
    BadLine(line: "expect outcome completed now", says: "unexpected 'now'"),
    BadLine(line: "expect termination", says: "write the kind: watchdog, backgroundTaskTimeout, taskLimit"),
    BadLine(line: "expect termination crash", says: "unknown termination kind 'crash'"),
    BadLine(line: "expect termination watchdog soon", says: "only FIELD=VALUE may follow"),
    BadLine(line: "expect no", says: "after 'expect no' write an event name"),
    BadLine(line: "expect 5s taskEnded", says: "'5s' is not an event name"),
    BadLine(line: #"expect "taskEnded""#, says: "is not an event name"),
    BadLine(line: "expect taskEnded soon", says: "unexpected 'soon' after 'taskEnded'; write FIELD=VALUE"),
    BadLine(line: "expect taskEnded task=", says: "'task=' has no value"),
    BadLine(line: "expect taskEnded =1", says: "is not a field name"),
    BadLine(line: "expect taskEnded task=1 task=2", says: "the field 'task' is given twice"),
    BadLine(line: "expect taskEnded event=x", says: "the event name goes right after 'expect'"),
    BadLine(line: "expect taskEnded at", says: "'at' needs a time"),
    BadLine(line: "expect taskEnded at soon", says: "'soon' is not a time"),
    BadLine(line: "expect taskEnded at 5x", says: "unknown unit"),
    BadLine(line: "expect taskEnded at 1s at 2s", says: "at most one 'at' or 'between'"),
    BadLine(line: "expect taskEnded between 1s", says: "'between 1s' needs 'and TIME'"),
    BadLine(line: "expect taskEnded between 1s or 2s", says: "'between 1s' needs 'and TIME'"),
    BadLine(line: "expect taskEnded between 5s and 2s", says: "goes backwards"),
    BadLine(line: "expect taskEnded times", says: "'times' needs a whole number"),
    BadLine(line: "expect taskEnded times -1", says: "'times' needs a whole number"),
    BadLine(line: "expect taskEnded times two", says: "'times' needs a whole number"),
    BadLine(line: "expect taskEnded times 1 times 2", says: "give 'times' once"),
    BadLine(line: "expect no taskEnded times 2", says: "'expect no' takes no 'times'"),
    BadLine(line: #"expect log contains"#, says: "'contains' needs a text"),
    BadLine(line: #"expect log level=loud"#, says: "unknown log level 'loud'; the levels are: debug, info"),
    BadLine(line: #"expect log contains "open"#, says: "a quoted text is not closed"),
    BadLine(line: #"expect log contains "a \n b""#, says: "unknown escape"),
    BadLine(line: #"expect taskEnded name="a"b"#, says: "unexpected text after the closing quote"),
    BadLine(line: #"expect taskEnded name=x"a""#, says: "quote the whole value"),
    BadLine(line: #"expect taskEnded "save""#, says: "a quoted text goes after FIELD= or 'contains'"),
])
func expect_badLine_isReportedWithFileLineAndWhatWasExpected(_ c: BadLine) throws {
    let message = try #require(parseError(c.line))
    #expect(message.hasPrefix("t.scenario:3: "), "\(message)")
    #expect(message.contains(c.says), "\(message)")
}

@Test func expect_singleQuotes_areRefusedWithTheDoubleQuoteForm() {
    #expect(
        throws: LifelineError.badInput(
            "s.scenario:2: 'name='queue': text goes in double quotes here, as in name=\"queue sync\"; "
                + "a single quote is a plain character")
    ) {
        try Scenario.parse("0s launch\nexpect taskBegan name='queue sync'\n", fileName: "s.scenario")
    }
    // Inside double quotes a single quote is text.
    #expect(throws: Never.self) { try Scenario.parse("expect log contains \"it's\"\n", fileName: "s.scenario") }
}

@Test func expect_badLineInAScenario_isBadInputBeforeAnythingRuns() {
    #expect(throws: LifelineError.badInput("s.scenario:2: after 'expect outcome' write 'completed' or 'terminated'")) {
        try Scenario.parse("0s launch\nexpect outcome maybe\n", fileName: "s.scenario")
    }
    #expect(LifelineError.badInput("").exitCode == 65)
}

// MARK: - Matching

@Test(arguments: [
    // Numbers compare as numbers; t too.
    ("expect taskEnded task=4", true),
    ("expect taskEnded task=4.0", true),
    ("expect taskEnded task=5", false),
    ("expect log t=5.25", true),
    ("expect log t=5.250", true),
    ("expect log t=5.2", false),
    // true/false are booleans, not strings.
    ("expect taskEnded expired=true", true),
    (#"expect taskEnded expired="true""#, false),
    ("expect taskEnded expired=false", false),
    // Bare words and quoted strings match strings.
    ("expect taskEnded plugin=save-changes name=save", true),
    (#"expect opFinished name="queue sync.refresh""#, true),
    (#"expect opFinished name="say \"hi\"" result=timedOut"#, true),
    ("expect opFinished name=queue", false),
    // A field the event does not have never matches.
    ("expect taskBegan expired=false", false),
    ("expect suspended plugin=save-changes", false),
    // Time windows: at to the millisecond, between inclusive.
    ("expect taskEnded at 7s", true),
    ("expect taskEnded at 7000ms", true),
    ("expect taskEnded at 7.001s", false),
    ("expect log at 5250ms", true),
    ("expect taskEnded between 7s and 8s", true),
    ("expect taskEnded between 1s and 7s", true),
    ("expect taskEnded between 7.001s and 1m", false),
    // times N: exactly N.
    ("expect opFinished plugin=sync times 2", true),
    ("expect opFinished plugin=sync times 1", false),
    ("expect opFinished plugin=sync times 3", false),
    ("expect pluginError times 0", true),
    // no: none may match.
    ("expect no pluginError", true),
    ("expect no taskEnded expired=false", true),
    ("expect no taskEnded expired=true", false),
    ("expect no opFinished between 8.5s and 9.5s", false),
    // log lines.
    (#"expect log plugin=save-changes level=info contains "3 edits # now""#, true),
    (#"expect log contains "saved""#, false),
    (#"expect log level=error"#, false),
    // An event name that never appears.
    ("expect taskEnd", false),
])
func expect_matching_followsTheRules(_ line: String, _ passes: Bool) throws {
    let results = try check([line], saveReport())
    #expect(results.count == 1)
    #expect(results.first?.passed == passes, "\(results.first?.message ?? "")")
}

// MARK: - Messages

@Test func expect_failure_restatesTheLineAndShowsTheClosestEventWithWhatDiffers() throws {
    let results = try check(["expect taskEnded plugin=save-changes expired=false at 7s"], saveReport())
    #expect(
        results.first?.message
            == "t.scenario:1: expected taskEnded plugin=save-changes expired=false at 7s, found none; closest: "
            + "t=7 taskEnded plugin=save-changes task=4 name=save expired=true (expired differs)")
}

@Test func expect_nearMisses_areAtMostThreeFewestDifferencesThenNearestInTime() throws {
    let r = try report(
        (1...6).map { #""t": \#($0), "event": "opFinished", "op": \#($0), "result": "\#($0 == 5 ? "failed" : "x")""# })
    let message = try #require(try check(["expect opFinished result=failed at 2s"], r).first?.message)
    // op 5 differs only in time; then ops 2, 1, 3 (one field differs, nearest 2s first).
    #expect(
        message.contains(
            "found none; closest: t=5 opFinished op=5 result=failed (not at 2s); "
                + "t=2 opFinished op=2 result=x (result differs); t=1 opFinished op=1 result=x (result differs, not at 2s)"
        ),
        "\(message)")
    #expect(!message.contains("op=3"))
}

@Test func expect_missingField_andContains_sayWhatIsMissing() throws {
    let a = try #require(
        try check(["expect memoryWarning dropped=true"], report([#""t": 1, "event": "memoryWarning""#])).first)
    #expect(a.message.hasSuffix("(no dropped)"), "\(a.message)")
    let b = try #require(try check([#"expect log contains "saved""#], saveReport()).first)
    #expect(b.message.contains(#"message="saving 3 edits # now" (message does not contain saved)"#), "\(b.message)")
}

@Test func expect_unknownEventName_failsWithTheNearestRealName_evenInANoLine() throws {
    let results = try check(["expect taskEnd plugin=save-changes", "expect no taskExpird"], saveReport())
    #expect(
        results.map(\.message) == [
            "t.scenario:1: expected taskEnd plugin=save-changes, but no report event is named taskEnd "
                + "(did you mean taskEnded?); docs/report.md lists them",
            "t.scenario:2: expected no taskExpird, but no report event is named taskExpird "
                + "(did you mean taskExpiring?); docs/report.md lists them",
        ])
    #expect(results.map(\.passed) == [false, false])
}

@Test func expect_fieldTheEventNeverHas_fails_evenInANoLine() throws {
    let results = try check(
        ["expect no taskEnded expird=true", "expect taskBegan status=200", #"expect no opFinished contains "x""#],
        saveReport())
    #expect(
        results.map(\.message) == [
            "t.scenario:1: expected no taskEnded expird=true, but taskEnded has no field expird "
                + "(did you mean expired?); its fields are plugin, task, name, expired",
            "t.scenario:2: expected taskBegan status=200, but taskBegan has no field status; "
                + "its fields are plugin, task, name",
            #"t.scenario:3: expected no opFinished contains "x", but opFinished has no message for 'contains' to look in"#,
        ])
    let values = try check(
        ["expect no taskEnded expired=ture", "expect no opFinished result=timedout", "expect opFinished result=done"],
        saveReport())
    #expect(
        values.map(\.message) == [
            "t.scenario:1: expected no taskEnded expired=ture, but taskEnded's expired is never ture "
                + "(did you mean true?); it is one of true, false",
            "t.scenario:2: expected no opFinished result=timedout, but opFinished's result is never timedout "
                + "(did you mean timedOut?); it is one of finished, timedOut, cancelled, expired, failed",
            "t.scenario:3: expected opFinished result=done, but opFinished's result is never done; "
                + "it is one of finished, timedOut, cancelled, expired, failed",
        ])
    // A real field that no event of this run happens to carry is a plain near miss, not a misnaming.
    let real = try #require(try check(["expect no taskEnded expired=false"], saveReport()).first)
    #expect(real.passed, "\(real.message)")
}

@Test func expect_terminationFieldThatDoesNotExist_failsWithTheNearestRealOne() throws {
    let terminated = try report(
        [#""t": 30, "event": "terminated", "kind": "taskLimit", "code": "0xbada5e47""#],
        termination:
            #"{"code": "0xbada5e47", "kind": "taskLimit", "reason": "too many tasks", "plugin": "a", "t": 30, "traceback": null}"#
    )
    let results = try check(["expect termination taskLimit plugn=a", "expect termination taskLimit plugin=a"], terminated)
    #expect(results.map(\.passed) == [false, true])
    #expect(
        results[0].message
            == "t.scenario:1: expected termination taskLimit plugn=a, but a termination has no field plugn "
            + "(did you mean plugin?); its fields are code, kind, reason, plugin, t, traceback")
}

@Test func expect_quotedNumber_saysAQuotedValueMatchesTextOnly() throws {
    let message = try #require(try check([#"expect taskBegan task="4""#], saveReport()).first?.message)
    #expect(
        message.hasSuffix(
            "closest: t=5 taskBegan plugin=save-changes task=4 name=save (task is 4 unquoted; a quoted value matches "
                + "text only)"), "\(message)")
}

@Test func expect_realEventThatDidNotHappen_listsTheEventsThatDid() throws {
    let message = try #require(try check(["expect taskExpiring"], saveReport()).first?.message)
    #expect(
        message
            == "t.scenario:1: expected taskExpiring, found no taskExpiring event at all; the events in this report are: "
            + "didEnterBackground, didFinishLaunching, log, opFinished, suspended, taskBegan, taskEnded")
}

@Test func expect_tooMany_listsTheMatches() throws {
    let message = try #require(try check(["expect opFinished times 1"], saveReport()).first?.message)
    #expect(
        message.hasSuffix(
            #"found 2: t=8 opFinished plugin=sync queue=sync op=1 name="queue sync.refresh" result=finished; "#
                + #"t=9.5 opFinished plugin=sync queue=sync op=2 name="say \"hi\"" result=timedOut"#), "\(message)")
    let no = try #require(try check(["expect no taskBegan"], saveReport()).first?.message)
    #expect(no == "t.scenario:1: expected no taskBegan, found 1: t=5 taskBegan plugin=save-changes task=4 name=save")
}

@Test func expect_outcomeAndTermination_sayWhatHappened() throws {
    let terminated = try report(
        [#""t": 30, "event": "terminated", "kind": "watchdog", "code": "0x8badf00d""#],
        termination:
            #"{"code": "0x8badf00d", "kind": "watchdog", "reason": "sync blocked 12 s", "plugin": "sync", "t": 30, "traceback": null}"#
    )
    let results = try check(
        [
            "expect outcome completed", "expect termination backgroundTaskTimeout",
            "expect termination watchdog plugin=x",
            "expect termination watchdog plugin=sync",
        ], terminated)
    #expect(results.map(\.passed) == [false, false, false, true])
    #expect(
        results[0].message == "t.scenario:1: expected outcome completed, found terminated (watchdog: sync blocked 12 s)"
    )
    #expect(
        results[1].message
            == "t.scenario:2: expected termination backgroundTaskTimeout, found watchdog: sync blocked 12 s")
    #expect(results[2].message.hasSuffix("found watchdog: sync blocked 12 s (plugin differs)"))
    let completed = try check(["expect termination watchdog", "expect outcome terminated"], saveReport())
    #expect(
        completed.map(\.message) == [
            "t.scenario:1: expected termination watchdog, found none: the run completed",
            "t.scenario:2: expected outcome terminated, found completed",
        ])
}

// MARK: - Implicit rules and exit codes

@Test func expect_unexpectedTermination_failsTheRunUnlessALineExpectsIt() throws {
    let terminated = try report(
        [#""t": 30, "event": "terminated", "kind": "taskLimit", "code": "0xbada5e47""#],
        termination:
            #"{"code": "0xbada5e47", "kind": "taskLimit", "reason": "too many tasks", "plugin": "a", "t": 30, "traceback": null}"#
    )
    let results = try check(["expect terminated at 30s"], terminated)
    #expect(results.map(\.passed) == [true])
    let unexpected = try check(["expect no pluginError"], terminated)
    #expect(unexpected.map(\.passed) == [true, false])
    #expect(unexpected[1].message == "t.scenario: unexpected termination: taskLimit too many tasks")
    #expect(unexpected[1].expectation.line == 0)
    #expect(Lifeline.Expectation.exitCode(unexpected, withoutExpectations: 0) == 1)
    for line in ["expect outcome terminated", "expect termination taskLimit"] {
        #expect(try check([line], terminated).map(\.passed) == [true])
    }
}

@Test func expect_unexpectedPluginError_failsTheRunUnlessALineMatchesThatError() throws {
    let r = try report([
        #""t": 1, "event": "pluginError", "plugin": "a", "message": "init.lua:3: boom", "traceback": "x""#,
        #""t": 2, "event": "pluginError", "plugin": "b", "message": "bad", "traceback": "y""#,
    ])
    let results = try check(["expect outcome completed"], r)
    #expect(results.map(\.passed) == [true, false, false])
    #expect(results[1].message == "t.scenario: unexpected pluginError: init.lua:3: boom (from a at t=1)")
    #expect(
        try check(["expect pluginError plugin=a", "expect pluginError plugin=b"], r).map(\.passed) == [true, true])
    // Named, but forbidden: that line fails, and says so once.
    #expect(try check(["expect no pluginError"], r).map(\.passed) == [false])
    // A line about one plugin's errors, or another window, excuses no other error.
    for lines in [
        ["expect pluginError plugin=a"], ["expect no pluginError plugin=a"], ["expect pluginError plugin=c times 0"],
        ["expect no pluginError between 0s and 1s"], [#"expect pluginError contains "boom""#],
    ] {
        let results = try check(lines, r)
        #expect(
            results.last?.message == "t.scenario: unexpected pluginError: bad (from b at t=2)", "\(lines)")
        #expect(Lifeline.Expectation.exitCode(results, withoutExpectations: 0) == 1)
    }
}

@Test func expect_exitCode_isZeroOnlyWhenEveryResultPassed_andTheRecordersWithoutExpectations() throws {
    #expect(Lifeline.Expectation.check([], report: try saveReport(), fileName: "t.scenario").isEmpty)
    #expect(Lifeline.Expectation.exitCode([], withoutExpectations: 1) == 1)
    #expect(Lifeline.Expectation.exitCode([], withoutExpectations: 0) == 0)
    let mixed = try check(["expect outcome completed", "expect taskEnded expired=false"], saveReport())
    #expect(Lifeline.Expectation.exitCode(mixed, withoutExpectations: 0) == 1)
    let good = try check(["expect outcome completed", "expect taskEnded expired=true"], saveReport())
    #expect(Lifeline.Expectation.exitCode(good, withoutExpectations: 1) == 0)
}

@Test func expect_reportEntries_giveLineTextAndPassed_andWhyALineFailed() throws {
    let results = try check(["expect outcome completed  # fine", "expect no taskBegan"], saveReport())
    #expect(
        Lifeline.Expectation.reportEntries(results).serialized()
            == #"[{"line":1,"text":"expect outcome completed","passed":true},"#
            + #"{"line":2,"text":"expect no taskBegan","passed":false,"#
            + #""message":"expected no taskBegan, found 1: t=5 taskBegan plugin=save-changes task=4 name=save"}]"#)
}

/// An unknown termination kind is answered with every kind there is, from the one list of them.
@Test func expect_unknownTerminationKind_listsEveryKind() throws {
    let kinds = Termination.Kind.allCases.map(\.rawValue)
    #expect(kinds.count >= 4)
    for line in ["expect termination crash", "expect termination"] {
        let message = try #require(parseError(line))
        #expect(message.hasSuffix(kinds.joined(separator: ", ")), "\(message)")
    }
    // And each of them is one an expect line accepts.
    for kind in kinds { #expect(parseError("expect termination \(kind)") == nil, "\(kind)") }
}
