import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 7: bad input in Lua plugins gets a clear message and a documented exit code, and never
// crashes the host or costs another plugin its work.

// MARK: - Loading (exit 65)

@Test func badInput_syntaxErrorInInitLua_is65WithFileAndLine() throws {
    let error = try #require(try simulationError(["p/init.lua": "local a = 1\nlocal b = 2\nlocal c = = 3\n"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("init.lua:3:"), "message: \(error.message)")
}

@Test func badInput_unfinishedFunctionInInitLua_is65WithFileAndLine() throws {
    let error = try #require(
        try simulationError(["p/init.lua": "lifeline.on('didBecomeActive', function()\n  local x = 1\n"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("init.lua:"), "message: \(error.message)")
    #expect(error.message.contains("'end' expected"), "message: \(error.message)")
}

@Test func badInput_runtimeErrorWhileLoading_is65WithFileAndLine() throws {
    let error = try #require(try simulationError(["p/init.lua": "local a = nil\nlocal b = a.field\n"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("init.lua:2:"), "message: \(error.message)")
    #expect(error.message.contains("attempt to index"), "message: \(error.message)")
}

@Test func badInput_errorCallWhileLoading_is65WithTheMessage() throws {
    let error = try #require(try simulationError(["p/init.lua": "\n\nerror('refusing to load')\n"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("init.lua:3: refusing to load"), "message: \(error.message)")
}

@Test func badInput_errorWithATableWhileLoading_is65() throws {
    let error = try #require(try simulationError(["p/init.lua": "error({code = 1})\n"]))
    #expect(error.exitCode == 65)
    #expect(!error.message.isEmpty)
}

@Test func badInput_binaryChunkAsInitLua_is65() throws {
    let error = try #require(
        try simulationError([:], binary: ["p/init.lua": binaryChunk(of: "lifeline.on('didBecomeActive', function() end)")]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("binary"), "message: \(error.message)")
    #expect(error.message.contains("init.lua"), "message: \(error.message)")
}

@Test func badInput_fakeBinaryHeaderAsInitLua_is65() throws {
    let error = try #require(try simulationError(["p/init.lua": "\u{1B}Lua garbage"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("binary"), "message: \(error.message)")
}

@Test func badInput_loadFailureOfOnePlugin_stopsTheSimulationBeforeAnyStep() throws {
    // simulate aborts on the first plugin that fails to load (exit 65), whatever the others do.
    let error = try #require(
        try simulationError(
            plugins(["a": "lifeline.on('didBecomeActive', function() mark('a') end)", "b": "error('b is broken')"])))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("b is broken"))
}

@Test func badInput_missingPluginsFolder_is65() throws {
    let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-\(UUID().uuidString)").path
    let error = #expect(throws: LifelineError.self) { _ = try LuaPluginLoader.descriptors(in: missing) }
    #expect(error?.exitCode == 65)
    #expect(error?.message.contains(missing) == true)
}

@Test func badInput_pluginsPathIsAFile_is65() throws {
    try withPluginFolder(["file.txt": "not a folder"]) { dir in
        let error = #expect(throws: LifelineError.self) { _ = try LuaPluginLoader.descriptors(in: dir + "/file.txt") }
        #expect(error?.exitCode == 65)
    }
}

/// A plugin.toml that is not valid, and the line its message must name.
struct BadManifest: Sendable, CustomTestStringConvertible {
    var text: String
    var line: Int
    var testDescription: String { text.replacingOccurrences(of: "\n", with: "⏎") }
}

@Test(arguments: [
    BadManifest(text: "version = \"1.0\"\nversion = = 2\n", line: 2),
    BadManifest(text: "[limits]\nmemory = \"lots\"\n", line: 2),
    BadManifest(text: "description = \"x\"\n\n[limits]\nstack = 3\n", line: 4),
    BadManifest(text: "colour = \"blue\"\n", line: 1),
    BadManifest(text: "version = 1\n", line: 1),
    BadManifest(text: "[limits]\nmemory = \"1KiB\"\n", line: 2),
    BadManifest(text: "[permissions]\nnetwork = \"example.com:443\"\n", line: 2),
    BadManifest(text: "[limits\nmemory = 1\n", line: 1),
])
func badInput_invalidPluginToml_is65WithFileAndLine(_ bad: BadManifest) throws {
    try withPluginFolder(["p/init.lua": "", "p/plugin.toml": bad.text]) { dir in
        do throws(LifelineError) {
            try loadDescriptors(in: dir)
            Issue.record("plugin.toml was accepted")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.contains("plugin.toml:\(bad.line)"), "message: \(error.message)")
        }
    }
}

@Test func badInput_pluginTomlThatIsNotUTF8_is65WithTheFile() throws {
    try withPluginFolder(["p/init.lua": ""], binary: ["p/plugin.toml": [0x76, 0x3D, 0xFF, 0xFE, 0x0A]]) { dir in
        do throws(LifelineError) {
            try loadDescriptors(in: dir)
            Issue.record("plugin.toml was accepted")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.contains("plugin.toml:"), "message: \(error.message)")
        }
    }
}

