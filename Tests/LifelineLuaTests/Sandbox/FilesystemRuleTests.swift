import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// The filesystem rule: what a plugin loads (init.lua, its modules, its plugin.toml) must lie
// inside the plugin's own folder once every link is resolved.

private let fm = FileManager.default

/// Runs the plugins under `dir` (already written) and returns the run, or the load error.
private func run(_ dir: String, scenario: String = "0s launch") throws -> Result<Recorder, LifelineError> {
    do throws(LifelineError) {
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        return .success(
            try Simulation.run(
                scenario: try Scenario.parse(scenario, fileName: "t.scenario"), plugins: descriptors,
                configuration: HostConfiguration()))
    } catch {
        return .failure(error)
    }
}

/// A folder outside every plugin folder, removed afterwards.
private func withOutsideFolder<T>(_ files: [String: String], _ body: (String) throws -> T) throws -> T {
    let dir = fm.temporaryDirectory.appendingPathComponent("outside-\(UUID().uuidString)").path
    try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? fm.removeItem(atPath: dir) }
    for (name, text) in files { try text.write(toFile: dir + "/" + name, atomically: true, encoding: .utf8) }
    return try body(dir)
}

@Suite struct FilesystemRuleTests {
    @Test func require_aModuleThatIsALinkToAFileOutside_isRefused_namingTheModule() throws {
        try withOutsideFolder(["evil.lua": "return 'loaded from outside'"]) { outside in
            try withPluginFolder(plugins(["p": "mark(select(2, pcall(require, 'evil')))"])) { dir in
                try fm.createSymbolicLink(atPath: dir + "/p/evil.lua", withDestinationPath: outside + "/evil.lua")
                let recorder = try run(dir).get()
                let got = marks(recorder)
                #expect(got.count == 1)
                #expect(got.first?.contains("module 'evil' refused") == true, "\(got)")
                #expect(got.first?.contains("p/evil.lua leads outside the plugin's folder") == true, "\(got)")
            }
        }
    }

    @Test func require_throughAFolderThatIsALinkOutside_isRefused() throws {
        try withOutsideFolder(["cart.lua": "return 'outside'"]) { outside in
            try withPluginFolder(plugins(["p": "mark(select(2, pcall(require, 'lib.cart')))"])) { dir in
                try fm.createSymbolicLink(atPath: dir + "/p/lib", withDestinationPath: outside)
                let got = marks(try run(dir).get())
                #expect(got.first?.contains("module 'lib.cart' refused") == true, "\(got)")
            }
        }
    }

    @Test func require_aLinkIntoAnotherPluginsFolder_isRefused_whileThatPluginLoadsItsOwn() throws {
        var files = plugins([
            "p": "mark('p ' .. tostring(select(2, pcall(require, 'secret'))))",
            "q": "mark('q ' .. require('secret'))",
        ])
        files["q/secret.lua"] = "return 'token'"
        try withPluginFolder(files) { dir in
            try fm.createSymbolicLink(atPath: dir + "/p/secret.lua", withDestinationPath: "../q/secret.lua")
            let got = marks(try run(dir).get())
            #expect(got.count == 2)
            #expect(got[0].hasPrefix("p ") && got[0].contains("module 'secret' refused"), "\(got)")
            #expect(got[1] == "q token")
        }
    }

    @Test func require_aLinkThatStaysInsideThePluginsFolder_loads() throws {
        var files = plugins(["p": "mark(require('alias') .. ' ' .. require('dir.mod'))"])
        files["p/real/module.lua"] = "return 'inside'"
        files["p/real/mod.lua"] = "return 'through a folder link'"
        try withPluginFolder(files) { dir in
            try fm.createSymbolicLink(atPath: dir + "/p/alias.lua", withDestinationPath: "real/module.lua")
            try fm.createSymbolicLink(atPath: dir + "/p/dir", withDestinationPath: dir + "/p/real")
            #expect(marks(try run(dir).get()) == ["inside through a folder link"])
        }
    }

    @Test func require_aModuleThatIsALinkLoop_saysSo_insteadOfNotFound() throws {
        try withPluginFolder(plugins(["p": "mark(select(2, pcall(require, 'loop')))"])) { dir in
            try fm.createSymbolicLink(atPath: dir + "/p/loop.lua", withDestinationPath: "loop.lua")
            let got = marks(try run(dir).get())
            #expect(got.first?.contains("cannot open") == true, "\(got)")
            #expect(got.first?.contains("p/loop.lua: Too many levels of symbolic links") == true, "\(got)")
        }
    }

    @Test func initLua_aLinkToAFileOutside_failsTheLoad() throws {
        try withOutsideFolder(["init.lua": "print('outside')"]) { outside in
            try withPluginFolder([:]) { dir in
                try fm.createDirectory(atPath: dir + "/p", withIntermediateDirectories: true)
                try fm.createSymbolicLink(atPath: dir + "/p/init.lua", withDestinationPath: outside + "/init.lua")
                guard case .failure(let error) = try run(dir) else {
                    Issue.record("the plugin loaded")
                    return
                }
                #expect(error.exitCode == 65)
                #expect(error.message.contains("p/init.lua leads outside the plugin's folder"), "\(error.message)")
            }
        }
    }

