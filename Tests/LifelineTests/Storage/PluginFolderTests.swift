import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// Transfer files stay inside the plugin's files folder even when a link appears after the name
// was checked: every step works on the folder held open, and the file itself is never a link.

private let fm = FileManager.default

/// `<dir>/files/p` (the plugin's files folder) and `<dir>/outside`, removed afterwards.
private func withFolders<T>(_ body: (_ root: String, _ outside: String) throws -> T) throws -> T {
    let dir = fm.temporaryDirectory.appendingPathComponent("transfer-folder-\(UUID().uuidString)").path
    try fm.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
    try fm.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
    defer { try? fm.removeItem(atPath: dir) }
    return try body(dir + "/files/p", dir + "/outside")
}

private let head: HTTPFields = [.contentLength: "3"]

private func download(_ root: String, _ name: String, id: Int64 = 1) throws -> DownloadFile.Finish {
    let file = DownloadFile(root: root, name: name, id: id, resumeFrom: 0)
    _ = try file.begin(status: 200, headers: head)
    let bytes: [UInt8] = Array("abc".utf8)
    try bytes.withUnsafeBytes { try file.write($0) }
    return file.finish(sha256: nil)
}

@Test func downloadFile_aFolderSwappedForALinkAfterTheNameWasChecked_writesNothingOutside() throws {
    try withFolders { root, outside in
        try fm.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        #expect(try TransferPath.resolve("sub/x.bin", in: root).name == "sub/x.bin")
        // Later, before the attempt runs, 'sub' becomes a link out of the folder.
        try fm.removeItem(atPath: root + "/sub")
        try fm.createSymbolicLink(atPath: root + "/sub", withDestinationPath: outside)
        #expect {
            try download(root, "sub/x.bin")
        } throws: { error in
            (error as? TransferError)?.message == "'sub/x.bin.1.partial' leads outside the plugin's files folder (through a link)"
        }
        #expect(try fm.contentsOfDirectory(atPath: outside).isEmpty)
    }
}

@Test func downloadFile_aLinkThatStaysInside_isFollowed_andTheFileLandsWhereItLeads() throws {
    try withFolders { root, _ in
        try fm.createDirectory(atPath: root + "/inner", withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: root + "/in", withDestinationPath: root + "/inner")
        let placed = try download(root, "in/x.bin")
        #expect(placed == .placed)
        #expect(fm.contents(atPath: root + "/inner/x.bin") == Data("abc".utf8))
    }
}

@Test func downloadFile_aPartialFilePlantedAsALink_isRefused_notWrittenThrough() throws {
    try withFolders { root, outside in
        try fm.createSymbolicLink(atPath: root + "/x.bin.1.partial", withDestinationPath: outside + "/victim")
        #expect {
            try download(root, "x.bin")
        } throws: { error in
            (error as? TransferError)?.message == "cannot open 'x.bin.1.partial': Too many levels of symbolic links"
        }
        #expect(!fm.fileExists(atPath: outside + "/victim"))
    }
}

@Test func downloadFile_foldersOnTheWayAreMade_andMessagesNameFilesRelativeToTheFilesFolder() throws {
    try withFolders { root, _ in
        let placed = try download(root, "a/b/c.bin")
        #expect(placed == .placed)
        #expect(fm.contents(atPath: root + "/a/b/c.bin") == Data("abc".utf8))
        // 'a/b/c.bin' is a file now: nothing can go below it.
        #expect {
            try download(root, "a/b/c.bin/d.bin", id: 2)
        } throws: { error in
            (error as? TransferError)?.message == "cannot open the folder 'a/b/c.bin': Not a directory"
        }
    }
}

@Test func filesFolderThatIsALink_isRefused_atTheCheckAndAtTheWrite() throws {
    try withFolders { root, outside in
        try fm.removeItem(atPath: root)
        try fm.createSymbolicLink(atPath: root, withDestinationPath: outside)
        #expect(throws: TransferError.self) { try TransferPath.resolve("x.bin", in: root) }
        #expect {
            try download(root, "x.bin")
        } throws: { error in
            (error as? TransferError)?.message.contains("files folder is a link") == true
        }
        #expect(try fm.contentsOfDirectory(atPath: outside).isEmpty)
    }
}

@Test func upload_aFileSwappedForALinkAfterTheCheck_isNotRead() throws {
    try withFolders { root, outside in
        try "secret".write(toFile: outside + "/secret", atomically: true, encoding: .utf8)
        try "mine".write(toFile: root + "/up.bin", atomically: true, encoding: .utf8)
        let attempt = TransferAttempt(
            kind: .upload, request: HTTPRequest(method: "PUT", url: "http://127.0.0.1:1/", headers: [:], timeout: 1),
            root: root, name: "up.bin", id: 1, resumeFrom: 0, sha256: nil)
        #expect(try attempt.uploadBytes() == Array("mine".utf8))
        try fm.removeItem(atPath: root + "/up.bin")
        try fm.createSymbolicLink(atPath: root + "/up.bin", withDestinationPath: outside + "/secret")
        #expect {
            try attempt.uploadBytes()
        } throws: { error in
            (error as? TransferError)?.message == "cannot open 'up.bin': Too many levels of symbolic links"
        }
        #expect(throws: TransferError.self) { try attempt.uploadSize() }
    }
}
