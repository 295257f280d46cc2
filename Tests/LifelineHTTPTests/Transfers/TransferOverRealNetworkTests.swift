import Foundation
import Lifeline
import LifelineHTTP
import LifelineLua
import Testing

// Background transfers over the real transport, against a real file server on 127.0.0.1 with
// byte ranges and injected faults. The host runs on a virtual clock that a driver moves on while
// the bytes travel for real, so a retry's backoff costs no real wait.

private struct Setup {
    let host: LifelineHost
    let executor: MainExecutor
    let clock: VirtualClock
    let stateDir: String
    let transport: AsyncHTTPTransport

    /// Runs the host until `condition` holds: posted work as it arrives, and virtual time 50 ms
    /// further every 2 ms of real time. False if 20 real seconds pass first.
    func drive(until condition: () -> Bool) -> Bool {
        let start = Date()
        while !condition() {
            if Date().timeIntervalSince(start) > 20 { return false }
            executor.run(until: executor.now, shouldStop: { false }, afterJob: host.afterJob)
            usleep(2000)
            executor.run(until: executor.now.adding(seconds: 0.05), shouldStop: { false }, afterJob: host.afterJob)
        }
        return true
    }

    func events(_ name: String) -> [TimelineEvent] { host.recorder.timeline.filter { $0.event == name } }
    func file(_ name: String) -> [UInt8]? { FileManager.default.contents(atPath: stateDir + "/files/p/" + name).map(Array.init) }
    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: stateDir + "/files/p/" + name) }
    var marks: [String] {
        host.recorder.timeline.compactMap { e in
            guard e.event == "taskBegan", case .string(let name)? = e["name"], name.hasPrefix("mark:") else { return nil }
            return String(name.dropFirst(5))
        }
    }
}

private let prelude = """
    local function mark(s) lifeline.endBackgroundTask(lifeline.beginBackgroundTask('mark:' .. tostring(s))) end
    lifeline.on('transferDidFinish', function(e) mark('finish ' .. e.id) end)
    lifeline.on('transferDidFail', function(e) mark('fail ' .. e.id .. ' ' .. e.reason) end)

    """

