import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// A plugin's own files (`PluginFiles`): names, quota, atomic writes, and the Swift API.

/// A state dir of its own with the files folder of plugin "p" at `<dir>/files/p`, removed afterwards.
private func withFiles<T>(
    quota: Int = PluginFiles.defaultQuota, maximumEntries: Int = PluginFiles.defaultMaximumEntries,
    _ body: (PluginFiles, String) throws -> T
) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("files-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(
        PluginFiles(plugin: "p", root: dir + "/files/p", quota: quota, maximumEntries: maximumEntries), dir)
}

private func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

/// The names in a folder, hidden ones included.
private func names(in path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

private func message(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch {
        return (error as? FileError)?.message ?? "\(error)"
    }
}

@Test func pluginFiles_roundTrip_keepsEveryByte_NULIncluded() throws {
    try withFiles { files, dir in
        let bytes: [UInt8] = [0, 1, 2, 0, 255, 0x0a, 0]
        try files.write("blob.bin", bytes)
        #expect(try files.read("blob.bin") == bytes)
        #expect(contents(dir + "/files/p/blob.bin") == bytes)
        try files.write("empty", [])
        #expect(try files.read("empty") == [])
        // Folders on the way are made.
        try files.write("a/b/c.txt", Array("deep".utf8))
        #expect(try files.read("./a//b/c.txt") == Array("deep".utf8))
    }
}

@Test func pluginFiles_missingFile_readsAndSizesAsNil_andRemoveSaysFalse() throws {
    try withFiles { files, _ in
        // Not even the files folder exists yet.
        #expect(try files.read("nothing") == nil)
        #expect(try files.size("nothing") == nil)
        #expect(try files.remove("nothing") == false)
        #expect(try files.list() == [])
        try files.write("x", [1])
        #expect(try files.read("nothing/below") == nil)
        #expect(try files.read("x/below") == nil)  // x is a file, so nothing is below it
    }
}

@Test func pluginFiles_list_isSortedByBytes_foldersLeftOut_temporariesHidden() throws {
    try withFiles { files, dir in
        for name in ["b", "a/z", "B", "a/b", "é", "c.txt"] { try files.write(name, [1]) }
        try FileManager.default.createDirectory(atPath: dir + "/files/p/empty", withIntermediateDirectories: true)
        // A temporary left over by a write that never finished (the host stopped mid-write).
        let stale = dir + "/files/p/a/" + TransferPath.temporaryPrefix + "x"
        FileManager.default.createFile(atPath: stale, contents: Data([1, 2, 3]))
        #expect(try files.list() == ["B", "a/b", "a/z", "b", "c.txt", "é"])
        // It is not the plugin's: the walk removed it, and it does not count.
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(try files.usage() == 6)
    }
}

@Test func pluginFiles_size_isTheBytesOfAPlainFile() throws {
    try withFiles { files, _ in
        try files.write("a", [UInt8](repeating: 7, count: 1234))
        try files.write("d/e", [1])
        #expect(try files.size("a") == 1234)
        #expect(try files.size("d") == nil)  // a folder is not a file
    }
}

@Test func pluginFiles_remove_removesTheFile_andAFolderOnlyOnceItIsEmpty() throws {
    try withFiles { files, dir in
        try files.write("d/a", [1])
        #expect(message { try files.remove("d") } == "'d' is a folder with files in it; remove them first")
        #expect(try files.remove("d/a") == true)
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/d/a"))
        #expect(try files.remove("d/a") == false)
        // The folder the write made can go too, so a plugin can leave nothing behind.
        #expect(try files.remove("d") == true)
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/d"))
    }
}

@Test func pluginFiles_countOfFilesAndFolders_isBounded_andANameHasAtMost32Parts() throws {
    try withFiles(maximumEntries: 40) { files, _ in
        let deep = (1...TransferPath.maximumParts).map { _ in "a" }.joined(separator: "/")
        try files.write(deep, [1])
        #expect(message { try files.write(deep + "/b", [1]) }?.contains("has more than 32 parts") == true)
        // 31 folders and a file so far. Empty files cost no bytes, but they are entries: the bound
        // stops them.
        for i in 0..<8 { try files.write("e\(i)", []) }
        #expect(message { try files.write("one-more", []) }
            == "plugin 'p' would keep more than 40 files and folders in its files folder")
        #expect(message { try files.write("new/folder", []) } != nil)
        // Replacing a file adds no entry.
        try files.write("e0", [2])
    }
}

@Test(arguments: [
    ("/etc/passwd", "is an absolute path"), ("../q/x", "'..' is not allowed"), ("a/../../x", "'..' is not allowed"),
    ("", "must not be empty"), ("a\0b", "must not contain NUL"), (".", "does not name a file"),
    (TransferPath.temporaryPrefix + "1", "are the host's"),
])
func pluginFiles_namesThatLeaveTheFolder_areRefusedByEveryCall(_ name: String, _ expected: String) throws {
    try withFiles { files, dir in
        let calls: [(String, () throws -> Void)] = [
            ("write", { try files.write(name, [1]) }), ("read", { _ = try files.read(name) }),
            ("size", { _ = try files.size(name) }), ("remove", { _ = try files.remove(name) }),
        ]
        for (call, body) in calls {
            #expect(message(body)?.contains(expected) == true, "\(call)(\(name.debugDescription))")
        }
        #expect(names(in: dir) == [])  // not even the files folder was made
    }
}

