import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Background transfers in simulate, served by the scenario's `http` lines in virtual time.

/// A plugin "p" allowed to reach example.org, with `markPrelude`.
private func transferPlugin(_ source: String, others: [String: String] = [:]) -> [String: String] {
    var files = plugins(["p": source].merging(others) { a, _ in a })
    files["p/plugin.toml"] = "[permissions]\nnetwork = [\"example.org:*\"]\n"
    return files
}

/// Runs `files` under `scenario` on the state dir `dir` (made if missing).
private func simulate(
    _ files: [String: String], scenario: String, stateDir dir: String, until: HostTime? = nil
) throws -> Recorder {
    try withPluginFolder(files) { pluginDir in
        var configuration = HostConfiguration()
        configuration.database = try StateDatabase.open(stateDirectory: dir)
        return try Simulation.run(
            scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: pluginDir), configuration: configuration, until: until)
    }
}

private func withStateDir<T>(_ body: (String) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("transfers-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// The timeline's events named `name`, as "time:field=value" for the fields asked.
private func events(_ recorder: Recorder, _ name: String, _ keys: [String] = []) -> [String] {
    recorder.timeline.filter { $0.event == name }.map { e in
        ([ReportNumber.seconds(e.time)] + keys.map { k in
            switch e[k] {
            case .string(let s)?: return s
            case .int(let i)?: return String(i)
            case .number(let n)?: return n
            case .bool(let b)?: return String(b)
            default: return "-"
            }
        }).joined(separator: " ")
    }
}

private func fileSize(_ path: String) -> Int64? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int64
}

private let handlers = """
    lifeline.on('transferDidFinish', function(e) mark('finish ' .. e.id .. ' ' .. e.state) end)
    lifeline.on('transferDidFail', function(e) mark('fail ' .. e.id .. ' ' .. e.reason) end)
    lifeline.on('didFinishTransferEvents', function(e) mark('batch ' .. e.state) end)
    """

@Test func transfer_download_finishesWithTheFileUnderItsNameAndProgressAtMost4ASecond() throws {
    let source = handlers + """
        lifeline.on('transferProgress', function(e) mark('progress ' .. e.received .. '/' .. e.total) end)
        lifeline.on('didFinishLaunching', function()
          local id = lifeline.transfers.download{url = 'https://example.org/big.bin', to = 'data/big.bin'}
          mark('started ' .. id)
        end)
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source), scenario: "0s http GET example.org/big.bin -> 200 size=10MB rate=2MB/s\n0s launch",
            stateDir: dir)
        let got = marks(recorder)
        #expect(got.first == "started 1")
        #expect(got.suffix(2) == ["finish 1 active", "batch active"])
        let progress = markEvents(recorder).filter { $0.mark.hasPrefix("progress") }
        // 10 MB at 2 MB/s: 5 s, reported at most 4 times a second.
        #expect(progress.count >= 5 && progress.count <= 21)
        #expect(progress.last?.mark == "progress 10000000/10000000")
        for (a, b) in zip(progress, progress.dropFirst()) where b.mark != progress.last?.mark {
            #expect(b.time.seconds - a.time.seconds >= 0.25 - 1e-9)
        }
        #expect(events(recorder, "transferEnded", ["state"]) == ["5 finished"])
        #expect(fileSize(dir + "/files/p/data/big.bin") == 10_000_000)
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/data/big.bin.1.partial"))
    }
}

@Test func transfer_continuesAfterKill_andTheHostRelaunchesTheAppInTheBackgroundToDeliver() throws {
    let source = handlers + """
        mark('loaded ' .. lifeline.state())
        if lifeline.store.get('started') == nil then
          lifeline.store.set('started', true)
          lifeline.transfers.download{url = 'http://example.org/a.bin', to = 'a.bin', id = 'nightly'}
        end
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source),
            scenario: "0s http GET example.org/* -> 200 size=20MB rate=1MB/s\n0s launch\n2s kill\n60s launch",
            stateDir: dir)
        #expect(
            marks(recorder) == [
                "loaded inactive", "loaded background", "finish nightly background", "batch background",
            ])
        #expect(events(recorder, "relaunch", ["reason"]) == ["20 transferEvents"])
        // The app had its budget to hear the events, then suspended; the user's launch brings it back.
        let names = recorder.timeline.map(\.event)
        let relaunch = names.firstIndex(of: "relaunch")!
        #expect(names[relaunch...].contains("suspended"))
        #expect(names.filter { $0 == "didBecomeActive" }.count == 2)
        #expect(recorder.termination == nil)
        #expect(fileSize(dir + "/files/p/a.bin") == 20_000_000)
    }
}

