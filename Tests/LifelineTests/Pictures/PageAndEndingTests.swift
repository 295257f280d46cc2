import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The HTML page's index and failure reasons, its legend, and how the three pictures draw the
// ways an app ends: a `terminate` (suspended or not) is the ordinary end of an app; a kill, a
// force-quit and a termination by a rule are not.

private typealias F = PictureFixtures

/// A run that goes to the background, suspends, and then ends by the event `end` at 40 s.
private func endedRun(_ end: String) -> RenderedRun {
    let timeline = [
        F.event(0, "didFinishLaunching"), F.event(0, "didBecomeActive"), F.event(1, "willResignActive"),
        F.event(1, "didEnterBackground"),
        F.event(1, "taskBegan", ("plugin", .string("p")), ("task", .int(1)), ("name", .string("save"))),
        F.event(2, "taskEnded", ("plugin", .string("p")), ("task", .int(1)), ("name", .string("save")),
            ("expired", .bool(false))),
        F.event(2, "suspended"), F.event(40, end),
    ]
    return RenderedRun(title: end, report: F.report(timeline, plugins: ["p"]))
}

/// The lane chart's `events` row, without its label.
private func eventsRow(_ run: RenderedRun) -> String {
    let text = LaneChart.text(run, width: 80, colour: false)
    let row = text.split(separator: "\n").first { $0.hasPrefix("events ") }.map(String.init) ?? ""
    return String(row.dropFirst("events".count))
}

/// The run's item classes and vertical lines in the page's data.
private func pageMarks(_ run: RenderedRun) throws -> (items: [String], vlines: [String]) {
    let html = ReportPage.html([run])
    let open = "<script type=\"application/json\" id=\"lifeline-data\">"
    let start = try #require(html.range(of: open)).upperBound
    let end = try #require(html.range(of: "</script>", range: start..<html.endIndex)).lowerBound
    let data = try JSONValue.parse(String(html[start..<end]))
    guard case .array(let runs)? = data["runs"], case .array(let lanes)? = runs.first?["lanes"],
        case .array(let vlines)? = runs.first?["vlines"]
    else { return ([], []) }
    var items: [String] = []
    for lane in lanes where lane["label"] == .string("events") {
        guard case .array(let list)? = lane["items"] else { continue }
        for case .array(let item) in list where item.count > 5 { items.append(RunLanes.display(item[3])) }
    }
    let lines = vlines.compactMap { v -> String? in
        guard case .array(let parts) = v, parts.count > 1 else { return nil }
        return RunLanes.display(parts[1])
    }
    return (items, lines)
}

/// The trace's instants named `name`.
private func traceInstants(_ run: RenderedRun, _ name: String) throws -> [JSONValue] {
    let trace = try JSONValue.parse(ChromeTrace.json([run]).serialized())
    guard case .array(let events)? = trace["traceEvents"] else { return [] }
    return events.filter { $0["name"] == .string(name) && $0["ph"] == .string("i") }
}

@Test func ending_terminateWhileSuspended_isAnOrdinaryEnd_inEveryPicture() throws {
    let run = endedRun("endedWhileSuspended")
    // Lanes: `e`, not `K`, and the legend says what `e` is.
    let row = eventsRow(run)
    #expect(row.contains("e"), "\(row)")
    #expect(!row.contains("K"), "\(row)")
    #expect(LaneChart.text(run, width: 200, colour: false).contains("e ended (terminate)"))
    // Not red: the colour of a failure is SGR 31.
    let coloured = LaneChart.text(run, width: 80, colour: true)
    let events = coloured.split(separator: "\n").first { $0.contains("events") }.map(String.init) ?? ""
    #expect(!events.contains("\u{1B}[1;31m"), "\(events)")
    // Page: a mark of its own and a grey line, no red one.
    let marks = try pageMarks(run)
    #expect(marks.items == ["m-end"])
    #expect(marks.vlines == ["v-end"])
    // Trace: an app event, not a termination of the process.
    let instant = try #require(try traceInstants(run, "endedWhileSuspended").first)
    #expect(instant["cat"] == .string("lifecycle"))
    #expect(instant["s"] == .string("t"))
}