/// A host with one Lua plugin "p" (allowed 127.0.0.1), the real transport and a fresh state dir;
/// launched. `limit`: transfers at once.
private func withHost(
    _ source: String, limit: Int = 4, prepare: (_ files: String) throws -> Void = { _ in },
    _ body: (Setup) async throws -> Void
) async throws {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("transfer-\(UUID().uuidString)").path
    let pluginDir = root + "/plugins/p"
    try FileManager.default.createDirectory(atPath: pluginDir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    try (prelude + source).write(toFile: pluginDir + "/init.lua", atomically: true, encoding: .utf8)
    let descriptor = PluginDescriptor(name: "p", kind: .lua, network: try NetworkPermissions(["127.0.0.1:*"])) {
        () throws(LifelineError) -> any PluginInstance in
        try LuaPlugin(name: "p", directory: pluginDir, memoryLimit: PluginManifest.defaultMemoryLimit)
    }
    let transport = AsyncHTTPTransport()
    defer { transport.shutdown() }
    var configuration = HostConfiguration()
    configuration.logger.logLevel = .critical
    configuration.transport = transport
    configuration.transferTransport = transport
    configuration.transferLimit = limit
    configuration.transferJitterSeed = 1
    configuration.database = try StateDatabase.open(stateDirectory: root + "/state")
    try FileManager.default.createDirectory(atPath: root + "/state/files/p", withIntermediateDirectories: true)
    try prepare(root + "/state/files/p")
    let clock = VirtualClock()
    let executor = MainExecutor(clock: clock)
    let host = LifelineHost(configuration: configuration, plugins: [descriptor], executor: executor)
    defer { host.shutdown() }
    try host.perform(.launch)
    try await body(Setup(host: host, executor: executor, clock: clock, stateDir: root + "/state", transport: transport))
}

private func withServer(_ body: (RangeServer) async throws -> Void) async throws {
    let server = try await RangeServer.start()
    do {
        try await body(server)
        await server.stop()
    } catch {
        await server.stop()
        throw error
    }
}

@Suite("Transfers over the real transport")
struct TransferOverRealNetworkTests {
    @Test func resumeAfterADroppedConnection_asksForTheRestWithRange_andNoByteIsFetchedTwice() async throws {
        try await withServer { server in
            let content = testBytes(1_000_000)
            server.setFile("a.bin", content, etag: "\"v1\"")
            server.inject(.dropAfter(300_000))
            try await withHost("lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'a.bin'}") { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                #expect(s.file("a.bin") == content)
                #expect(!s.exists("a.bin.1.partial"))
                let requests = server.requests
                #expect(requests.count == 2)
                #expect(requests.first?.range == nil)
                #expect(requests.last?.range == "bytes=300000-")
                #expect(requests.last?.ifRange == "\"v1\"")
                #expect(server.bodyBytesSent == 1_000_000)
            }
        }
    }

    @Test func anETagChangeBetweenAttempts_restartsFromZero_neverSplicing() async throws {
        try await withServer { server in
            server.setFile("a.bin", testBytes(500_000, seed: 1), etag: "\"v1\"")
            server.inject(.dropAfter(200_000))
            try await withHost("lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'a.bin'}") { s in
                #expect(s.drive { server.requests.count == 1 && s.events("transferRetrying").count == 1 })
                let changed = testBytes(600_000, seed: 2)
                server.setFile("a.bin", changed, etag: "\"v2\"")
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                #expect(server.requests.last?.ifRange == "\"v1\"")
                #expect(s.file("a.bin") == changed)
                #expect(server.bodyBytesSent == 200_000 + 600_000)
            }
        }
    }

    @Test func a503WithRetryAfter_isRetriedAfterThatLong() async throws {
        try await withServer { server in
            server.setFile("a.bin", testBytes(10_000))
            server.inject(.status(503, headers: [("Retry-After", "7")]))
            try await withHost("lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'a.bin'}") { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                let retry = s.events("transferRetrying")
                #expect(retry.count == 1)
                #expect(retry.first?["after"] == .number("7"))
                let started = s.events("transferStarted").map(\.time.seconds)
                #expect(started.count == 2)
                #expect(started.last! - started.first! >= 7)
            }
        }
    }

    @Test func a503WithRetryAfterAsAnHTTPDate_isRetriedAtThatDate() async throws {
        try await withServer { server in
            server.setFile("a.bin", testBytes(10_000))
            // Ten seconds from now, in the IMF-fixdate form servers send.
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let date = formatter.string(from: Date().addingTimeInterval(10))
            server.inject(.status(503, headers: [("Retry-After", date)]))
            try await withHost("lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'a.bin'}") { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                let retry = s.events("transferRetrying")
                #expect(retry.count == 1)
                // The date has whole seconds, and real time passed since it was written: under a
                // full parallel suite the host took over 2 s to send its first request. A delay
                // read from the date is still far from any default and at most the 10 s given.
                guard case .number(let after)? = retry.first?["after"], let seconds = Double(after) else {
                    Issue.record("no delay in \(retry)")
                    return
                }
                #expect(seconds > 4 && seconds <= 10, "Retry-After: \(date) gave \(seconds) s")
            }
        }
    }

    @Test func a404FailsAtOnce() async throws {
        try await withServer { server in
            try await withHost("lifeline.transfers.download{url = '\(server.url("/file/missing"))', to = 'm'}") { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["fail 1 the server answered 404"])
                #expect(server.requests.count == 1)
                #expect(!s.exists("m") && !s.exists("m.1.partial"))
            }
        }
    }

    @Test func aSha256Mismatch_failsAndLeavesNoFile_aMatchFinishes() async throws {
        try await withServer { server in
            let content = testBytes(100_000)
            server.setFile("a.bin", content)
            let good = try sha256sum(content)
            let source = """
                lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'good', sha256 = '\(good)'}
                lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'bad', sha256 = string.rep('ab', 32)}
                """
            try await withHost(source) { s in
                #expect(s.drive { s.marks.count == 2 })
                #expect(s.marks.contains("finish 1"))
                #expect(s.marks.contains { $0.hasPrefix("fail 2 sha256 mismatch: expected abab") })
                #expect(s.file("good") == content)
                #expect(!s.exists("bad") && !s.exists("bad.2.partial"))
            }
        }
    }

    @Test func atMostTheLimitRunAtOnce() async throws {
        try await withServer { server in
            server.setFile("a.bin", testBytes(200_000))
            server.throttle(bytesPerTick: 20_000)  // 2 MB/s: each takes about 100 ms
            let source = """
                for i = 1, 6 do lifeline.transfers.download{url = '\(server.url("/file/a.bin"))', to = 'f' .. i} end
                """
            try await withHost(source, limit: 2) { s in
                #expect(s.drive { s.marks.count == 6 })
                #expect(server.maxInFlight == 2)
                #expect(server.requests.count == 6)
                #expect(s.marks.sorted() == (1...6).map { "finish \($0)" })
                // They start in the order they were made, each once a slot is free.
                let started = s.events("transferStarted").compactMap { e -> String? in
                    if case .string(let id)? = e["transfer"] { return id } else { return nil }
                }
                #expect(started == (1...6).map(String.init))
            }
        }
    }

    @Test func anUpload_sendsTheFile() async throws {
        try await withServer { server in
            let content = testBytes(50_000, seed: 9)
            let source = "lifeline.transfers.upload{url = '\(server.url("/upload/got"))', from = 'out.bin', method = 'PUT'}"
            try await withHost(source, prepare: { files in
                try Data(content).write(to: URL(fileURLWithPath: files + "/out.bin"))
            }) { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                #expect(server.file("got") == content)
                #expect(server.requests.map(\.method) == ["PUT"])
            }
        }
    }

    /// The file is sent as it is read, a chunk at a time: many chunks and none arrive whole.
    @Test(arguments: [0, 1, 65_536, 65_537, 3_000_017])
    func anUpload_ofAnySize_arrivesByteForByte(size: Int) async throws {
        try await withServer { server in
            let content = testBytes(size, seed: 11)
            let source = "lifeline.transfers.upload{url = '\(server.url("/upload/big"))', from = 'big.bin', method = 'PUT'}"
            try await withHost(source, prepare: { files in
                try Data(content).write(to: URL(fileURLWithPath: files + "/big.bin"))
            }) { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                #expect(server.file("big") == content)
            }
        }
    }

    @Test func anUpload_sendsAFileThePluginWroteWithLifelineFiles_byteForByte() async throws {
        try await withServer { server in
            // Every byte value, NUL included, as Lua builds them.
            let source = """
                local bytes = {}
                for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
                lifeline.files.write('outbox/all.bin', string.rep(table.concat(bytes), 100))
                lifeline.transfers.upload{url = '\(server.url("/upload/all"))', from = 'outbox/all.bin'}
                """
            try await withHost(source) { s in
                #expect(s.drive { !s.marks.isEmpty })
                #expect(s.marks == ["finish 1"])
                let expected = (0..<100).flatMap { _ in (0...255).map { UInt8($0) } }
                #expect(server.file("all") == expected)
                #expect(s.file("outbox/all.bin") == expected)
            }
        }
    }

    @Test func aNameThatLeadsOutThroughALink_isRefused() async throws {
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("outside-\(UUID())").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let source = """
            local ok, err = pcall(lifeline.transfers.download, {url = 'http://127.0.0.1:1/x', to = 'out/x.bin'})
            mark(tostring(ok) .. ' ' .. err)
            """
        try await withHost(source, prepare: { files in
            try FileManager.default.createSymbolicLink(atPath: files + "/out", withDestinationPath: outside)
        }) { s in
            #expect(s.marks.count == 1)
            #expect(s.marks.first?.contains("false") == true)
            #expect(s.marks.first?.contains("leads outside the plugin's files folder") == true)
            #expect((try? FileManager.default.contentsOfDirectory(atPath: outside))?.isEmpty == true)
        }
    }
}


/// The SHA-256 of `bytes` by coreutils' sha256sum, apart from the code under test.
private func sha256sum(_ bytes: [UInt8]) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("sha-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    process.waitUntilExit()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return String(out.prefix(64))
}