@Test func transfer_eventsAreHeldWhileSuspended_andDeliveredAtForeground() throws {
    let source = handlers + """
        lifeline.on('didEnterBackground', function()
          lifeline.transfers.download{url = 'http://example.org/a.bin', to = 'a.bin'}
        end)
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source),
            scenario: "0s http GET example.org/* -> 200 size=1MB rate=100KB/s\n0s launch\n1s background\n100s foreground",
            stateDir: dir)
        let finish = markEvents(recorder).filter { $0.mark.hasPrefix("finish") }
        #expect(finish.map(\.mark) == ["finish 1 active"])
        #expect(finish.first?.time.seconds == 100)
        #expect(events(recorder, "transferEnded", ["state"]) == ["11 finished"])
    }
}

@Test func transfer_eventsHeldWhileSuspended_areDeliveredByARelaunchWhenTheAppIsKilled() throws {
    let source = handlers + """
        lifeline.on('didEnterBackground', function()
          lifeline.transfers.download{url = 'http://example.org/a.bin', to = 'a.bin'}
        end)
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source),
            scenario: "0s http GET example.org/* -> 200 size=1MB rate=100KB/s\n0s launch\n1s background\n20s kill",
            stateDir: dir)
        #expect(events(recorder, "transferEnded", ["state"]) == ["11 finished"])
        #expect(events(recorder, "relaunch", ["reason"]) == ["20 transferEvents"])
        #expect(marks(recorder) == ["finish 1 background", "batch background"])
    }
}

@Test func transfer_forceQuit_cancelsEveryTransferWithUserForceQuit_andDoesNotRelaunch() throws {
    let source = handlers + """
        if not lifeline.store.get('started') then
          lifeline.store.set('started', true)
          lifeline.transfers.download{url = 'http://example.org/a.bin', to = 'a.bin'}
          lifeline.transfers.download{url = 'http://example.org/b.bin', to = 'b.bin', id = 'b'}
        end
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source),
            scenario: "0s http GET example.org/* -> 200 size=10MB rate=1MB/s\n0s launch\n2s force-quit\n30s launch",
            stateDir: dir)
        #expect(events(recorder, "transferEnded", ["transfer", "reason"]) == [
            "2 1 userForceQuit", "2 b userForceQuit",
        ])
        #expect(events(recorder, "relaunch").isEmpty)
        let got = markEvents(recorder)
        #expect(got.map(\.mark) == ["fail 1 userForceQuit", "fail b userForceQuit", "batch active"])
        #expect(got.allSatisfy { $0.time.seconds == 30 })
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/a.bin.1.partial"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/a.bin"))
    }
}

@Test func transfer_atMostFourRunAtOnce_theRestWaitInOrder() throws {
    let source = handlers + """
        for i = 1, 6 do lifeline.transfers.download{url = 'http://example.org/' .. i, to = 'f' .. i} end
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source), scenario: "0s http GET example.org/* -> 200 size=1MB rate=1MB/s\n0s launch",
            stateDir: dir)
        #expect(events(recorder, "transferStarted", ["transfer"]) == ["0 1", "0 2", "0 3", "0 4", "1 5", "1 6"])
        #expect(events(recorder, "transferEnded", ["transfer"]) == ["1 1", "1 2", "1 3", "1 4", "2 5", "2 6"])
    }
}

