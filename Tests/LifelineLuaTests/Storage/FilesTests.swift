import CLuaShims
import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// lifeline.files from Lua: a plugin's own files, in `<state-dir>/files/<plugin>/`.

/// A fresh state dir, removed afterwards.
private func withStateDir<T>(_ body: (String) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lua-files-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// Runs `files` on the state dir `dir` and returns the recorder.
private func run(_ files: [String: String], scenario: String = "0s launch", stateDir dir: String) throws -> Recorder {
    try simulate(files, scenario: scenario, database: StateDatabase.open(stateDirectory: dir))
}

/// The marks of plugin "p" running `source` on a fresh state dir, with no plugin error allowed.
private func filesMarks(_ source: String, toml: String? = nil) throws -> [String] {
    try withStateDir { dir in
        var files = plugins(["p": source])
        if let toml { files["p/plugin.toml"] = toml }
        let recorder = try run(files, stateDir: dir)
        #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
        return marks(recorder)
    }
}

@Test func files_roundTrip_isBinarySafe_NULBytesIncluded() throws {
    let source = """
        local f = lifeline.files
        local data = 'a\\0b\\0\\255\\1' .. string.rep('\\0', 3)
        f.write('bin/data', data)
        local back = f.read('bin/data')
        mark(tostring(back == data) .. ' ' .. #back .. ' ' .. f.size('bin/data'))
        f.write('empty', '')
        mark('[' .. f.read('empty') .. '] ' .. f.size('empty'))
        """
    #expect(try filesMarks(source) == ["true 9 9", "[] 0"])
}

@Test func files_writtenBytesAreOnDisk_andSurviveAKillAndALaunch() throws {
    let source = """
        local f = lifeline.files
        mark(tostring(f.read('n')))
        f.write('n', (f.read('n') or '') .. 'x')
        """
    try withStateDir { dir in
        let recorder = try run(plugins(["p": source]), scenario: "0s launch\n1s kill\n2s launch", stateDir: dir)
        #expect(marks(recorder) == ["nil", "x"])
        #expect(FileManager.default.contents(atPath: dir + "/files/p/n") == Data("xx".utf8))
    }
}

@Test func files_list_isSorted_andSizeAndRemove_sayWhatIsThere() throws {
    let source = """
        local f = lifeline.files
        mark(#f.list())
        for _, name in ipairs({'b', 'a/2', 'a/10', 'C'}) do f.write(name, name) end
        mark(table.concat(f.list(), ' '))
        mark(f.size('a/10') .. ' ' .. tostring(f.size('nothing')) .. ' ' .. tostring(f.size('a')))
        mark(tostring(f.remove('b')) .. ' ' .. tostring(f.remove('b')) .. ' ' .. table.concat(f.list(), ' '))
        """
    #expect(try filesMarks(source) == ["0", "C a/10 a/2 b", "4 nil nil", "true false C a/10 a/2"])
}

@Test func files_readOfAMissingFile_isNilAndAMessage_notAnError() throws {
    let source = """
        local data, err = lifeline.files.read('nope.txt')
        mark(tostring(data)); mark(err)
        """
    #expect(try filesMarks(source) == ["nil", "'nope.txt' does not exist in the plugin's files folder"])
}

@Test(arguments: [
    ("lifeline.files.write(1, 'x')", "bad argument #1 to 'lifeline.files.write' (string expected, got number)"),
    ("lifeline.files.write('a', 12)", "bad argument #2 to 'lifeline.files.write' (string expected, got number)"),
    ("lifeline.files.write('a')", "bad argument #2 to 'lifeline.files.write' (string expected, got no value)"),
    ("lifeline.files.read({})", "bad argument #1 to 'lifeline.files.read' (string expected, got table)"),
    ("lifeline.files.remove(nil)", "bad argument #1 to 'lifeline.files.remove' (string expected, got nil)"),
    ("lifeline.files.size(true)", "bad argument #1 to 'lifeline.files.size' (string expected, got boolean)"),
    ("lifeline.files.read('\\xff')", "bad argument #1 to 'lifeline.files.read' (a file name must be UTF-8 text)"),
    ("lifeline.files.write('/etc/x', 'x')", "lifeline.files.write: '/etc/x' is an absolute path"),
    ("lifeline.files.read('../q/init.lua')", "lifeline.files.read: '../q/init.lua' leaves the plugin's files folder"),
    ("lifeline.files.size('a/../../x')", "'..' is not allowed"),
    ("lifeline.files.write('a\\0b', 'x')", "lifeline.files.write: a file name must not contain NUL"),
    ("lifeline.files.remove('')", "lifeline.files.remove: a file name must not be empty"),
    ("lifeline.files.write('.lifeline-tmp-1', 'x')", "are the host's"),
])
func files_badArguments_raiseALuaErrorThatNamesTheCall(_ call: String, _ expected: String) throws {
    let result = try filesMarks("local ok, err = pcall(function() \(call) end); mark(tostring(ok)); mark(tostring(err))")
    #expect(result.first == "false")
    #expect(result.last?.contains(expected) == true, "\(result)")
}

@Test func files_aLinkThatLeadsOutside_isRefused_andTheFolderBeingALinkToo() throws {
    try withStateDir { dir in
        try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/outside/secret", contents: Data("s".utf8))
        try FileManager.default.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir + "/files/p/out", withDestinationPath: dir + "/outside")
        // Plugin q's whole folder is a link to p's.
        try FileManager.default.createSymbolicLink(atPath: dir + "/files/q", withDestinationPath: dir + "/files/p")
        let source = """
            for _, call in ipairs({
              function() return lifeline.files.read('out/secret') end,
              function() return lifeline.files.write('out/new', 'x') end,
            }) do
              local ok, err = pcall(call); mark(tostring(ok) .. ' ' .. err)
            end
            """
        let probe = "local ok, err = pcall(lifeline.files.list); mark(tostring(ok) .. ' ' .. err)"
        let recorder = try run(plugins(["p": source, "q": probe]), stateDir: dir)
        let got = markEvents(recorder)
        #expect(got.filter { $0.plugin == "p" }.allSatisfy { $0.mark.hasPrefix("false") && $0.mark.contains("leads outside") })
        #expect(got.filter { $0.plugin == "p" }.count == 2)
        let q = got.filter { $0.plugin == "q" }.map(\.mark)
        #expect(q.count == 1)
        #expect(q.first?.hasPrefix("false") == true && q.first?.contains("files folder is a link") == true, "\(q)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: dir + "/outside")) == ["secret"])
    }
}

