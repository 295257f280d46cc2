import Foundation
import Testing

// A real `lifeline run` (the binary scripts/test builds) killed with SIGKILL mid-download, then
// started again on the same state dir: it resumes the transfer with a Range request, the file is
// byte-identical, and the plugin hears transferDidFinish once the app runs.

/// The binary: $LIFELINE_BIN (scripts/test sets it), else .build/debug/lifeline.
var lifelineBinary: String {
    if let path = ProcessInfo.processInfo.environment["LIFELINE_BIN"] { return path }
    return FileManager.default.currentDirectoryPath + "/.build/debug/lifeline"
}

/// A `lifeline run` whose stderr goes to a file.
final class ChildRun {
    let process = Process()
    let log: String

    init(plugins: String, stateDir: String, log: String, extra: [String] = []) throws {
        self.log = log
        FileManager.default.createFile(atPath: log, contents: nil)
        process.executableURL = URL(fileURLWithPath: lifelineBinary)
        process.arguments = ["run", "--plugins", plugins, "--state-dir", stateDir] + extra
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    var text: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Polls until `condition` holds; false after `seconds`.
    func wait(upTo seconds: Double = 20, until condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > end || !process.isRunning { return condition() }
            usleep(5_000)
        }
        return true
    }

    func stop(_ signo: Int32) {
        kill(process.processIdentifier, signo)
        let end = Date().addingTimeInterval(20)
        while process.isRunning && Date() < end { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

func size(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

@Suite("lifeline run with transfers")
struct TransferRunTests {
    @Test func sigkillMidDownload_thenARestart_resumesWithRange_andDeliversTheEvent() async throws {
        let server = try await RangeServer.start()
        defer { Task { await server.stop() } }
        let content = testBytes(3_000_000, seed: 7)
        server.setFile("big.bin", content, etag: "\"big-1\"")
        server.throttle(bytesPerTick: 20_000)  // 2 MB/s: the download takes about 1.5 s

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("run-transfer-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plugins = root + "/plugins", state = root + "/state"
        try FileManager.default.createDirectory(atPath: plugins + "/p", withIntermediateDirectories: true)
        try "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n".write(
            toFile: plugins + "/p/plugin.toml", atomically: true, encoding: .utf8)
        try """
            lifeline.on('transferDidFinish', function(e) print('heard ' .. e.id) end)
            if not lifeline.store.get('started') then
              lifeline.store.set('started', true)
              lifeline.transfers.download{url = '\(server.url("/file/big.bin"))', to = 'big.bin', id = 'big'}
            end
            """.write(toFile: plugins + "/p/init.lua", atomically: true, encoding: .utf8)
        let partial = state + "/files/p/big.bin.1.partial"

        let first = try ChildRun(plugins: plugins, stateDir: state, log: root + "/first.log")
        #expect(first.wait { size(partial) >= 600_000 }, "\(first.text)")
        first.stop(SIGKILL)
        let atKill = size(partial)
        #expect(atKill > 0 && atKill < content.count)
        #expect(!FileManager.default.fileExists(atPath: state + "/files/p/big.bin"))

        let second = try ChildRun(plugins: plugins, stateDir: state, log: root + "/second.log")
        #expect(second.wait { second.text.contains("heard big") }, "\(second.text)")
        second.stop(SIGTERM)
        #expect(FileManager.default.contents(atPath: state + "/files/p/big.bin").map(Array.init) == content)
        #expect(!FileManager.default.fileExists(atPath: partial))
        let requests = server.requests
        #expect(requests.count == 2)
        #expect(requests.first?.range == nil)
        // It resumed from at least the bytes that were on disk at the kill, validated by the ETag.
        let from = requests.last?.range.flatMap { Int($0.dropFirst(6).prefix { $0 != "-" }) } ?? 0
        #expect(from >= atKill)
        #expect(requests.last?.ifRange == "\"big-1\"")
        #expect(second.text.contains("transferResumed"))
        #expect(second.text.components(separatedBy: "heard big").count == 2)  // once
    }

    @Test func sigquitForceQuits_cancellingTheTransfers_andTransfersListsThem() async throws {
        let server = try await RangeServer.start()
        defer { Task { await server.stop() } }
        server.setFile("big.bin", testBytes(3_000_000), etag: "\"v\"")
        server.throttle(bytesPerTick: 10_000)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("run-quit-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plugins = root + "/plugins", state = root + "/state"
        try FileManager.default.createDirectory(atPath: plugins + "/p", withIntermediateDirectories: true)
        try "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n".write(
            toFile: plugins + "/p/plugin.toml", atomically: true, encoding: .utf8)
        try "lifeline.transfers.download{url = '\(server.url("/file/big.bin"))', to = 'big.bin', id = 'big'}"
            .write(toFile: plugins + "/p/init.lua", atomically: true, encoding: .utf8)
        let live = try ChildRun(plugins: plugins, stateDir: state, log: root + "/run.log")
        #expect(live.wait { size(state + "/files/p/big.bin.1.partial") > 100_000 })
        let during = try transfersList(state)
        #expect(during.contains("p/big") && during.contains("running") && during.contains("%"), "\(during)")
        kill(live.process.processIdentifier, SIGQUIT)
        #expect(live.wait { !live.process.isRunning })
        live.process.waitUntilExit()
        #expect(live.text.contains("transferEnded plugin=p transfer=big state=cancelled reason=userForceQuit"), "\(live.text)")
        #expect(!FileManager.default.fileExists(atPath: state + "/files/p/big.bin.1.partial"))
        let after = try transfersList(state)
        #expect(after.contains("cancelled") && after.contains("(userForceQuit)"), "\(after)")
        #expect(after.contains("1 event waiting for the app to run"), "\(after)")
    }
}

/// What `lifeline transfers --state-dir DIR` prints.
private func transfersList(_ stateDir: String) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: lifelineBinary)
    process.arguments = ["transfers", "--state-dir", stateDir]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
