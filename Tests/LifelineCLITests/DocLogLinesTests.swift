import Foundation
import Testing

// The log lines the docs show are the lines the CLI prints: `[    1.000s] LEVEL LABEL: MESSAGE`,
// then the metadata, sorted, as ` key=value` at the end. Examples that are not run (a ```text
// block beside a Lua fragment) are held to that shape, so a line copied from another log handler,
// with swift-log's `[Module]` tag or its metadata before the message, fails here.
//
// A block of what an embedding program prints through swift-log's own handler, not the CLI, is
// marked ```text swift-log, and is not held to the CLI's shape.

enum DocLogLines {
    /// A log line as the CLI prints it, its stamp optional (the docs may trim it): the level, the
    /// logger's label (`lifeline`, `plugin.NAME`), then the message.
    static var shape: Regex<AnyRegexOutput> {
        try! Regex(
            #"^(\[ *\d+\.\d+s\] )?(trace|debug|info|notice|warning|error|critical) (lifeline|plugin\.[A-Za-z0-9._-]+): (.*)$"#)
    }

    /// What the CLI never puts first in a message: swift-log's `[Module]` source tag, or a
    /// `key=value` of metadata (the CLI puts metadata last).
    static var misplaced: Regex<AnyRegexOutput> {
        try! Regex(#"^(\[[A-Za-z_][A-Za-z0-9_]*\]( |$)|[A-Za-z_][A-Za-z0-9_]*=[^ ]* )"#)
    }

    /// The start of any log line: a level and a logger's label.
    static var levelAndLabel: Regex<AnyRegexOutput> {
        try! Regex(#"(trace|debug|info|notice|warning|error|critical) (lifeline|plugin\.[A-Za-z0-9._-]+): "#)
    }

    /// A line as swift-log's own StreamLogHandler prints a host's line, its timestamp trimmed: the
    /// metadata (the host's time `t` among it) before the `[Module]` tag, then the message.
    static var swiftLogShape: Regex<AnyRegexOutput> {
        try! Regex(
            #"^(trace|debug|info|notice|warning|error|critical) (lifeline|plugin\.[A-Za-z0-9._-]+):( [A-Za-z_]+=[^ ]+)* t=[^ ]+( [A-Za-z_]+=[^ ]+)* \[[A-Za-z_][A-Za-z0-9_]*\] .*$"#)
    }

    /// Why `line` is not a log line as the CLI prints it, or nil when it is one or is no log line.
    static func problem(_ line: String) -> String? {
        guard let match = line.wholeMatch(of: shape), let message = match.output[4].substring else { return nil }
        if let tag = message.prefixMatch(of: misplaced) {
            let text = String(message[tag.range]).trimmingCharacters(in: .whitespaces)
            return text.hasPrefix("[")
                ? "'\(text)' before the message: the CLI prints no module tag"
                : "'\(text)' before the message: the CLI prints metadata after it"
        }
        return nil
    }
}

@Suite struct DocLogLinesTests {
    @Test(arguments: DocExamples.markdownFiles)
    func theLogLinesADocShows_areShapedAsTheCLIPrintsThem(_ file: String) throws {
        let markdown = try String(contentsOfFile: CLI.packageRoot + "/" + file, encoding: .utf8)
        for block in DocExamples.blocks(of: markdown) {
            if block.flags.contains("swift-log") {
                for (offset, line) in block.lines.enumerated() where line.prefixMatch(of: DocLogLines.levelAndLabel) != nil {
                    if line.wholeMatch(of: DocLogLines.swiftLogShape) == nil {
                        let at = "\(file):\(block.line + 1 + offset)"
                        Issue.record("\(at): not as swift-log's handler prints a host's line (LEVEL LABEL: t=T … [Module] MESSAGE): \(line)")
                    }
                }
                continue
            }
            if ["swift", "lua", "toml", "json", "scenario"].contains(block.language) { continue }
            for (offset, line) in block.lines.enumerated() {
                if let problem = DocLogLines.problem(line) {
                    Issue.record("\(file):\(block.line + 1 + offset): \(problem): \(line)")
                }
            }
        }
    }

    @Test func theCLIsOwnLogLines_passTheCheck_withTheirMetadataLast() throws {
        let ws = try Workspace()
        try ws.plugin(
            "examples",
            """
            lifeline.on("didReceiveMemoryWarning", function(event) print(event.name, event.time, event.state) end)
            lifeline.on("didEnterBackground", function()
              local quick
              quick = lifeline.beginBackgroundTask(function() lifeline.endBackgroundTask(quick) end)
              print("ended:", lifeline.endBackgroundTask(quick), lifeline.endBackgroundTask(quick))
            end)
            """)
        let scenario = try ws.file("s.scenario", "0s launch\n1s memory-warning\n2s background\n")
        let r = try CLI.run(
            ["simulate", "--plugins", ws.plugins, "--scenario", scenario], environment: ["NO_COLOR": "1"])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "[    1.000s] info plugin.examples: didReceiveMemoryWarning\t1.0\tactive",
                "[    2.000s] warning lifeline: Can't end BackgroundTask: no background task exists with identifier 1, "
                    + "or it may have already been ended. plugin=examples",
                "[    2.000s] info plugin.examples: ended:\ttrue\tfalse",
            ])
        for line in lines {
            #expect(line.wholeMatch(of: DocLogLines.shape) != nil, "\(line)")
            #expect(DocLogLines.problem(line) == nil, "\(line)")
        }
    }

    @Test func theCheck_catchesAModuleTagOrMetadataFirst() {
        #expect(DocLogLines.problem("info plugin.examples: [LifelineLua] upload expiring at\t27.0") != nil)
        #expect(DocLogLines.problem("[    2.000s] info plugin.x: [Embed] saved") != nil)
        #expect(DocLogLines.problem("warning lifeline: plugin=examples Can't end BackgroundTask") != nil)
        #expect(DocLogLines.problem("warning lifeline: Can't end BackgroundTask. plugin=examples") == nil)
        #expect(DocLogLines.problem("info plugin.sync: [1, 2] sent") == nil, "a message may start with brackets")
        #expect(DocLogLines.problem("lifeline: t.scenario:2: unknown action") == nil, "not a log line")
        #expect("info plugin.flush: t=2 [LifelineLua] flushed".wholeMatch(of: DocLogLines.swiftLogShape) != nil)
        #expect("info plugin.flush: [LifelineLua] t=2 flushed".wholeMatch(of: DocLogLines.swiftLogShape) == nil)
    }
}