@Test func ending_terminateInTheBackground_isDrawnTheSameWay() throws {
    let run = endedRun("willTerminate")
    #expect(eventsRow(run).contains("e"))
    #expect(try pageMarks(run).items == ["m-end"])
    #expect(try traceInstants(run, "willTerminate").first?["cat"] == .string("lifecycle"))
}

@Test(arguments: ["killed", "forceQuit"])
func ending_killAndForceQuit_stayKills_inEveryPicture(end: String) throws {
    let run = endedRun(end)
    let row = eventsRow(run)
    #expect(row.contains("K"), "\(row)")
    #expect(!row.contains("e"), "\(row)")
    let marks = try pageMarks(run)
    #expect(marks.items == ["m-bad"])
    #expect(marks.vlines == ["v-bad"])
    let instant = try #require(try traceInstants(run, end).first)
    #expect(instant["cat"] == .string("termination"))
    #expect(instant["s"] == .string("p"))
}

// MARK: - The page

/// `count` runs, every third failing a line with its reason.
private func manyRuns(_ count: Int) -> [RenderedRun] {
    (0..<count).map { i in
        var expectations: [JSONValue] = [
            .object([("line", .int(3)), ("text", .string("expect outcome completed")), ("passed", .bool(true))])
        ]
        if i % 3 == 0 {
            expectations.append(
                .object([
                    ("line", .int(4)), ("text", .string("expect opFinished name=upload result=finished")),
                    ("passed", .bool(false)),
                    (
                        "message",
                        .string(
                            "expected opFinished name=upload result=finished, found none; closest: t=5 opFinished "
                                + "plugin=p queue=work op=4 name=upload result=timedOut (result differs)")
                    ),
                ]))
        }
        let timeline = [F.event(0, "didFinishLaunching"), F.event(0, "didBecomeActive")]
        return RenderedRun(
            title: "p/scenarios/run-\(i).scenario",
            report: F.report(timeline, plugins: ["p"], expectations: expectations))
    }
}

@Test func page_ofFifteenRuns_linksEachFromAnIndexAtTheTop() throws {
    let html = ReportPage.html(manyRuns(15))
    let index = try #require(html.range(of: "<nav class=\"index\">"))
    let firstRun = try #require(html.range(of: "<section class=\"run\""))
    #expect(index.lowerBound < firstRun.lowerBound)
    for i in 0..<15 {
        #expect(html.contains("<a href=\"#run-\(i)\">p&#47;scenarios&#47;run-\(i).scenario</a>"), "link \(i)")
        #expect(html.contains("<section class=\"run\" id=\"run-\(i)\">"), "anchor \(i)")
    }
    // The failing runs are marked in the index.
    #expect(html.components(separatedBy: "<li class=\"failing\">").count - 1 == 5)
    #expect(html.contains("1 failed expectation<"))
    // A page of one run needs no index.
    #expect(!ReportPage.html(manyRuns(1)).contains("<nav"))
}

@Test func page_failedExpectations_sayWhyEachLineFailed() {
    let html = ReportPage.html(manyRuns(1))
    #expect(html.contains("expect opFinished name=upload result=finished</code><div class=\"why\">"))
    #expect(html.contains("closest: t=5 opFinished plugin=p queue=work op=4 name=upload result=timedOut (result differs)"))
    // A line that held is not listed.
    #expect(!html.contains("<code>expect outcome completed</code>"))
}

@Test func page_legend_givesQueueOpsAColourOfTheirOwn() throws {
    let html = ReportPage.html([F.expiration()])
    for (cls, label) in [("op", "queue op"), ("op-fail", "queue op not finished"), ("m-end", "app ended (terminate)")] {
        #expect(html.contains("<rect class=\"\(cls)\" width=\"14\" height=\"12\" rx=\"2\"></rect></svg>\(label)<"), "\(cls)")
    }
    // The op's colour is no other swatch's: it was nearly the suspended state's purple.
    func fill(_ cls: String) -> String? {
        guard let r = html.range(of: ".\(cls) { fill: ") else { return nil }
        return String(html[r.upperBound...].prefix(7))
    }
    let op = try #require(fill("op"))
    for other in ["st-suspended", "sys", "task", "http", "xfer", "call", "st-background"] {
        #expect(fill(other) != op, "\(other)")
    }
}
