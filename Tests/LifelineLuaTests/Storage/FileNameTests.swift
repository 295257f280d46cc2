import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Names that do not name a file, or that the system would refuse half-way, are refused by
// lifeline.files before anything is made, with a message that says what is wrong.

/// Runs `source` as plugin "p" on a fresh state dir; returns its marks and what its files folder
/// holds afterwards (every path under it, relative), with no plugin error allowed.
private func runOnStateDir(_ source: String) throws -> (marks: [String], folder: [String]) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lua-names-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var files = plugins(["p": source])
    // Transfers check their name after the permission: the test server's port is listed.
    files["p/plugin.toml"] = "[permissions]\nnetwork = [\"127.0.0.1:9\"]\n"
    let recorder = try simulate(files, database: StateDatabase.open(stateDirectory: dir))
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    let root = dir + "/files/p"
    let found = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? []
    return (marks(recorder), found.sorted())
}

/// The error `call` raises, marked, then whether it raised.
private func raised(_ call: String) -> String {
    "local ok, err = pcall(function() \(call) end); mark(tostring(ok)); mark(tostring(err))"
}

@Test(arguments: [
    ("lifeline.files.write('dir/', 'x')", "'dir/' does not name a file: it ends with '/'"),
    ("lifeline.files.write('a/dir/', 'x')", "'a/dir/' does not name a file"),
    ("lifeline.files.write('dir//', 'x')", "does not name a file"),
    ("lifeline.files.write('a/./', 'x')", "does not name a file"),
    ("lifeline.files.write('a/.', 'x')", "does not name a file"),
    ("lifeline.files.write('.', 'x')", "does not name a file"),
    ("lifeline.files.write('a/..', 'x')", "'..' is not allowed"),
    ("lifeline.files.write('/', 'x')", "absolute path"),
    ("lifeline.files.read('dir/')", "does not name a file"),
    ("lifeline.files.size('dir/')", "does not name a file"),
    ("lifeline.files.remove('dir/')", "does not name a file"),
    ("lifeline.transfers.download{url = 'http://127.0.0.1:9/x', to = 'dir/'}", "does not name a file"),
])
func files_aNameThatDoesNotNameAFile_isRefused_andNothingIsWritten(_ call: String, _ expected: String) throws {
    let (result, folder) = try runOnStateDir(raised(call))
    #expect(result.first == "false", "\(result)")
    #expect(result.last?.contains(expected) == true, "\(result)")
    #expect(folder.isEmpty, "the files folder holds \(folder)")
}

/// A name past PATH_MAX once made about 20 folders, then failed as "leads outside … (through a
/// link)", and the folders could not be removed. Every limit now fires before anything is made.
@Test(arguments: [
    // 19 parts of 250 bytes and one of 1: 4,770 bytes, past PATH_MAX with the folder's path.
    ("string.rep(string.rep('d', 250) .. '/', 19) .. 'f'", "is too long (4770 bytes); a file name may be at most 1024 bytes"),
    // 4 parts of 250 bytes: under 1,024 bytes, each part under NAME_MAX.
    ("string.rep(string.rep('d', 250) .. '/', 3) .. string.rep('f', 256)", "each part of a file name may be at most 255 bytes"),
    ("string.rep('d', 300)", "(300 bytes); each part of a file name may be at most 255 bytes"),
    ("string.rep('d/', 40) .. 'f'", "has more than 32 parts"),
])
func files_aNameTooLong_isRefusedBeforeAnyFolderIsMade_sayingTheLimit(_ name: String, _ expected: String) throws {
    let (result, folder) = try runOnStateDir(
        "local name = \(name)\n" + raised("lifeline.files.write(name, 'x')") + "\n"
            + raised("lifeline.transfers.download{url = 'http://127.0.0.1:9/x', to = name}"))
    #expect(result.count == 4, "\(result)")
    #expect(result[0] == "false" && result[2] == "false", "\(result)")
    #expect(result[1].contains(expected), "\(result[1])")
    #expect(result[3].contains(expected), "\(result[3])")
    #expect(!result[1].contains("leads outside"), "\(result[1])")
    #expect(folder.isEmpty, "folders were made: \(folder.prefix(3))")
}

@Test func files_aNameAtTheLimits_isWrittenAndReadBack() throws {
    // 1,023 bytes in 4 parts of 255 bytes: each part at NAME_MAX, the name under 1,024 bytes.
    let (result, folder) = try runOnStateDir(
        """
        local short = string.rep(string.rep('d', 255) .. '/', 3) .. string.rep('f', 255)
        lifeline.files.write(short, 'x')
        mark(#short .. ' ' .. lifeline.files.read(short))
        """)
    #expect(result == ["1023 x"], "\(result)")
    #expect(folder.count == 4, "\(folder.count)")
}
