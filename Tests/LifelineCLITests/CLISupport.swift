import Foundation
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

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

extension CLI {
    /// Runs lifeline with its output thrown away; its exit status and peak resident memory (KiB).
    ///
    /// A child made by posix_spawn (a vfork) starts its peak at the test process's own peak: the
    /// kernel records the peak of the memory it leaves at exec, which is the parent's. The test
    /// process may be far larger than lifeline, and every run would then measure the same. So when
    /// python3 is there, a small python process spawns lifeline and reports its peak (wait4 there).
    static func runMeasuringPeakMemory(_ arguments: [String]) throws -> (status: Int32, peakKiB: Int) {
        if let python = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map({ $0 + "/python3" })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        {
            let script = """
                import os, sys
                null = [(os.POSIX_SPAWN_OPEN, fd, '/dev/null', os.O_WRONLY, 0) for fd in (1, 2)]
                pid = os.posix_spawn(sys.argv[1], sys.argv[1:], dict(os.environ), file_actions=null)
                _, status, usage = os.wait4(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                print(128 - code if code < 0 else code, usage.ru_maxrss)
                """
            // Spawned and waited for here, not through Foundation's Process, whose reaping the
            // many processes other tests start at once must not hold up; the pipe is close-on-exec,
            // so no other test's child can inherit it and keep it open.
            var ends: [Int32] = [0, 0]
            guard pipe(&ends) == 0 else { throw CocoaError(.fileWriteUnknown) }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
            let argv = ([python, "-c", script, CLI.binary] + arguments).map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, python, &actions, nil, argv, environ)
            close(ends[1])
            var output: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 256)
            while spawned == 0 {
                let n = read(ends[0], &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                output += chunk[0..<n]
            }
            close(ends[0])
            if spawned == 0 {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                let fields = String(decoding: output, as: UTF8.self).split(separator: " ").compactMap {
                    Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
                }
                if (status & 0x7f) == 0, (status >> 8) & 0xff == 0, fields.count == 2 { return (Int32(fields[0]), fields[1]) }
            }
        }
        return try spawnedPeakOf(arguments)
    }

    /// `runMeasuringPeakMemory` without python: spawned from the test process itself.
    private static func spawnedPeakOf(_ arguments: [String]) throws -> (status: Int32, peakKiB: Int) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([CLI.binary] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, CLI.binary, &actions, nil, argv, environ) == 0 else { throw CocoaError(.executableLoad) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exit, Int(usage.ru_maxrss))
    }
}