    @Test(arguments: [("init.lua", "Too many levels of symbolic links"), ("missing.lua", "No such file or directory")])
    func initLua_aLinkLoopOrADanglingLink_failsTheLoad_insteadOfSkippingThePlugin(_ target: String, _ why: String)
        throws
    {
        try withPluginFolder(["good/init.lua": ""]) { dir in
            try fm.createDirectory(atPath: dir + "/bad", withIntermediateDirectories: true)
            try fm.createSymbolicLink(atPath: dir + "/bad/init.lua", withDestinationPath: target)
            #expect(try LuaPluginLoader.descriptors(in: dir).map(\.name) == ["bad", "good"])
            guard case .failure(let error) = try run(dir) else {
                Issue.record("the plugin loaded")
                return
            }
            #expect(error.exitCode == 65)
            #expect(error.message.contains("cannot open \(dir)/bad/init.lua: \(why)"), "\(error.message)")
        }
    }

    @Test func pluginFolderThatIsALink_loads_andItsModulesMustLieInsideWhereItLeads() throws {
        try withOutsideFolder(["secret.lua": "return 'outside'"]) { outside in
            let real = outside + "/realp"
            try fm.createDirectory(atPath: real, withIntermediateDirectories: true)
            try (markPrelude + "mark(require('lib')); mark(select(2, pcall(require, 'up')))")
                .write(toFile: real + "/init.lua", atomically: true, encoding: .utf8)
            try "return 'own module'".write(toFile: real + "/lib.lua", atomically: true, encoding: .utf8)
            try fm.createSymbolicLink(atPath: real + "/up.lua", withDestinationPath: "../secret.lua")
            try withPluginFolder([:]) { dir in
                try fm.createSymbolicLink(atPath: dir + "/p", withDestinationPath: real)
                let got = marks(try run(dir).get())
                #expect(got.count == 2)
                #expect(got.first == "own module")
                #expect(got.last?.contains("module 'up' refused") == true, "\(got)")
            }
        }
    }

    @Test func pluginToml_aLinkToAFileOutside_isALoadError() throws {
        try withOutsideFolder(["plugin.toml": "[config]\ntoken = \"another plugin's\"\n"]) { outside in
            try withPluginFolder(plugins(["p": "mark(tostring(lifeline.config.token))"])) { dir in
                try fm.createSymbolicLink(atPath: dir + "/p/plugin.toml", withDestinationPath: outside + "/plugin.toml")
                let error = #expect(throws: LifelineError.self) { try loadDescriptors(in: dir) }
                #expect(error?.exitCode == 65)
                #expect(error?.message.contains("plugin.toml leads outside the plugin's folder") == true)
            }
        }
    }

    @Test func pluginToml_aLinkLoop_isALoadError_notAMissingFile() throws {
        try withPluginFolder(plugins(["p": ""])) { dir in
            try fm.createSymbolicLink(atPath: dir + "/p/plugin.toml", withDestinationPath: "plugin.toml")
            let error = #expect(throws: LifelineError.self) { try loadDescriptors(in: dir) }
            #expect(error?.message.contains("Too many levels of symbolic links") == true, "\(String(describing: error))")
        }
    }

    @Test func require_aFIFOInThePluginsFolder_failsAtOnce_insteadOfHangingTheHost() throws {
        try withPluginFolder(plugins(["p": "mark(select(2, pcall(require, 'pipe')))"])) { dir in
            #expect(mkfifo(dir + "/p/pipe.lua", 0o644) == 0)
            let got = marks(try run(dir).get())
            #expect(got.first?.contains("p/pipe.lua: not a plain file") == true, "\(got)")
        }
    }

    @Test func initLua_withABOMAndAHashLine_loadsWithItsLineNumbers() throws {
        let files = ["p/init.lua": "\u{FEFF}#!/usr/bin/env lua\n" + markPrelude + "mark('ran')\nerror('line 3')\n"]
        guard case .failure(let error) = try withPluginFolder(files, { try run($0) }) else {
            Issue.record("the error was not raised")
            return
        }
        #expect(error.message.contains("p/init.lua:3: line 3"), "\(error.message)")
    }
}

@Test func pluginToml_largerThan1MiB_isALoadFailureNotAHostAllocation() throws {
    var files = plugins(["p": "mark('loaded')"])
    files["p/plugin.toml"] = "[config]\nbig = \"" + String(repeating: "x", count: 1024 * 1024) + "\"\n"
    let error = try withPluginFolder(files) { dir -> LifelineError? in
        do throws(LifelineError) {
            try loadDescriptors(in: dir)
            return nil
        } catch {
            return error
        }
    }
    #expect(error?.description.contains("plugin.toml is larger than 1024 KiB") == true, "\(String(describing: error))")
}