@Test func transfer_404FailsAtOnce_503IsRetriedWithBackoff() throws {
    let source = handlers + """
        lifeline.transfers.download{url = 'http://example.org/missing', to = 'm'}
        lifeline.transfers.download{url = 'http://example.org/busy', to = 'b'}
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source),
            scenario: """
                0s http GET example.org/missing -> 404
                0s http GET example.org/busy -> 503
                0s launch
                """, stateDir: dir)
        #expect(events(recorder, "transferEnded", ["transfer", "reason"]).first == "0 1 the server answered 404")
        // 5 attempts, 4 waits of about 1, 2, 4, 8 s (±20 %), then a clear reason.
        let retries = recorder.timeline.filter { $0.event == "transferRetrying" }
        #expect(retries.count == 4)
        for (i, retry) in retries.enumerated() {
            guard case .number(let text)? = retry["after"], let after = Double(text) else {
                Issue.record("no delay")
                continue
            }
            let base = pow(2, Double(i))
            #expect(after >= base * 0.8 && after <= base * 1.2)
        }
        #expect(
            events(recorder, "transferEnded", ["transfer", "reason"]).last?.hasSuffix(
                "2 gave up after 5 attempts: the server answered 503") == true)
        #expect(marks(recorder).prefix(2) == ["fail 1 the server answered 404", "batch active"])
    }
}

@Test func transfer_sha256_isChecked_aMismatchFailsAndLeavesNoFile() throws {
    let zeros1000 = "541b3e9daa09b20bf85fa273e5cbd3e80185aa4ec298e765db87742b70138a53"
    let source = handlers + """
        lifeline.transfers.download{url = 'http://example.org/z', to = 'good', sha256 = '\(zeros1000)'}
        lifeline.transfers.download{url = 'http://example.org/z', to = 'bad', sha256 = string.rep('0', 64)}
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source), scenario: "0s http GET example.org/z -> 200 size=1000\n0s launch", stateDir: dir)
        let got = marks(recorder)
        #expect(got.contains("finish 1 active"))
        #expect(got.contains { $0.hasPrefix("fail 2 sha256 mismatch: expected 0000") })
        #expect(fileSize(dir + "/files/p/good") == 1000)
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/bad"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/bad.2.partial"))
    }
}

@Test func transfer_aHostStartedAgainResumesWithRange_fromTheBytesInThePartialFile() throws {
    let source = handlers + """
        if not lifeline.store.get('started') then
          lifeline.store.set('started', true)
          lifeline.transfers.download{url = 'http://example.org/a.bin', to = 'a.bin'}
        end
        """
    try withStateDir { dir in
        let scenario = "0s http GET example.org/* -> 200 size=10MB rate=1MB/s\n0s launch"
        // The first host stops at 4 s, mid-transfer, as a killed `lifeline run` would.
        let first = try simulate(transferPlugin(source), scenario: scenario, stateDir: dir, until: .seconds(4))
        #expect(events(first, "transferEnded").isEmpty)
        let partial = fileSize(dir + "/files/p/a.bin.1.partial") ?? 0
        #expect(partial >= 3_000_000 && partial <= 4_000_000)
        let second = try simulate(transferPlugin(source), scenario: scenario, stateDir: dir)
        #expect(events(second, "transferResumed", ["transfer"]) == ["0 1"])
        #expect(events(second, "transferStarted", ["transfer", "from"]) == ["0 1 \(partial)"])
        #expect(marks(second) == ["finish 1 active", "batch active"])
        #expect(fileSize(dir + "/files/p/a.bin") == 10_000_000)
    }
}

