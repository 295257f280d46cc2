import Foundation
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `lifeline run --record FILE` against a real server on 127.0.0.1, and the recording replayed by
/// `lifeline simulate`: the same lifecycle events, log lines and task pairs, in the same order.
@Suite("lifeline run --record")
struct RecordReplayTests {
    /// A plugin that asks the server once at each of three moments, each under a task of its own,
    /// and logs what it got.
    static func poller(_ url: String) -> String {
        """
        local function poll(i)
          lifeline.background("poll" .. i, function()
            local r, err = lifeline.http.request{url = "\(url)", timeout = 2}
            if r then
              print("poll " .. i .. " " .. r.status .. " " .. r.body .. " note=" .. tostring(r.headers["x-note"]))
            else
              print("poll " .. i .. " failed: " .. tostring(err))
            end
          end)
        end
        local n = 0
        local function next() n = n + 1; poll(n) end
        lifeline.on("didBecomeActive", next)
        lifeline.on("didEnterBackground", next)
        """
    }

    /// What a replay must give again: lifecycle events, log lines, and task begins and ends, each
    /// with its plugin, task and message; no times.
    static func trace(_ report: [String: Any]) -> [String] {
        let kept: Set<String> = Set(LifecycleEventName.allCases.map(\.rawValue)).union(["log", "taskBegan", "taskEnded", "suspended"])
        return ((report["timeline"] as? [[String: Any]]) ?? []).compactMap { e in
            guard let name = e["event"] as? String, kept.contains(name) else { return nil }
            let fields = ["plugin", "task", "name", "message", "expired"].compactMap { key in e[key].map { "\(key)=\($0)" } }
            return ([name] + fields).joined(separator: " ")
        }
    }

    @Test func aRecordedRun_replaysWithTheSameEventsLogsAndTaskPairs() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("record-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plugins = root + "/plugins"
        try FileManager.default.createDirectory(atPath: plugins + "/poller", withIntermediateDirectories: true)
        try "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n".write(toFile: plugins + "/poller/plugin.toml", atomically: true, encoding: .utf8)
        try Self.poller(server.url("/sequence")).write(toFile: plugins + "/poller/init.lua", atomically: true, encoding: .utf8)
        let recording = root + "/incident.scenario"
        let live = root + "/live.json", replayed = root + "/replayed.json"

        let run = try ChildRun(
            plugins: plugins, stateDir: root + "/state", log: root + "/run.log",
            extra: ["--record", recording, "--report", live])
        #expect(run.wait { run.text.contains("poll 1 200") }, "\(run.text)")
        kill(run.process.processIdentifier, SIGUSR1)  // background: the second poll, 503
        #expect(run.wait { run.text.contains("poll 2 503") }, "\(run.text)")
        kill(run.process.processIdentifier, SIGUSR2)  // foreground: the third, which hangs until its timeout
        #expect(run.wait { run.text.contains("poll 3 failed") }, "\(run.text)")
        run.stop(SIGTERM)

        let text = try String(contentsOfFile: recording, encoding: .utf8)
        #expect(text.contains("launch\n"))
        #expect(text.contains(" background\n") && text.contains(" foreground\n") && text.contains(" terminate\n"))
        #expect(text.contains("-> 200 body=incident.scenario.d/1.body"))
        #expect(text.contains("header=x-note:a%2C%20b%20%23%20c"))
        #expect(text.contains("-> 503 body=incident.scenario.d/2.body"))
        #expect(text.contains("-> hang"))
        #expect(try String(contentsOfFile: recording + ".d/1.body", encoding: .utf8) == #"{"items":[1,2]}"#)

        let replay = try runLifeline(["simulate", "--plugins", plugins, "--scenario", recording, "--report", replayed])
        #expect(replay.status == 0, "\(replay.stderr)")
        let liveTrace = Self.trace(try report(at: live))
        let replayTrace = Self.trace(try report(at: replayed))
        #expect(liveTrace.contains("log plugin=poller message=poll 1 200 {\"items\":[1,2]} note=a, b # c"))
        #expect(liveTrace.contains { $0.hasPrefix("log plugin=poller message=poll 3 failed") })
        #expect(replayTrace == liveTrace)
    }

    @Test func aRecordingCutBySIGKILL_keepsEveryLineUpToTheKill_andParses() async throws {
        let server = try await TestServer.start()
        defer { Task { await server.stop() } }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("record-kill-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plugins = root + "/plugins"
        try FileManager.default.createDirectory(atPath: plugins + "/poller", withIntermediateDirectories: true)
        try "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n".write(toFile: plugins + "/poller/plugin.toml", atomically: true, encoding: .utf8)
        try Self.poller(server.url("/sequence")).write(toFile: plugins + "/poller/init.lua", atomically: true, encoding: .utf8)
        let recording = root + "/cut.scenario"
        let run = try ChildRun(plugins: plugins, stateDir: root + "/state", log: root + "/run.log", extra: ["--record", recording])
        #expect(run.wait { run.text.contains("poll 1 200") })
        kill(run.process.processIdentifier, SIGUSR1)
        #expect(run.wait { run.text.contains("poll 2 503") })
        run.stop(SIGKILL)

        let text = try String(contentsOfFile: recording, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        #expect(text.contains(" background\n"))
        #expect(text.contains("-> 503"))
        let replay = try runLifeline(["simulate", "--plugins", plugins, "--scenario", recording])
        #expect(replay.status == 0, "\(replay.stderr)")
        // Every prefix of whole lines parses too: a file cut anywhere at a line's end replays.
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        while !lines.isEmpty {
            #expect(throws: Never.self) { try Scenario.parse(lines.joined(separator: "\n") + "\n", fileName: recording) }
            lines = lines.dropLast()
        }
    }
}

private func report(at path: String) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any] ?? [:]
}

/// Runs the lifeline binary to its end.
private func runLifeline(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: lifelineBinary)
    process.arguments = arguments
    let err = Pipe()
    process.standardError = err
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    let data = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