@Test func files_overTheQuota_raises_andKeepsTheOldFile() throws {
    let source = """
        local f = lifeline.files
        f.write('a', string.rep('a', 600))
        local ok, err = pcall(f.write, 'a', string.rep('b', 2000))
        mark(tostring(ok)); mark(err)
        mark(#f.read('a') .. ' ' .. f.read('a'):sub(1, 1) .. ' ' .. table.concat(f.list(), ','))
        f.write('a', string.rep('c', 1024))
        mark(f.size('a'))
        """
    let result = try filesMarks(source, toml: "[limits]\nfiles = \"1KiB\"\n")
    try #require(result.count == 4, "\(result)")
    #expect(result[0] == "false")
    #expect(
        result[1].hasSuffix(
            "lifeline.files.write: plugin 'p' would keep 2 KB in its files folder, over its quota of 1 KiB (set "
                + "another with [limits] files in plugin.toml)"), "\(result[1])")
    #expect(result[2] == "600 a a")
    #expect(result[3] == "1024")
}

@Test func files_eachPluginSeesOnlyItsOwnFolder() throws {
    try withStateDir { dir in
        let recorder = try run(
            plugins([
                "a": "lifeline.files.write('secret', 'from a')",
                "b": """
                    mark(#lifeline.files.list()); mark(tostring(lifeline.files.read('secret')))
                    mark(tostring(pcall(lifeline.files.read, '../a/secret')))
                    lifeline.files.write('secret', 'from b')
                    """,
            ]), stateDir: dir)
        #expect(marks(recorder) == ["0", "nil", "false"])
        #expect(FileManager.default.contents(atPath: dir + "/files/a/secret") == Data("from a".utf8))
        #expect(FileManager.default.contents(atPath: dir + "/files/b/secret") == Data("from b".utf8))
    }
}

@Test func files_aReadPastTheMemoryCap_isAMemoryErrorInThatPluginAlone() throws {
    try withStateDir { dir in
        try FileManager.default.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
        // What a download could have brought: 4 MiB, for a plugin capped at 1 MiB.
        FileManager.default.createFile(atPath: dir + "/files/p/big.bin", contents: Data(count: 4 << 20))
        FileManager.default.createFile(atPath: dir + "/files/p/small.bin", contents: Data(count: 100_000))
        var files = plugins([
            "p": """
                local ok, err = pcall(lifeline.files.read, 'big.bin')
                mark(tostring(ok)); mark(err)
                mark(#lifeline.files.read('small.bin'))
                lifeline.on('didBecomeActive', function() lifeline.files.read('big.bin') end)
                """,
            "q": "lifeline.on('didBecomeActive', function() mark('q still runs') end)",
        ])
        files["p/plugin.toml"] = "[limits]\nmemory = \"1MiB\"\n"
        let recorder = try run(files, stateDir: dir)
        #expect(marks(recorder).prefix(3) == ["false", "not enough memory", "100000"])
        #expect(marks(recorder).contains("q still runs"))
        let errors = pluginErrors(recorder)
        #expect(errors.count == 1)
        #expect(errors.first?.plugin == "p")
        #expect(errors.first?.message.contains("not enough memory") == true, "\(errors)")
    }
}

@Test func files_aFileThePluginWrote_isUploaded() throws {
    let source = """
        lifeline.on('transferDidFinish', function(e) mark('finish ' .. e.id) end)
        lifeline.on('transferDidFail', function(e) mark('fail ' .. e.id .. ' ' .. e.reason) end)
        lifeline.on('didEnterBackground', function()
          lifeline.files.write('outbox/report.json', '{"edits": 3}\\0' .. string.rep('x', 1000))
          mark('upload ' .. lifeline.transfers.upload{url = 'http://example.org/reports', from = 'outbox/report.json'})
        end)
        """
    try withStateDir { dir in
        var files = plugins(["p": source])
        files["p/plugin.toml"] = "[permissions]\nnetwork = [\"example.org:*\"]\n"
        let recorder = try run(
            files, scenario: "0s http PUT example.org/reports -> 200 in 2s\n0s launch\n1s background\n5s foreground", stateDir: dir)
        #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
        #expect(marks(recorder) == ["upload 1", "finish 1"])
        // The whole file the plugin wrote went up: 13 bytes of JSON and NUL, and 1000 more.
        let progress = recorder.timeline.filter { $0.event == "transferProgress" }
        #expect(progress.last?["total"] == .int(1013))
        #expect(recorder.timeline.contains { $0.event == "transferEnded" && $0["state"] == .string("finished") })
    }
}

@Test func files_registryStaysWithinTheTrampolineSlots() {
    // Past the slots, functions are pushed as closures: correct, but each costs an object per state.
    var count = 0
    while LuaModule.registry[count].name != nil { count += 1 }
    #expect(count <= 130, "\(count) functions")
}