// MARK: - Handlers (pluginError, exit 1)

@Test func badInput_runtimeErrorInHandler_isAPluginErrorWithTraceback() throws {
    let source = """
        lifeline.on("didEnterBackground", function()
          local t = nil
          return t.x
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    let error = try #require(errors.first)
    #expect(error.plugin == "p")
    #expect(error.message.contains("init.lua:3:"), "message: \(error.message)")
    #expect(error.message.contains("attempt to index"), "message: \(error.message)")
    #expect(error.traceback.contains("stack traceback"), "traceback: \(error.traceback)")
    #expect(error.traceback.contains("init.lua"), "traceback: \(error.traceback)")
    #expect(recorder.exitCode == 1)
    #expect(recorder.termination == nil)
}

@Test func badInput_runtimeErrorInHandler_otherPluginsStillGetTheEvent() throws {
    let recorder = try simulate(
        plugins([
            "a": "lifeline.on('didEnterBackground', function() error('a fails') end)",
            "b": "lifeline.on('didEnterBackground', function() mark('b got it') end)",
        ]),
        scenario: "0s launch\n1s background")
    #expect(markEvents(recorder).map { "\($0.plugin)=\($0.mark)" } == ["b=b got it"])
    #expect(pluginErrors(recorder).map(\.plugin) == ["a"])
    #expect(recorder.exitCode == 1)
}

@Test func badInput_runtimeErrorInHandler_laterHandlersOfTheSamePluginStillRun() throws {
    let source = """
        lifeline.on('didEnterBackground', function() error('first fails') end)
        lifeline.on('didEnterBackground', function() mark('second ran') end)
        lifeline.on('willEnterForeground', function() mark('later event') end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background\n2s foreground")
    #expect(marks(recorder) == ["second ran", "later event"])
    #expect(pluginErrors(recorder).count == 1)
}

@Test func badInput_errorWithANonStringValue_isAPluginError() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didEnterBackground', function() error({code = 42}) end)"]),
        scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("table") == true, "message: \(errors.first?.message ?? "none")")
}

@Test func badInput_errorWithTostringMetamethod_usesIt() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          error(setmetatable({}, {__tostring = function() return "custom error" end}))
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(pluginErrors(recorder).first?.message.contains("custom error") == true)
}

@Test func badInput_runtimeErrorInTimer_isAPluginError() throws {
    let recorder = try simulate(plugins(["p": "lifeline.after(1, function() error('timer fails') end)"]))
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("timer fails") == true)
    #expect(errors.first?.traceback.contains("init.lua") == true)
}

@Test func badInput_runtimeErrorInExpirationHandler_isAPluginError() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local id
          id = lifeline.beginBackgroundTask('t', function()
            lifeline.endBackgroundTask(id)
            error('expiration fails')
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(pluginErrors(recorder).first?.message.contains("expiration fails") == true)
    #expect(recorder.termination == nil)
}

/// Ways to recurse without end; every one must end in a "stack overflow" Lua error.
@Test(arguments: [
    "local function f() return 1 + f() end\nf()",
    "local function f(n) local a, b, c = n, n, n; return f(n + 1) + a + b + c end\nf(1)",
    "local t = setmetatable({}, {})\ngetmetatable(t).__index = function(s, k) return s[k] end\nlocal _ = t.x",
    "local function f() return tostring(setmetatable({}, {__tostring = f})) end\nf()",
])
func badInput_infiniteRecursion_isAStackOverflowError(_ recursion: String) throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didEnterBackground', function()\n\(recursion)\nend)"]),
        scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.message.contains("stack overflow") == true, "message: \(errors.first?.message ?? "none")")
    #expect(recorder.termination == nil)
}

@Test func badInput_infiniteRecursionWhileLoading_is65WithStackOverflow() throws {
    let error = try #require(try simulationError(["p/init.lua": "local function f() return 1 + f() end\nf()\n"]))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("stack overflow"), "message: \(error.message)")
}

@Test func badInput_infiniteRecursion_leavesThePluginUsable() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local function f() return 1 + f() end
          f()
        end)
        lifeline.on('willEnterForeground', function() mark('still alive') end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background\n2s foreground")
    #expect(marks(recorder) == ["still alive"])
}

@Test func badInput_pluginErrorInOneLaunch_doesNotCarryOverToTheNext() throws {
    // After terminate, a new launch runs init.lua again in a fresh state (SPEC 2.2).
    let source = """
        count = (count or 0) + 1
        mark("load " .. count)
        lifeline.on('didBecomeActive', function() error('boom') end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s terminate\n2s launch")
    #expect(marks(recorder) == ["load 1", "load 1"])
    #expect(pluginErrors(recorder).count == 2)
}
