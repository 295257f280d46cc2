import Foundation
import Lifeline
import Testing

// The table of report events that `expect` lines are checked against: it must hold what the host
// records, and docs/report.md must say the same.

/// docs/report.md's timeline table: each event name with the fields its row lists.
private func documentedEvents() throws -> [String: [String]] {
    let text = try String(contentsOfFile: CLI.packageRoot + "/docs/report.md", encoding: .utf8)
    let section = try #require(text.range(of: "## Timeline events"))
    var table: [String: [String]] = [:]
    for line in text[section.upperBound...].split(separator: "\n") {
        if line.hasPrefix("## ") { break }
        let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard cells.count >= 4, cells[1].hasPrefix("`") else { continue }
        for name in backticked(cells[1]) { table[name] = backticked(cells[2]) }
    }
    return table
}

/// The words between backticks in a table cell.
private func backticked(_ cell: String) -> [String] {
    cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().compactMap {
        $0.offset % 2 == 1 ? String($0.element) : nil
    }
}

@Suite struct ReportEventsTests {
    @Test func docsReportTable_listsEveryEventWithItsFields() throws {
        let documented = try documentedEvents()
        #expect(documented.keys.sorted() == ReportEvents.names)
        for name in ReportEvents.names {
            #expect(documented[name] == ReportEvents.fields[name], "\(name)")
        }
    }

    @Test func everyRecordedEvent_isInTheTable_inTheBundledScenariosAndTheRareOnes() throws {
        let ws = try Workspace()
        // The events the bundled scenarios never record: a replaced operation, an unknown task's
        // end, a memory warning, a plugin error, a watchdog termination.
        try ws.plugin(
            "edges",
            """
            local q = lifeline.queue("edges.q")
            lifeline.on("didFinishLaunching", function()
              q:add({name = "job", unique = "replace", run = function() lifeline.sleep(5) end})
              q:add({name = "job", unique = "replace", run = function() lifeline.sleep(1) end})
            end)
            lifeline.on("didReceiveMemoryWarning", function() lifeline.endBackgroundTask(9999) end)
            lifeline.on("didEnterBackground", function() error("edges gave up") end)
            lifeline.on("willTerminate", function() while true do end end)
            """)
        let edges = try ws.file(
            "edges.scenario", "0s launch\n1s memory-warning\n2s background\n3s foreground\n4s terminate\n")
        var runs = [(ws.plugins, edges)]
        let bundled = CLI.packageRoot + "/plugins"
        for plugin in try FileManager.default.contentsOfDirectory(atPath: bundled).sorted() {
            let folder = bundled + "/" + plugin + "/scenarios"
            for file in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where file.hasSuffix(".scenario") {
                runs.append((bundled, folder + "/" + file))
            }
        }
        #expect(runs.count > 10)
        var seen = Set<String>()
        for (i, (plugins, scenario)) in runs.enumerated() {
            // To a file, not standard output: the test reads the report, not a pipe that a loaded
            // machine may drain late.
            let path = ws.path + "/report-\(i).json"
            let r = try CLI.run(["simulate", "--plugins", plugins, "--scenario", scenario, "--report", path])
            #expect([0, 1].contains(r.status), "\(scenario): \(r.stderr)")
            let text = try String(contentsOfFile: path, encoding: .utf8)
            for event in timeline(try parseReport(text)) {
                let name = event["event"] as? String ?? "?"
                seen.insert(name)
                let known = ReportEvents.fields[name]
                #expect(known != nil, "\(scenario): \(name) is not in ReportEvents")
                for key in event.keys where key != "t" && key != "event" {
                    #expect(known?.contains(key) == true, "\(scenario): \(name) has \(key)")
                }
            }
        }
        for name in ["opReplaced", "endUnknownTask", "memoryWarning", "pluginError", "watchdog", "terminated"] {
            #expect(seen.contains(name), "no run recorded \(name)")
        }
    }
}
