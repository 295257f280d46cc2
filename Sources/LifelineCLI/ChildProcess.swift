import Dispatch
import Foundation
import Lifeline

/// This binary run again, as a process of its own, for what must not take the parent down:
/// `lifeline test` simulates each scenario so, and `lifeline check` loads each plugin so. A plugin
/// stuck where the watchdog cannot stop it (inside one C call, or in Swift code), or a crash,
/// then ends only its own process; the parent kills one that outlives its time limit.
enum ChildProcess {
    /// What one child process did.
    struct Outcome {
        /// nil when the process could not be started (`startError` says why).
        var status: Int32?
        /// Whether it exited (rather than being ended by a signal).
        var exited: Bool
        var stdout = ""
        /// Empty when its stderr was the parent's.
        var stderr = ""
        var seconds: Double = 0
        var startError: String?
        /// It ran past its time limit and was killed.
        var timedOut = false
    }

    /// The children running now, so a signal that ends the parent can end them too.
    private static let running = Locked<Set<Int32>>([])

    /// Ends every child now (from a signal handler's queue).
    @Sendable static func killRunning() {
        for pid in running.withLock({ $0 }) { kill(pid, SIGKILL) }
    }

    /// Runs this binary with `arguments` and waits for it, at most `timeout` seconds of real time;
    /// past that it is killed. Its stdout, and its stderr unless `sharesStderr`, go to files in
    /// `directory` (no pipe can fill and block it), read back once it has ended.
    static func run(_ arguments: [String], directory: String, timeout: Double, sharesStderr: Bool = false) -> Outcome {
        let start = ContinuousClock.now
        let outPath = directory + "/stdout"
        let errPath = directory + "/stderr"
        guard FileManager.default.createFile(atPath: outPath, contents: nil),
            sharesStderr || FileManager.default.createFile(atPath: errPath, contents: nil),
            let out = FileHandle(forWritingAtPath: outPath),
            let err = sharesStderr ? FileHandle.standardError : FileHandle(forWritingAtPath: errPath)
        else {
            return Outcome(status: nil, exited: false, startError: "cannot make the output files in '\(directory)'")
        }
        defer {
            try? out.close()
            if !sharesStderr { try? err.close() }
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        // The child's temporary folders (simulate's state dir) go inside `directory`, which the
        // parent removes: a child killed for its time limit, which runs no cleanup, leaves
        // nothing behind.
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = directory
        process.environment = environment
        process.standardOutput = out
        process.standardError = err
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        do {
            try process.run()
        } catch {
            return Outcome(status: nil, exited: false, startError: "\(error)")
        }
        let pid = process.processIdentifier
        running.withLock { _ = $0.insert(pid) }
        // The child runs its handlers under the watchdog, so it ends unless something the watchdog
        // cannot reach holds it (a plugin inside one C call with a watchdog scale that pushes its
        // limit out, or a fault of the host): the limit keeps the parent, and CI, going.
        var timedOut = false
        if ended.wait(timeout: .now() + .nanoseconds(Int(min(max(timeout, 0), 1e9) * 1e9))) == .timedOut {
            timedOut = true
            kill(pid, SIGKILL)
            ended.wait()
        }
        running.withLock { _ = $0.remove(pid) }
        // Killed because the parent itself is ending on a signal: that exit is under way.
        ExitOnSignals.parkIfExiting()
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        func read(_ path: String) -> String {
            FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) } ?? ""
        }
        return Outcome(
            status: process.terminationStatus, exited: process.terminationReason == .exit, stdout: read(outPath),
            stderr: sharesStderr ? "" : read(errPath), seconds: seconds, startError: nil, timedOut: timedOut)
    }
}
