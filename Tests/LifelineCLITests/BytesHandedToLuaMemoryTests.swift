import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

// The memory rule for every call that hands bytes to Lua: a plugin capped at C grows the host by
// no more than C plus about 1 MiB, so no call may hold what it hands over twice beyond the cap.
// Each test measures the peak resident memory of `simulate` (wait4's ru_maxrss, the child's own
// figure) with a plugin that makes the call, against the same run with a plugin that does not.

/// A workspace with two plugin folders, `calm` and `hostile`, each holding plugin "p", and one
/// state dir they share (so a file or a stored value made beforehand is there for both).
private final class Pair {
    let ws: Workspace
    var state: String { ws.path + "/state" }

    init(calm: String, hostile: String, toml: String) throws {
        ws = try Workspace()
        for (folder, source) in [("calm", calm), ("hostile", hostile)] {
            let dir = ws.path + "/" + folder + "/p"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try source.write(toFile: dir + "/init.lua", atomically: true, encoding: .utf8)
            try toml.write(toFile: dir + "/plugin.toml", atomically: true, encoding: .utf8)
        }
    }

    /// Runs the plugins of `folder` once, checking that they ran to the end.
    func run(_ folder: String, scenario: String, fresh: Bool = false) throws -> Int {
        if fresh { try? FileManager.default.removeItem(atPath: state) }
        let r = try CLI.runMeasuringPeakMemory([
            "simulate", "--plugins", ws.path + "/" + folder, "--scenario", scenario, "--state-dir", state,
            "--report", ws.path + "/r.json",
        ])
        #expect(r.status == 0, "\(folder): a plugin's assert failed or the host did not finish")
        let report = (try? String(contentsOfFile: ws.path + "/r.json", encoding: .utf8)) ?? ""
        #expect(!report.contains("\"pluginError\""), "\(folder): \(report.prefix(2000))")
        return r.peakKiB
    }

    /// How much more the hostile plugin's run peaks than the calm one's (KiB), each the lowest of
    /// three runs, so a slow moment of the machine does not count.
    /// With `fresh`, each run starts on an empty state dir.
    func growth(scenario: String = "0s launch\n1s background\n", fresh: Bool = false) throws -> Int {
        let path = try ws.file("s.scenario", scenario)
        let calm = try (0..<3).map { _ in try run("calm", scenario: path, fresh: fresh) }.min()!
        let hostile = try (0..<3).map { _ in try run("hostile", scenario: path, fresh: fresh) }.min()!
        return hostile - calm
    }
}

private let MiB = 1024 * 1024

