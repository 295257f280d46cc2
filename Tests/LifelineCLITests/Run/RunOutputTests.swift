import Foundation
import Testing

/// `lifeline run`'s output reads as one timeline: log lines on the same clock as events, each
/// signal echoed, and a word on what a TERM does to a suspended app.
@Suite struct RunOutputTests {
    @Test func run_echoesSignals_andLogsOnTheTimelinesClock() throws {
        let ws = try Workspace()
        try ws.plugin("p", """
            lifeline.on("didBecomeActive", function() lifeline.log.info("hello from p") end)
            """)
        let page = ws.path + "/run.html"
        let live = try RunTests.Live(["--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--html", page])
        #expect(live.stderr.waitFor("hello from p"))
        live.signal(SIGUSR1)
        #expect(live.stderr.waitFor("-- SIGUSR1: background"))
        #expect(live.stderr.waitFor("suspended"))
        live.signal(SIGTERM)
        #expect(live.wait() == 0)
        let text = live.stderr.text(waitingForEOF: true)
        let lines = text.split(separator: "\n").map(String.init)
        let log = try #require(lines.first { $0.contains("hello from p") })
        // `[    0.004s] info plugin.p: hello from p`: the run's own clock, not the wall clock.
        #expect(log.range(of: #"^\[ *\d+\.\d{3}s\] info plugin\.p: hello from p$"#, options: .regularExpression) != nil, "\(log)")
        #expect(!text.contains("+0000"), "\(text)")
        let term = try #require(lines.first { $0.contains("-- SIGTERM") })
        #expect(term.contains("terminate (the app is suspended: it ends without willTerminate"), "\(term)")
        #expect(!text.contains("willTerminate\n"), "a suspended app hears no willTerminate")
        // --html on run draws the whole run once the app has ended.
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(html.contains("lifeline run") && html.contains("hello from p"))
    }
}
