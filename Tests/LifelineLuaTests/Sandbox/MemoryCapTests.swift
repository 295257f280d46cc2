import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 6.3 (Memory) and 7 (a memory bomb): each plugin has a cap; allocation beyond it fails as a
// Lua memory error in that plugin alone.

/// Allocates until the state runs out of memory.
private let bomb = """
    local t, i = {}, 0
    while true do i = i + 1; t[i] = string.rep("x", 1024) .. i end
    """

private func manifest(memory: String) -> String { "[limits]\nmemory = \"\(memory)\"\n" }

@Test func memory_bombInHandler_isAPluginErrorMentioningMemory() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didEnterBackground', function()\n\(bomb)\nend)"]),
        scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(errors.count == 1)
    #expect(errors.first?.plugin == "p")
    #expect(errors.first?.message.contains("memory") == true, "message: \(errors.first?.message ?? "none")")
    #expect(recorder.termination == nil)
    #expect(recorder.exitCode == 1)
}

@Test func memory_bombInHandler_namesTheDefaultCap() throws {
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didEnterBackground', function()\n\(bomb)\nend)"]),
        scenario: "0s launch\n1s background")
    #expect(pluginErrors(recorder).first?.message.contains("32 MiB") == true)
}

@Test func memory_bombInOnePlugin_otherPluginStillGetsTheEvent() throws {
    let recorder = try simulate(
        plugins([
            "a-bomb": "lifeline.on('didEnterBackground', function()\n\(bomb)\nend)",
            "b-ok": "lifeline.on('didEnterBackground', function() mark('b got it') end)",
        ]),
        scenario: "0s launch\n1s background")
    #expect(markEvents(recorder).map { "\($0.plugin)=\($0.mark)" } == ["b-ok=b got it"])
    #expect(pluginErrors(recorder).map(\.plugin) == ["a-bomb"])
}

@Test func memory_afterABomb_theStateStaysUsable() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
        \(bomb)
        end)
        lifeline.on('willEnterForeground', function()
          local t = {}
          for i = 1, 1000 do t[i] = string.rep("y", 100) end
          mark("alive " .. #t)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background\n2s foreground")
    #expect(marks(recorder) == ["alive 1000"])
    #expect(pluginErrors(recorder).count == 1)
}

@Test func memory_bombCaughtByPcall_leavesThePluginRunning() throws {
    let source = """
        local ok, err = pcall(function()
        \(bomb)
        end)
        mark(tostring(ok)); mark(err)
        """
    let result = try marksOf(source)
    #expect(result.first == "false")
    #expect(result.last?.contains("memory") == true)
}

@Test func memory_manifestLimit_lowersTheCap() throws {
    // 2 MiB fits the default 32 MiB cap but not a 1 MiB one.
    let source = "local ok = pcall(string.rep, 'x', 2 * 1024 * 1024); mark(tostring(ok))"
    var capped = plugins(["p": source])
    capped["p/plugin.toml"] = manifest(memory: "1MiB")
    #expect(marks(try simulate(capped)) == ["false"])
    #expect(marks(try simulate(plugins(["p": source]))) == ["true"])
}

@Test func memory_manifestLimit_isNamedInTheError() throws {
    var files = plugins(["p": "lifeline.on('didEnterBackground', function()\n\(bomb)\nend)"])
    files["p/plugin.toml"] = manifest(memory: "1MiB")
    let recorder = try simulate(files, scenario: "0s launch\n1s background")
    let message = pluginErrors(recorder).first?.message ?? ""
    #expect(message.contains("memory"))
    #expect(message.contains("1 MiB"), "message: \(message)")
}

@Test func memory_manifestLimit_appliesToOnePluginOnly() throws {
    let source = "local ok = pcall(string.rep, 'x', 2 * 1024 * 1024); mark(tostring(ok))"
    var files = plugins(["a": source, "b": source])
    files["a/plugin.toml"] = manifest(memory: "1MiB")
    let recorder = try simulate(files)
    #expect(markEvents(recorder).map { "\($0.plugin)=\($0.mark)" } == ["a=false", "b=true"])
}

@Test func memory_manifestLimitAsInteger_isBytes() throws {
    var files = plugins(["p": "local ok = pcall(string.rep, 'x', 2 * 1024 * 1024); mark(tostring(ok))"])
    files["p/plugin.toml"] = "[limits]\nmemory = 1048576\n"
    #expect(marks(try simulate(files)) == ["false"])
}

@Test func memory_manifestLimitAboveTheHostMaximum_isALoadFailure() throws {
    var files = plugins(["p": ""])
    files["p/plugin.toml"] = manifest(memory: "1GiB")
    let error = try #require(try simulationError(files))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("plugin.toml:2"), "message: \(error.message)")
}

@Test func memory_smallestManifestLimit_stillLoadsAPlugin() throws {
    var files = plugins(["p": "mark('loaded')"])
    files["p/plugin.toml"] = manifest(memory: "64KiB")
    #expect(marks(try simulate(files)) == ["loaded"])
}

@Test func memory_bombWhileLoading_isALoadFailure() throws {
    let error = try #require(try simulationError(plugins(["p": bomb])))
    #expect(error.exitCode == 65)
    #expect(error.message.contains("memory"), "message: \(error.message)")
}

@Test func memory_bombInATimer_isAPluginError() throws {
    let recorder = try simulate(plugins(["p": "lifeline.after(1, function()\n\(bomb)\nend)"]))
    #expect(pluginErrors(recorder).first?.message.contains("memory") == true)
}

@Test func memory_bombInAnExpirationHandler_isAPluginErrorAndTheTaskTimesOut() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          lifeline.beginBackgroundTask('t', function()
        \(bomb)
          end)
        end)
        """
    // A small cap, so the bomb ends well within the handler's 1 s even on a slow (sanitized) build.
    var files = plugins(["p": source])
    files["p/plugin.toml"] = manifest(memory: "1MiB")
    let recorder = try simulate(files, scenario: "0s launch\n1s background")
    #expect(pluginErrors(recorder).first?.message.contains("memory") == true)
    #expect(recorder.termination?.kind == .backgroundTaskTimeout)
}

@Test func memory_pluginUsage_isReportedAndCapped() throws {
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 1 << 20)
        #expect(plugin.memoryUsed > 0)
        #expect(plugin.memoryUsed < 1 << 20)
        plugin.close()
        #expect(plugin.memoryUsed == 0)
    }
}

@Test func memory_capTooSmallForTheLibraries_throwsInsteadOfCrashing() throws {
    _ = try withPluginFolder(["p/init.lua": ""]) { dir in
        #expect(throws: LifelineError.self) {
            _ = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 2048)
        }
    }
}