@Suite(.serialized) struct BytesHandedToLuaMemoryTests {
    /// A 30 MB file read under a 32 MiB cap was held twice (a Swift array, then the Lua string):
    /// the host grew by 57 MiB. It is now read straight into the Lua string.
    @Test func filesRead_30MB_underA32MiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let size = 30_000_000, cap = 32
        let pair = try Pair(
            calm: "lifeline.on('didFinishLaunching', function() assert(lifeline.files.size('big') == \(size)) end)",
            hostile: """
                lifeline.on('didFinishLaunching', function()
                  local data = lifeline.files.read('big')
                  assert(#data == \(size) and data:sub(-5) == 'tail!' and data:sub(1, 5) == 'head!')
                end)
                """,
            toml: "[limits]\nmemory = \"\(cap)MiB\"\n")
        let folder = pair.state + "/files/p"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var bytes = Data(count: size)
        bytes.replaceSubrange(0..<5, with: Data("head!".utf8))
        bytes.replaceSubrange((size - 5)..<size, with: Data("tail!".utf8))
        try bytes.write(to: URL(fileURLWithPath: folder + "/big"))
        let growth = try pair.growth()
        print("files.read of 30 MB, cap 32 MiB: the host grew by \(growth) KiB")
        #expect(growth <= cap * 1024 + 1024, "the host grew by \(growth) KiB")
    }

    /// A stored string of 12 MB read under a 32 MiB cap: the stored text, the parsed value and the
    /// Lua string each held it.
    @Test func storeGet_12MB_underA32MiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let size = 12_000_000, cap = 32
        let toml = "[limits]\nmemory = \"\(cap)MiB\"\nstore = \"64MiB\"\n"
        let pair = try Pair(
            calm: "lifeline.on('didFinishLaunching', function() assert(#lifeline.store.keys() == 1) end)",
            hostile: """
                lifeline.on('didFinishLaunching', function()
                  local ok, value = pcall(lifeline.store.get, 'big')
                  assert(ok and #value == \(size) or value == 'not enough memory', tostring(value))
                end)
                """,
            toml: toml)
        // The value is stored beforehand, by a run with room to spare.
        let setup = pair.ws.path + "/setup/p"
        try FileManager.default.createDirectory(atPath: setup, withIntermediateDirectories: true)
        try "lifeline.store.set('big', string.rep('v', \(size)))".write(
            toFile: setup + "/init.lua", atomically: true, encoding: .utf8)
        try "[limits]\nmemory = \"256MiB\"\nstore = \"64MiB\"\n".write(
            toFile: setup + "/plugin.toml", atomically: true, encoding: .utf8)
        _ = try pair.run("setup", scenario: try pair.ws.file("setup.scenario", "0s launch\n"))
        let growth = try pair.growth()
        print("store.get of 12 MB, cap 32 MiB: the host grew by \(growth) KiB")
        #expect(growth <= cap * 1024 + 1024, "the host grew by \(growth) KiB")
    }

    /// An HTTP response of 10 MB (a request's most) under a 16 MiB cap: the host's copy of the body
    /// and the Lua string are both alive while it is handed over, so both count.
    @Test func httpBody_10MB_underA16MiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let size = 10_000_000, cap = 16
        let pair = try Pair(
            calm: "lifeline.on('didFinishLaunching', function() end)",
            hostile: """
                lifeline.on('didFinishLaunching', function()
                  lifeline.background('get', function()
                    local ok, r = pcall(lifeline.http.request, {url = 'http://example.org/big'})
                    assert(ok and #r.body == \(size) or r == 'not enough memory', tostring(r))
                  end)
                end)
                """,
            toml: "[limits]\nmemory = \"\(cap)MiB\"\n[permissions]\nnetwork = [\"example.org:*\"]\n")
        let growth = try pair.growth(scenario: "0s http GET example.org/* -> 200 size=\(size)\n0s launch\n5s background\n")
        print("an HTTP body of 10 MB, cap 16 MiB: the host grew by \(growth) KiB")
        #expect(growth <= cap * 1024 + 1024, "the host grew by \(growth) KiB")
    }

    /// lifeline.json.decode of a 12 MB string under a 32 MiB cap: the text is the plugin's own, and
    /// the decoded string is made in the plugin's state, under the cap.
    @Test func jsonDecode_12MB_underA32MiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let cap = 32
        let pair = try Pair(
            calm: """
                lifeline.on('didFinishLaunching', function()
                  local text = '["' .. string.rep('j', 12000000) .. '\\\\n"]'
                  assert(#text == 12000006)
                end)
                """,
            hostile: """
                lifeline.on('didFinishLaunching', function()
                  local text = '["' .. string.rep('j', 12000000) .. '\\\\n"]'
                  local ok, value = pcall(lifeline.json.decode, text)
                  assert(ok and #value[1] == 12000001 or value == 'not enough memory', tostring(value))
                end)
                """,
            toml: "[limits]\nmemory = \"\(cap)MiB\"\n")
        let growth = try pair.growth()
        print("json.decode of 12 MB, cap 32 MiB: the host grew by \(growth) KiB more than making the text")
        #expect(growth <= cap * 1024 + 1024, "the host grew by \(growth) KiB")
    }

    /// files.list of 5,000 files with 200-byte names under a 256 KiB cap: the names would take
    /// about 1 MB in Lua, so the call raises Lua's memory error, and the host must not have built a
    /// list of them beyond the cap first.
    @Test func filesList_ofManyLongNames_underA256KiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let cap = 256
        let pair = try Pair(
            calm: "lifeline.on('didFinishLaunching', function() assert(lifeline.files.size('n-1') == 0) end)",
            hostile: """
                lifeline.on('didFinishLaunching', function()
                  local ok, names = pcall(lifeline.files.list)
                  assert(not ok and names == 'not enough memory', tostring(names))
                end)
                """,
            toml: "[limits]\nmemory = \"\(cap)KiB\"\n")
        let folder = pair.state + "/files/p"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let pad = String(repeating: "x", count: 200)
        for i in 1...5000 { FileManager.default.createFile(atPath: folder + "/n-\(i)" + (i == 1 ? "" : pad), contents: nil) }
        let growth = try pair.growth()
        print("files.list of 5,000 long names, cap 256 KiB: the host grew by \(growth) KiB")
        #expect(growth <= cap + 1024, "the host grew by \(growth) KiB")
    }

    /// lifeline.transfers.list under a 4 MiB cap, over 100 downloads with 4 KB URLs, called until
    /// it raises: the records the host reads from the ledger, and each Lua table, are bounded by
    /// the cap. The calm run starts the same downloads, so only the lists count.
    @Test func transfersList_underA4MiBCap_growsTheHostByTheCapPlus1MiBAtMost() throws {
        let cap = 4
        let start = """
            local function start()
              for i = 1, 100 do
                lifeline.transfers.download{url = 'http://example.org/' .. string.rep('u', 4000) .. i, to = 'f' .. i}
              end
            end
            """
        let pair = try Pair(
            calm: start + "\nlifeline.on('didFinishLaunching', start)\n",
            hostile: start + """

                lifeline.on('didFinishLaunching', function()
                  start()
                  local keep, ok, err = {}, true, nil
                  while ok and #keep < 10000 do
                    ok, err = pcall(function() keep[#keep + 1] = lifeline.transfers.list() end)
                  end
                  assert(#keep > 1 and #keep[1] == 100, tostring(#keep))
                  assert(err == 'not enough memory', tostring(err))
                  keep = nil
                end)
                """,
            toml: "[limits]\nmemory = \"\(cap)MiB\"\n[permissions]\nnetwork = [\"example.org:*\"]\n")
        let growth = try pair.growth(
            scenario: "0s http GET example.org/* -> 200 size=10 in 100s\n0s launch\n1s background\n", fresh: true)
        print("transfers.list until it raises, cap 4 MiB: the host grew by \(growth) KiB")
        #expect(growth <= cap * 1024 + 1024, "the host grew by \(growth) KiB")
    }
}
