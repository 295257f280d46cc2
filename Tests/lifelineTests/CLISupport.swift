import Foundation
import Lifeline
import Testing

/// Runs the built `lifeline` binary as a user would.
enum CLI {
    /// The binary: $LIFELINE_BIN (scripts/test sets it), else .build/debug/lifeline.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["LIFELINE_BIN"] { return path }
        return packageRoot + "/.build/debug/lifeline"
    }

    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs lifeline to completion; `environment` adds to (or replaces entries of) this process's.
    static func run(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes before waiting, so a large report cannot fill a pipe and block.
        let outData = Captured(out), errData = Captured(err)
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: outData.text(waitingForEOF: true),
                      stderr: errData.text(waitingForEOF: true))
    }
}

/// Collects a pipe's bytes as they arrive.
final class Captured: Sendable {
    // Lifeline's pthread lock, not Synchronization.Mutex: ThreadSanitizer cannot see a Mutex wait
    // on Linux, so a contended one would read as a race.
    private let data = Locked(Data())
    private let eof = Locked(false)

    /// Reads on a thread of its own until the end of the pipe: on Linux, FileHandle's
    /// readabilityHandler now and then never reports the end of a pipe whose writer exited at
    /// once, and `text(waitingForEOF:)` then waited out its whole 30 s.
    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        let reader = Thread { [self] in
            while true {
                let chunk = handle.availableData  // blocks until bytes arrive or the pipe ends
                if chunk.isEmpty { break }
                data.withLock { $0.append(chunk) }
            }
            eof.withLock { $0 = true }
        }
        reader.start()
    }

    func text(waitingForEOF: Bool = false) -> String {
        if waitingForEOF {
            // Generous: on a loaded machine a large output can take a while to drain.
            let deadline = Date().addingTimeInterval(30)
            while !eof.withLock({ $0 }) && Date() < deadline { usleep(2_000) }
        }
        return String(decoding: data.withLock { $0 }, as: UTF8.self)
    }

    /// Waits until the text contains `marker` `count` times, or the timeout passes.
    @discardableResult
    func waitFor(_ marker: String, count: Int = 1, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if text().components(separatedBy: marker).count - 1 >= count { return true }
            usleep(5_000)
        }
        return false
    }
}

/// A temporary folder of plugins and scenarios, removed when the test is done.
final class Workspace {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path + "/plugins", withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    var plugins: String { path + "/plugins" }

    /// Writes `plugins/NAME/init.lua` (and plugin.toml when given).
    func plugin(_ name: String, _ lua: String, toml: String? = nil) throws {
        let dir = plugins + "/" + name
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try lua.write(toFile: dir + "/init.lua", atomically: true, encoding: .utf8)
        if let toml { try toml.write(toFile: dir + "/plugin.toml", atomically: true, encoding: .utf8) }
    }

    /// Writes a file under the workspace and returns its path.
    @discardableResult
    func file(_ name: String, _ text: String) throws -> String {
        let p = path + "/" + name
        try text.write(toFile: p, atomically: true, encoding: .utf8)
        return p
    }

    /// Links one bundled example plugin into this workspace's plugins folder.
    func linkExample(_ name: String) throws {
        try FileManager.default.createSymbolicLink(
            atPath: plugins + "/" + name, withDestinationPath: CLI.packageRoot + "/plugins/" + name)
    }
}

/// The report as a JSON object.
func parseReport(_ text: String) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
    return try #require(object as? [String: Any])
}

/// The timeline's entries.
func timeline(_ report: [String: Any]) -> [[String: Any]] {
    report["timeline"] as? [[String: Any]] ?? []
}

/// The timeline's entries for one event name, optionally for one plugin.
func events(_ report: [String: Any], _ name: String, plugin: String? = nil) -> [[String: Any]] {
    timeline(report).filter { ($0["event"] as? String) == name && (plugin == nil || ($0["plugin"] as? String) == plugin) }
}
