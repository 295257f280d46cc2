import Foundation
import Testing

@testable import Lifeline

// What survives SIGKILL: a real `lifeline run` is killed 50 times at random moments while its
// plugin commits store transactions and downloads files from a real server on 127.0.0.1, and is
// started again on the same state dir each time. Every commit the plugin saw is there, no
// transaction is half there, and every downloaded file is whole.

@Suite("SIGKILL at random moments")
struct CrashConsistencyTests {
    /// Each step commits one transaction of three keys, says so, and every 10th of the first 200
    /// steps starts a download; the next step comes 5 ms later. A relaunch goes on from the
    /// store's `last`.
    static func plugin(_ baseURL: String) -> String {
        """
        local function step()
          local i = (lifeline.store.get('last') or 0) + 1
          lifeline.store.transaction(function()
            lifeline.store.set('a:' .. i, i)
            lifeline.store.set('b:' .. i, string.rep('b', 1000) .. i)
            lifeline.store.set('last', i)
          end)
          print('committed ' .. i)
          if i % 10 == 0 and i <= 200 then
            local name = 'f' .. (i // 10 % 3) .. '.bin'
            lifeline.transfers.download{url = '\(baseURL)' .. name, to = 'dl-' .. i .. '-' .. name, id = 'dl-' .. i}
          end
          lifeline.after(0.005, step)
        end
        step()
        """
    }

    @Test func fiftyKills_loseNoCommittedWrite_splitNoTransaction_andLeaveOnlyWholeFiles() async throws {
        let server = try await RangeServer.start()
        defer { Task { await server.stop() } }
        let files = (0..<3).map { testBytes(400_000 + 50_000 * $0, seed: UInt8(3 + $0)) }
        for (n, bytes) in files.enumerated() { server.setFile("f\(n).bin", bytes, etag: "\"f\(n)\"") }
        server.throttle(bytesPerTick: 40_000)  // a download spans several kills

        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sigkill-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plugins = root + "/plugins", state = root + "/state"
        try FileManager.default.createDirectory(atPath: plugins + "/p", withIntermediateDirectories: true)
        try "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n".write(
            toFile: plugins + "/p/plugin.toml", atomically: false, encoding: .utf8)
        try Self.plugin(server.url("/file/")).write(toFile: plugins + "/p/init.lua", atomically: false, encoding: .utf8)

        var seed = UInt64(Date().timeIntervalSince1970 * 1000) & 0xFFFF_FFFF
        print("sigkill test seed: \(seed)")
        func random(_ range: ClosedRange<Int>) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return range.lowerBound + Int((seed >> 33) % UInt64(range.count))
        }
        var logs: [String] = []
        var killedMidDownload = 0
        for kill in 0..<50 {
            let live = try ChildRun(plugins: plugins, stateDir: state, log: root + "/run-\(kill).log")
            // Once it has committed something in this run, kill it 0-120 ms later.
            _ = live.wait(upTo: 20) { live.text.contains("committed") }
            usleep(useconds_t(random(0...120) * 1000))
            live.stop(SIGKILL)
            logs.append(live.text)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: state + "/files/p")) ?? []
            if names.contains(where: { $0.hasSuffix(".partial") }) { killedMidDownload += 1 }
        }
        // A last run, left alone until every download has finished (no step past 200 starts one).
        let last = try ChildRun(plugins: plugins, stateDir: state, log: root + "/run-last.log")
        let settled = last.wait(upTo: 60) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: state + "/files/p")) ?? []
            return last.text.contains("committed") && !names.contains { $0.hasSuffix(".partial") }
        }
        last.stop(SIGTERM)
        logs.append(last.text)
        #expect(settled, "downloads did not finish after the kills")

        // The commits the plugin saw.
        let seen = Set(
            logs.joined(separator: "\n").components(separatedBy: "\n").compactMap { line -> Int? in
                guard let r = line.range(of: "committed ") else { return nil }
                return Int(line[r.upperBound...].prefix { $0.isNumber })
            })
        #expect(seen.count > 50, "only \(seen.count) commits seen")

        let database = try StateDatabase.open(stateDirectory: state)
        let store = PluginStore(plugin: "p", quota: PluginStore.defaultQuota, database: database)
        guard case .int(let lastCommitted)? = try store.get("last") else {
            Issue.record("no 'last' in the store")
            return
        }
        #expect(seen.allSatisfy { $0 <= Int(lastCommitted) }, "a commit the plugin saw is past 'last'")
        var missing: [Int] = [], halves: [Int] = []
        for i in 1...Int(lastCommitted) {
            let a = try store.get("a:\(i)"), b = try store.get("b:\(i)")
            if a == nil && b == nil {
                missing.append(i)
            } else if a == nil || b == nil {
                halves.append(i)
            }
        }
        #expect(missing.isEmpty, "commits lost: \(missing.prefix(10))")
        #expect(halves.isEmpty, "transactions half applied: \(halves.prefix(10))")
        #expect(try store.get("a:\(lastCommitted + 1)") == nil && store.get("b:\(lastCommitted + 1)") == nil)

        // Every file with its final name is byte for byte what the server has.
        let names = try FileManager.default.contentsOfDirectory(atPath: state + "/files/p")
        let finished = names.filter { $0.hasPrefix("dl-") && $0.hasSuffix(".bin") }
        #expect(!finished.isEmpty, "no download finished")
        for name in finished {
            let n = Int(String(name.dropLast(4).last!))!
            let bytes = FileManager.default.contents(atPath: state + "/files/p/" + name).map(Array.init)
            #expect(bytes == files[n], "\(name) is not whole")
        }
        print("sigkill test: \(seen.count) commits seen, last \(lastCommitted), \(finished.count) files, "
            + "\(killedMidDownload) of 50 kills left a partial download")
    }
}