@Test func pluginFiles_aLinkInsideThatLeadsOutside_isRefused_andNothingOutsideIsTouched() throws {
    try withFiles { files, dir in
        let root = dir + "/files/p"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/outside/secret", contents: Data("secret".utf8))
        try FileManager.default.createSymbolicLink(atPath: root + "/out", withDestinationPath: dir + "/outside")
        try FileManager.default.createSymbolicLink(atPath: root + "/secret", withDestinationPath: dir + "/outside/secret")
        #expect(message { try files.write("out/new", [1]) }?.contains("leads outside") == true)
        #expect(message { _ = try files.read("out/secret") }?.contains("leads outside") == true)
        #expect(message { _ = try files.remove("out/secret") }?.contains("leads outside") == true)
        // The file itself may not be a link, whereever it leads.
        #expect(message { _ = try files.read("secret") }?.contains("is a link") == true)
        #expect(message { try files.write("secret", [1]) }?.contains("is a link") == true)
        #expect(contents(dir + "/outside/secret") == Array("secret".utf8))
        #expect(names(in: dir + "/outside") == ["secret"])
        // Links are not listed, nor followed by the walk.
        #expect(try files.list() == [])
    }
}

@Test func pluginFiles_theFolderItselfBeingALink_isRefused() throws {
    try withFiles { files, dir in
        try FileManager.default.createDirectory(atPath: dir + "/other", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/other/x", contents: Data([1]))
        try FileManager.default.createDirectory(atPath: dir + "/files", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: dir + "/files/p", withDestinationPath: dir + "/other")
        for body in [{ try files.write("y", [1]) }, { _ = try files.read("x") }, { _ = try files.list() }] {
            #expect(message(body)?.contains("files folder is a link") == true)
        }
        #expect(names(in: dir + "/other") == ["x"])
    }
}

@Test func transferFolder_existing_checksTheOpenFolder_soALinkPlantedAfterTheNameCheckLeadsNowhere() throws {
    try withFiles { _, dir in
        let root = dir + "/files/p"
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        let path = try TransferPath.resolve("sub/x", in: root)
        // Between the check and the use, "sub" becomes a link out.
        try FileManager.default.removeItem(atPath: root + "/sub")
        try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/outside/x", contents: Data([9]))
        try FileManager.default.createSymbolicLink(atPath: root + "/sub", withDestinationPath: dir + "/outside")
        #expect(throws: FileError.self) { _ = try PluginFolder.existing(path.name, in: root) }
        #expect(throws: FileError.self) { _ = try PluginFolder.holding(path.name, in: root, create: true) }
    }
}

@Test func pluginFiles_overTheQuota_throws_writesNothing_andKeepsTheOldFile() throws {
    try withFiles(quota: 1024) { files, dir in
        try files.write("a", [UInt8](repeating: 1, count: 600))
        try files.write("b", [UInt8](repeating: 2, count: 400))
        let error = message { try files.write("a", [UInt8](repeating: 3, count: 700)) }
        #expect(
            error == "plugin 'p' would keep 1100 bytes in its files folder, over its quota of 1 KiB (set another with "
                + "[limits] files in plugin.toml)")
        #expect(try files.read("a") == [UInt8](repeating: 1, count: 600))
        #expect(names(in: dir + "/files/p") == ["a", "b"])  // no temporary behind
        #expect(message { try files.write("new/c", [UInt8](repeating: 5, count: 25)) }?.contains("over its quota") == true)
        #expect(!FileManager.default.fileExists(atPath: dir + "/files/p/new"))
        // Replacing a file counts its new size, not both: 624 + 400 fits exactly.
        try files.write("a", [UInt8](repeating: 4, count: 624))
        #expect(try files.usage() == 1024)
    }
}

@Test func pluginFiles_downloadsCountAgainstTheQuota() throws {
    try withFiles(quota: 1000) { files, dir in
        // What a download brought: the host's, so the quota did not stop it, but it counts.
        try FileManager.default.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: dir + "/files/p/big.bin", contents: Data(count: 900))
        #expect(message { try files.write("x", [UInt8](repeating: 0, count: 101)) }?.contains("over its quota") == true)
        try files.write("x", [UInt8](repeating: 0, count: 100))
        #expect(try files.remove("big.bin"))
        try files.write("x", [UInt8](repeating: 0, count: 1000))
    }
}