@Test func transfer_badInput_getsClearErrors() throws {
    let cases: [(String, String)] = [
        ("lifeline.transfers.download{url = 'http://example.org/a', to = '../x'}", "leaves the plugin's files folder"),
        ("lifeline.transfers.download{url = 'http://example.org/a', to = '/etc/passwd'}", "is an absolute path"),
        ("lifeline.transfers.download{url = 'ftp://example.org/a', to = 'x'}", "is not an http:// or https:// URL"),
        ("lifeline.transfers.download{url = 'http://other.org/a', to = 'x'}", "may not reach other.org:80"),
        ("lifeline.transfers.download{to = 'x'}", "field 'url' is required"),
        ("lifeline.transfers.download{url = 'http://example.org/a', to = 'x', sha256 = 'abc'}", "64 hexadecimal"),
        ("lifeline.transfers.upload{url = 'http://example.org/a', from = 'nothing'}", "does not exist"),
        ("lifeline.transfers.upload{url = 'http://example.org/a', from = 'x', method = 'GET'}", "PUT or POST"),
        ("lifeline.transfers.download('x')", "table expected"),
        ("lifeline.transfers.download{url = 'http://example.org/a', to = 'x', id = '12'}", "must not be all digits"),
        (
            "lifeline.transfers.download{url = 'http://example.org/a', to = 'x'} "
                + "lifeline.transfers.download{url = 'http://example.org/b', to = './x'}",
            "another unfinished transfer is downloading to 'x'"
        ),
    ]
    for (call, expected) in cases {
        let source = "local ok, err = pcall(function() \(call) end) mark(tostring(ok) .. ' ' .. tostring(err))"
        try withStateDir { dir in
            let recorder = try simulate(transferPlugin(source), scenario: "0s launch", stateDir: dir)
            let got = marks(recorder).first ?? ""
            #expect(got.hasPrefix("false ") && got.contains(expected), "\(call): \(got)")
        }
    }
}

@Test func transfer_listAndCancel_cancelGivesTransferDidFailWithCancelled() throws {
    let source = handlers + """
        local a = lifeline.transfers.download{url = 'http://example.org/a', to = 'a'}
        lifeline.transfers.download{url = 'http://example.org/b', to = 'b', id = 'keep'}
        mark('again ' .. lifeline.transfers.download{url = 'http://example.org/b', to = 'b', id = 'keep'})
        mark('cancel ' .. tostring(lifeline.transfers.cancel(a)) .. ' ' .. tostring(lifeline.transfers.cancel('nope')))
        for _, t in ipairs(lifeline.transfers.list()) do
          mark(t.id .. ' ' .. t.kind .. ' ' .. t.state .. ' ' .. t.file .. ' ' .. (t.reason or '-'))
        end
        """
    try withStateDir { dir in
        let recorder = try simulate(
            transferPlugin(source), scenario: "0s http GET example.org/* -> 200 size=1MB rate=1MB/s\n0s launch",
            stateDir: dir)
        #expect(
            marks(recorder) == [
                "again keep", "cancel true false", "1 download cancelled a cancelled", "keep download running b -",
                "fail 1 cancelled", "batch active", "finish keep active", "batch active",
            ])
    }
}

@Test func transfer_sameInputsGiveAByteIdenticalReport() throws {
    let source = handlers + """
        lifeline.transfers.download{url = 'http://example.org/busy', to = 'b', id = 'busy'}
        lifeline.transfers.download{url = 'http://example.org/a', to = 'a', id = 'a'}
        """
    let scenario = """
        0s http GET example.org/busy -> 503
        0s http GET example.org/a -> 200 size=5MB rate=1MB/s
        0s launch
        2s kill
        """
    let reports = try (0..<2).map { _ in
        try withStateDir { dir in
            try simulate(transferPlugin(source), scenario: scenario, stateDir: dir).report().serialized(pretty: true)
        }
    }
    #expect(reports[0] == reports[1])
    #expect(reports[0].contains("transferRetrying"))
}
