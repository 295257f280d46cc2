import Foundation
import Testing

/// `lifeline simulate` with a scenario's `http` lines (SPEC 2.2): bad lines are bad input (exit 65,
/// with file:line), good ones script what plugins' requests get.
@Suite struct ScriptedNetworkCLITests {
    @Test(arguments: [
        ("0s launch\n0s http GET 127.0.0.1/x 200\n", "s.scenario:2", "missing '->'"),
        ("0s launch\n\n1s http FETCH! 127.0.0.1/x -> 200\n", "s.scenario:3", "is not an HTTP method"),
        ("0s launch\n0s http * * -> 700\n", "s.scenario:2", "'700' is not an HTTP status"),
        ("0s launch\n0s http * * -> hang in 5s\n", "s.scenario:2", "'hang' takes no delay"),
        ("0s launch\n0s http * * -> refuse in 5m10\n", "s.scenario:2", "ends with a number without a unit"),
    ])
    func simulate_badHttpLine_exits65_withFileAndLine(_ text: String, _ location: String, _ message: String) throws {
        let ws = try Workspace()
        try ws.plugin("quiet", "-- nothing")
        let s = try ws.file("s.scenario", text)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s])
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stderr.contains(location), "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }

    @Test func simulate_luaRequest_getsTheScriptedResponse() throws {
        let ws = try Workspace()
        try ws.plugin(
            "ender",
            """
            lifeline.on('didEnterBackground', function()
              lifeline.background('end-session', function()
                local r, err = lifeline.http.request{method = 'POST', url = 'http://127.0.0.1:8080/session/end'}
                print(r and ('ended ' .. r.status .. ' ' .. r.body) or ('failed ' .. err.kind))
              end)
            end)
            """,
            toml: "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n")
        let s = try ws.file(
            "s.scenario",
            """
            0s launch
            0s http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
            2s background
            """)
        let r = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", s, "--report", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        let report = try parseReport(r.stdout)
        let responses = events(report, "httpResponse", plugin: "ender")
        #expect(responses.count == 1)
        #expect(responses.first?["t"] as? Double == 2.3)
        #expect(responses.first?["method"] as? String == "POST")
        #expect(responses.first?["url"] as? String == "http://127.0.0.1:8080/session/end")
        #expect(responses.first?["status"] as? Int == 200)
        #expect(r.stderr.contains("ended 200 {\"success\": true}"), "\(r.stderr)")
    }
}
