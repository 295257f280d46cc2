import Foundation
import Lifeline
import LifelineTesting
import Testing

/// What a reload takes for a change in a plugin's folder.
@Suite struct PluginFingerprintTests {
    private func fingerprint(after edit: (String) throws -> Void) throws -> (before: String?, after: String?) {
        try withPluginFolder(["p/init.lua": "require('lib')", "p/lib.lua": "return 1", "p/plugin.toml": "", "p/scenarios/a.scenario": "0s launch"]) { dir in
            let before = PluginFingerprint.of(folder: dir + "/p")
            try edit(dir + "/p")
            return (before, PluginFingerprint.of(folder: dir + "/p"))
        }
    }

    @Test func theSameFiles_giveTheSameFingerprint() throws {
        let (before, after) = try fingerprint { _ in }
        #expect(before != nil)
        #expect(before == after)
    }

    /// Makes the change named `what` in the plugin's folder `p`.
    private static func apply(_ what: String, _ p: String) throws {
        let fm = FileManager.default
        switch what {
        case "module": try "return 2".write(toFile: p + "/lib.lua", atomically: true, encoding: .utf8)
        case "manifest": try "[config]\nx = 1\n".write(toFile: p + "/plugin.toml", atomically: true, encoding: .utf8)
        case "subfolder":
            try fm.createDirectory(atPath: p + "/sub", withIntermediateDirectories: true)
            try "return 3".write(toFile: p + "/sub/more.lua", atomically: true, encoding: .utf8)
        case "rename": try fm.moveItem(atPath: p + "/lib.lua", toPath: p + "/lib2.lua")
        case "swap file": try "x".write(toFile: p + "/.init.lua.swp", atomically: true, encoding: .utf8)
        case "scenario": try "0s launch\n1s background\n".write(toFile: p + "/scenarios/a.scenario", atomically: true, encoding: .utf8)
        default: Issue.record("no change named \(what)")
        }
    }

    @Test(arguments: ["module", "manifest", "subfolder", "rename"])
    func aChange_changesIt(_ what: String) throws {
        let (before, after) = try fingerprint { try Self.apply(what, $0) }
        #expect(before != after, "\(what)")
    }

    /// An editor's swap file, a scenario: not the plugin's code.
    @Test(arguments: ["swap file", "scenario"])
    func whatIsNotThePluginsCode_leavesItAlone(_ what: String) throws {
        let (before, after) = try fingerprint { try Self.apply(what, $0) }
        #expect(before == after, "\(what)")
    }

    @Test func aFolderThatCannotBeRead_hasNone() {
        #expect(PluginFingerprint.of(folder: "/nonexistent-\(UUID())") == nil)
    }
}
