import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The near misses of a failed `expect` line: ranked by what matches, names first, so the event a
// line meant comes before events that are only alike in their other fields.

/// A report with these timeline events (JSON objects without braces).
private func report(_ events: [String]) throws -> JSONValue {
    try JSONValue.parse(
        """
        {"lifeline": 2, "profile": "ios13", "outcome": "completed", "termination": null, "plugins": [],
         "timeline": [\(events.map { "{\($0)}" }.joined(separator: ","))]}
        """)
}

/// The message of the one line, checked against `report`.
private func failure(_ line: String, _ report: JSONValue) throws -> String {
    let expectation = try Lifeline.Expectation.parse(rawLine: Substring(line), line: 1, at: "t.scenario:1")
    let results = Lifeline.Expectation.check([expectation], report: report, fileName: "t.scenario")
    let first = try #require(results.first)
    #expect(!first.passed)
    return first.message
}

/// The events listed after `closest:`, each as `t=… EVENT …`, without their reasons.
private func closest(_ message: String) -> [String] {
    guard let range = message.range(of: "; closest: ") else { return [] }
    return message[range.upperBound...].components(separatedBy: "; ").map {
        $0.components(separatedBy: " (").first ?? $0
    }
}

/// An `opFinished` of queue `work`.
private func op(_ t: Double, _ id: Int, _ name: String, _ result: String, plugin: String = "p") -> String {
    #""t": \#(ReportNumber.seconds(t)), "event": "opFinished", "plugin": "\#(plugin)", "queue": "work", "op": \#(id), "name": "\#(name)", "result": "\#(result)""#
}

@Test func nearMisses_theOperationOfTheSameName_comesFirst_beforeUnrelatedOnesThatFinished() throws {
    // Three unrelated operations finished first; "upload" timed out. Each differs in one field.
    let r = try report([
        op(1, 1, "index", "finished"), op(1.5, 2, "thumbnails", "finished"), op(2, 3, "contacts", "finished"),
        op(5, 4, "upload", "timedOut"), op(6, 5, "cleanup", "finished"),
    ])
    let message = try failure("expect opFinished name=upload result=finished", r)
    let shown = closest(message)
    #expect(shown.count == 3)
    #expect(
        shown.first == "t=5 opFinished plugin=p queue=work op=4 name=upload result=timedOut", "\(message)")
    #expect(message.contains("name=upload result=timedOut (result differs)"), "\(message)")
}

@Test func nearMisses_nameOutranksPlugin_andPluginOutranksOtherFields() throws {
    let r = try report([
        op(1, 1, "sync", "finished", plugin: "p"),  // plugin right, name wrong
        op(2, 2, "upload", "finished", plugin: "q"),  // name right, plugin wrong
        op(3, 3, "other", "timedOut", plugin: "q"),  // all wrong
        op(4, 4, "upload", "failed", plugin: "q"),  // name right, plugin and result wrong
    ])
    let shown = closest(try failure("expect opFinished plugin=p name=upload result=finished", r))
    #expect(
        shown == [
            "t=2 opFinished plugin=q queue=work op=2 name=upload result=finished",
            "t=4 opFinished plugin=q queue=work op=4 name=upload result=failed",
            "t=1 opFinished plugin=p queue=work op=1 name=sync result=finished",
        ])
}

@Test func nearMisses_amongEquals_theNearestInTimeThenTheEarliest() throws {
    let r = try report([op(1, 1, "upload", "failed"), op(9, 2, "upload", "failed"), op(4, 3, "upload", "failed")])
    let shown = closest(try failure("expect opFinished name=upload result=finished at 5s", r))
    #expect(shown.map { $0.prefix(4) } == ["t=4 ", "t=1 ", "t=9 "])
}

@Test func nearMisses_anEventOfAnotherName_aboutTheSameNamedThing_comesAfterTheRightName() throws {
    // The upload was dropped, never finished: that is worth seeing, after the events of the name asked.
    let r = try report([
        op(1, 1, "index", "finished"),
        #""t": 2, "event": "opDropped", "plugin": "p", "queue": "work", "op": 2, "name": "upload", "existing": 1"#,
        #""t": 3, "event": "opDropped", "plugin": "p", "queue": "work", "op": 3, "name": "index", "existing": 1"#,
    ])
    let message = try failure("expect opFinished name=upload", r)
    #expect(
        message.hasSuffix(
            "closest: t=1 opFinished plugin=p queue=work op=1 name=index result=finished (name differs); "
                + "t=2 opDropped plugin=p queue=work op=2 name=upload existing=1 (is opDropped)"), "\(message)")
    // With no event of the name at all, the message still points at it.
    let none = try failure(
        "expect opFinished name=upload",
        try report([
            #""t": 2, "event": "opDropped", "plugin": "p", "queue": "work", "op": 2, "name": "upload", "existing": 1"#
        ]))
    #expect(
        none
            == "t.scenario:1: expected opFinished name=upload, found no opFinished event at all; the events in this "
            + "report are: opDropped; closest: t=2 opDropped plugin=p queue=work op=2 name=upload existing=1 "
            + "(is opDropped)")
}

@Test func nearMisses_aLineWithoutANameField_listsOnlyEventsOfItsName() throws {
    let r = try report([
        op(1, 1, "upload", "timedOut"),
        #""t": 2, "event": "opDropped", "plugin": "p", "queue": "work", "op": 2, "name": "upload", "existing": 1"#,
    ])
    let shown = closest(try failure("expect opFinished plugin=p result=finished", r))
    #expect(shown == ["t=1 opFinished plugin=p queue=work op=1 name=upload result=timedOut"])
}

@Test func failedLine_theReportKeepsWhy_withoutTheFileName() throws {
    let r = try report([op(5, 4, "upload", "timedOut")])
    let expectation = try Lifeline.Expectation.parse(
        rawLine: "expect opFinished name=upload result=finished", line: 7, at: "dir/t.scenario:7")
    let results = Lifeline.Expectation.check([expectation], report: r, fileName: "dir/t.scenario")
    let entries = Lifeline.Expectation.reportEntries(results)
    let why =
        "expected opFinished name=upload result=finished, found none; closest: "
        + "t=5 opFinished plugin=p queue=work op=4 name=upload result=timedOut (result differs)"
    #expect(results.first?.message == "dir/t.scenario:7: " + why)
    guard case .array(let items) = entries else {
        Issue.record("not an array")
        return
    }
    #expect(items.first?["message"] == .string(why))
    // A line that held has no message: the reports of passing scenarios stay as they were.
    let passed = Lifeline.Expectation.check(
        [try Lifeline.Expectation.parse(rawLine: "expect opFinished name=upload", line: 8, at: "t:8")], report: r,
        fileName: "t")
    #expect(!Lifeline.Expectation.reportEntries(passed).serialized().contains("message"))
}