@Test func pluginFiles_aWriteThatFails_leavesTheOldFileAndNoTemporary() throws {
    try withFiles { files, dir in
        try files.write("d/keep", Array("old".utf8))
        try files.write("d/sub/x", [1])
        // A folder has the name: the rename over it fails after the bytes were written.
        #expect(message { try files.write("d/sub", [1, 2]) } == "cannot write 'd/sub': it is a folder")
        #expect(names(in: dir + "/files/p/d") == ["keep", "sub"])
        // A folder that cannot be written to: the temporary cannot even be made.
        chmod(dir + "/files/p/d", 0o500)
        defer { chmod(dir + "/files/p/d", 0o755) }
        if getuid() != 0 {  // root writes anyway
            #expect(message { try files.write("d/keep", Array("new".utf8)) }?.hasPrefix("cannot write 'd/keep'") == true)
            #expect(try files.read("d/keep") == Array("old".utf8))
            #expect(names(in: dir + "/files/p/d") == ["keep", "sub"])
        }
    }
}

@Test func pluginFiles_aWrite_replacesByRename_soAnOpenReaderKeepsTheOldBytes() throws {
    try withFiles { files, dir in
        try files.write("f", Array("old".utf8))
        let reader = try FileHandle(forReadingFrom: URL(fileURLWithPath: dir + "/files/p/f"))
        defer { try? reader.close() }
        try files.write("f", Array("new!".utf8))
        // The old file was never written into: it was replaced whole.
        #expect(Array(reader.readDataToEndOfFile()) == Array("old".utf8))
        #expect(try files.read("f") == Array("new!".utf8))
        #expect(names(in: dir + "/files/p") == ["f"])
    }
}

// MARK: - The Swift API

@Test func swiftPlugin_usesItsFiles_andCannotReachAnotherPlugins() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swift-files-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var configuration = HostConfiguration()
    configuration.logger = quietLogger()
    configuration.database = try StateDatabase.open(stateDirectory: dir)
    let heard = Shared<[String]>([])
    let writer = swiftPlugin("alpha") { context in
        let files = try context.files()
        try files.write("notes/today.txt", Array("hello\0world".utf8))
        try files.write("b.bin", [1, 2, 3])
        heard.append("list \(try files.list())")
        heard.append("size \(try files.size("b.bin") ?? -1)")
        heard.append("read \(try files.read("notes/today.txt") == Array("hello\0world".utf8))")
        heard.append("remove \(try files.remove("b.bin")) \(try files.remove("b.bin"))")
    }
    let other = swiftPlugin("beta") { context in
        let files = try context.files()
        heard.append("beta sees \(try files.list()) \(try files.read("notes/today.txt") as Any)")
        do {
            _ = try files.read("../alpha/notes/today.txt")
        } catch let error as FileError {
            heard.append("beta refused: \(error.message)")
        }
    }
    var descriptors = [writer, other]
    descriptors[0].filesQuota = 100
    let recorder = try Simulation.run(
        scenario: try Scenario.parse("0s launch", fileName: "t.scenario"), plugins: descriptors,
        configuration: configuration)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(
        heard.value == [
            "list [\"b.bin\", \"notes/today.txt\"]", "size 3", "read true", "remove true false",
            "beta sees [] nil",
            "beta refused: '../alpha/notes/today.txt' leaves the plugin's files folder ('..' is not allowed)",
        ])
    #expect(contents(dir + "/files/alpha/notes/today.txt") == Array("hello\0world".utf8))
}

@Test func swiftPlugin_theQuotaComesFromTheDescriptor() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swift-files-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var configuration = HostConfiguration()
    configuration.logger = quietLogger()
    configuration.database = try StateDatabase.open(stateDirectory: dir)
    let heard = Shared<[String]>([])
    var descriptor = swiftPlugin("q") { context in
        let files = try context.files()
        heard.append("quota \(files.quota)")
        do {
            try files.write("x", [UInt8](repeating: 0, count: 11))
        } catch let error as FileError {
            heard.append(error.message)
        }
    }
    descriptor.filesQuota = 10
    _ = try Simulation.run(
        scenario: try Scenario.parse("0s launch", fileName: "t.scenario"), plugins: [descriptor],
        configuration: configuration)
    #expect(
        heard.value == [
            "quota 10",
            "plugin 'q' would keep 11 bytes in its files folder, over its quota of 10 bytes (set another with [limits] "
                + "files in plugin.toml)",
        ])
}

@Test func swiftPlugin_withoutAStateDir_hasNoFiles_asWithTransfers() throws {
    let heard = Shared<[String]>([])
    let harness = Harness([
        swiftPlugin("p") { context in
            do {
                _ = try context.files()
            } catch let error as FileError {
                heard.append(error.message)
            }
        }
    ])
    harness.at(0, .launch)
    harness.run(until: 1)
    #expect(heard.value == ["the host was started without a state dir, so there are no files"])
}

@Test func manifest_limitsFiles_setsTheFilesQuota() throws {
    #expect(try PluginManifest.parse("[limits]\nfiles = \"4MiB\"", fileName: "plugin.toml").filesQuota == 4 << 20)
    #expect(try PluginManifest.parse("", fileName: "plugin.toml").filesQuota == nil)
    #expect(throws: LifelineError.self) { try PluginManifest.parse("[limits]\nfiles = 0", fileName: "plugin.toml") }
}
