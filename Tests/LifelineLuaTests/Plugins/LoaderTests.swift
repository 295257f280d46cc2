import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// SPEC 2.1 and 6.1: which folders are plugins, in which order, and what the loader makes of them.

@Test func loader_findsEverySubfolderWithInitLua_inNameOrder() throws {
    try withPluginFolder(["zeta/init.lua": "", "alpha/init.lua": "", "mid/init.lua": ""]) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        #expect(descriptors.map(\.name) == ["alpha", "mid", "zeta"])
        #expect(descriptors.allSatisfy { $0.kind == .lua })
    }
}

@Test func loader_skipsFoldersWithoutInitLuaAndLooseFiles() throws {
    try withPluginFolder([
        "plugin/init.lua": "", "notes/readme.md": "x", "lib/helper.lua": "return 1", "stray.lua": "return 1",
        "init.lua": "",
    ]) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        #expect(descriptors.map(\.name) == ["plugin"])
    }
}

@Test func loader_skipsHiddenFolders() throws {
    try withPluginFolder(["visible/init.lua": "", ".hidden/init.lua": ""]) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        #expect(descriptors.map(\.name) == ["visible"])
    }
}

@Test func loader_emptyFolder_hasNoPlugins() throws {
    try withPluginFolder([:]) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        #expect(descriptors.isEmpty)
    }
}

@Test func loader_acceptsAPathWithATrailingSlash() throws {
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir + "/")
        #expect(descriptors.map(\.name) == ["p"])
    }
}

@Test func loader_validManifest_loads() throws {
    var files = plugins(["p": "mark('loaded')"])
    files["p/plugin.toml"] = """
        version = "1.2.0"
        description = "a test plugin"

        [permissions]
        network = ["example.com:443"]

        [limits]
        memory = "8MiB"

        [config]
        retries = 3
        """
    #expect(marks(try simulate(files)) == ["loaded"])
}

@Test func loader_descriptor_makesAFreshInstanceEachTime() throws {
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let descriptor = try #require(try LuaPluginLoader.descriptors(in: dir).first)
        let a = try descriptor.make()
        let b = try descriptor.make()
        #expect(a !== b)
        #expect(a.name == "p")
        #expect(a.kind == .lua)
        #expect(a.preemptor != nil)
        a.close()
        b.close()
    }
}

@Test func loader_pluginsAreLoadedInNameOrder() throws {
    let recorder = try simulate(plugins(["b": "mark('b')", "a": "mark('a')", "c": "mark('c')"]))
    #expect(marks(recorder) == ["a", "b", "c"])
}

@Test func loader_reportListsLoadedPlugins() throws {
    let recorder = try simulate(plugins(["one": "", "two": ""]))
    guard case .array(let list) = recorder.report()["plugins"] else {
        Issue.record("no plugins list")
        return
    }
    #expect(list.map { $0["name"]?.stringValue ?? "" } == ["one", "two"])
    #expect(list.allSatisfy { $0["kind"]?.stringValue == "lua" && $0["status"]?.stringValue == "loaded" })
}

@Test func loader_relaunch_runsInitLuaAgainInAFreshState() throws {
    let source = "seen = (seen or 0) + 1; mark('loads in this state: ' .. seen)"
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s terminate\n2s launch")
    #expect(marks(recorder) == ["loads in this state: 1", "loads in this state: 1"])
}

// MARK: - LuaPlugin directly

@Test func luaPlugin_init_opensTheSandboxWithoutRunningInitLua() throws {
    // init.lua would fail if it ran; creating the plugin must not run it.
    try withPluginFolder(["p/init.lua": "error('ran too early')"]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 1 << 25)
        defer { plugin.close() }
        #expect(plugin.name == "p")
        #expect(plugin.kind == .lua)
        #expect(plugin.state != nil)
    }
}

@Test func luaPlugin_close_isIdempotent() throws {
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 1 << 25)
        plugin.close()
        plugin.close()
        #expect(plugin.state == nil)
        #expect(plugin.memoryUsed == 0)
        plugin.resetPreemption()  // harmless once closed
    }
}

@Test func luaPlugin_startWithoutInitLua_raisesAnError() throws {
    try withPluginFolder(["p/other.lua": ""]) { dir in
        let box = PluginBox()
        let host = makeHost([capturingDescriptor(name: "p", directory: dir + "/p", box: box)])
        defer { host.shutdown() }
        try host.perform(.launch)
        #expect(host.loadError?.exitCode == 65)
        #expect(host.loadError?.message.contains("init.lua") == true)
    }
}
