import Foundation
import Testing

// End to end, with real Lua: a failed line's near misses put the operation it names first, the
// report and the page say why it failed, and a `terminate` while suspended is drawn as the
// ordinary end it is, apart from a `kill`.

/// A plugin whose queue runs four quick operations and an "upload" that times out after 2 s.
private let queuePlugin = """
    local q = lifeline.queue("work", {maxConcurrent = 5})
    lifeline.on("didEnterBackground", function()
      q:add{name = "index", run = function() end}
      q:add{name = "thumbnails", run = function() end}
      q:add{name = "contacts", run = function() end}
      q:add{name = "upload", timeout = 2, run = function() lifeline.sleep(60) end}
      q:add{name = "cleanup", run = function() end}
    end)
    """

@Suite struct NearMissAndEndingCLITests {
    @Test func simulate_failedLine_listsTheTimedOutOperationOfItsNameFirst() throws {
        let ws = try Workspace()
        try ws.plugin("p", queuePlugin)
        let scenario = try ws.file(
            "upload.scenario",
            """
            0s launch
            1s background
            expect opFinished name=upload result=finished
            """)
        let html = ws.path + "/page.html"
        let r = try CLI.run([
            "simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", "-", "--html", html,
        ])
        #expect(r.status == 1, "\(r.stderr)")
        let line = try #require(r.stderr.split(separator: "\n").first { $0.contains("expected opFinished") })
        let closest = try #require(line.range(of: "closest: "))
        let first = line[closest.upperBound...]
        #expect(
            first.hasPrefix("t=3 opFinished plugin=p queue=work op=4 name=upload result=timedOut (result differs)"),
            "\(line)")
        // The report keeps why, without the file's name; the page shows it under the line.
        let report = try parseReport(r.stdout)
        let entries = try #require(report["expectations"] as? [[String: Any]])
        let why = try #require(entries.first?["message"] as? String)
        #expect(line.hasSuffix(": " + why))
        #expect(why.hasPrefix("expected opFinished name=upload result=finished, found none; closest: t=3 opFinished"))
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("<div class=\"why\">expected opFinished name=upload result=finished, found none"))
    }

    /// `terminate` while suspended and `kill` both end the app with no notification; the report
    /// names which step it was, and the pictures draw only the kill as one.
    @Test(arguments: [("terminate", "endedWhileSuspended", "e"), ("kill", "killed", "K")])
    func simulate_endWhileSuspended_isNamedInTheReport_andDrawnByKind(step: String, event: String, mark: String)
        throws
    {
        let ws = try Workspace()
        try ws.plugin("p", #"lifeline.on("willTerminate", function() print("told") end)"#)
        let scenario = try ws.file(
            "end.scenario",
            """
            0s launch
            1s background
            10s \(step)
            """)
        let html = ws.path + "/page.html", trace = ws.path + "/trace.json", report = ws.path + "/report.json"
        let r = try CLI.run(
            [
                "simulate", "--plugins", ws.plugins, "--scenario", scenario, "--report", report, "--lanes", "--html",
                html, "--trace", trace,
            ], environment: ["COLUMNS": "80", "NO_COLOR": "1"])
        #expect(r.status == 0, "\(r.stderr)")
        let parsed = try parseReport(String(contentsOfFile: report, encoding: .utf8))
        let names = timeline(parsed).compactMap { $0["event"] as? String }
        #expect(names.suffix(2) == ["suspended", event], "\(names)")
        #expect(!names.contains("willTerminate"))
        #expect(parsed["outcome"] as? String == "completed")
        #expect(!r.stderr.contains("told"))
        // The lanes' events row.
        let row = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("events ") })
        let cells = row.dropFirst("events".count)
        #expect(cells.contains(Character(mark)), "\(row)")
        #expect(!cells.contains(Character(mark == "e" ? "K" : "e")), "\(row)")
        // The page and the trace.
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains(mark == "e" ? "\"v-end\"" : "\"v-bad\""))
        #expect(!page.contains(mark == "e" ? "\"v-bad\"" : "\"v-end\""))
        let traceText = try String(contentsOfFile: trace, encoding: .utf8)
        let category = mark == "e" ? "lifecycle" : "termination"
        #expect(traceText.contains(#""name":"\#(event)","cat":"\#(category)""#), "\(traceText.prefix(400))")
    }
}
