import Dispatch
import Foundation
import Lifeline

/// `lifeline test` simulates each scenario in a process of its own: this binary again, running
/// `simulate`. A plugin that takes its process down (stuck where the watchdog cannot stop it, or a
/// crash) then fails only its own scenario, and scenarios run side by side.
enum ScenarioProcess {
    /// What one child process did.
    struct Outcome {
        /// nil when the process could not be started (`startError` says why).
        var status: Int32?
        /// Whether it exited (rather than being ended by a signal).
        var exited: Bool
        var stderr: String
        var seconds: Double
        var startError: String?
        /// It ran past its time limit and was killed.
        var timedOut = false
    }

    /// The children running now, so a signal that ends `lifeline test` can end them too.
    private static let running = Locked<Set<Int32>>([])

    /// Ends every child now (from a signal handler's queue).
    @Sendable static func killRunning() {
        for pid in running.withLock({ $0 }) { kill(pid, SIGKILL) }
    }

    /// Runs this binary with `arguments` and waits for it, at most `timeout` seconds of real time;
    /// past that it is killed. Its stdout and stderr go to files in `directory` (no pipe can fill
    /// and block it), read back once it has ended.
    static func run(_ arguments: [String], directory: String, timeout: Double) -> Outcome {
        let start = ContinuousClock.now
        let outPath = directory + "/stdout"
        let errPath = directory + "/stderr"
        guard FileManager.default.createFile(atPath: outPath, contents: nil),
            FileManager.default.createFile(atPath: errPath, contents: nil),
            let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath)
        else {
            return Outcome(
                status: nil, exited: false, stderr: "", seconds: 0,
                startError: "cannot make the output files in '\(directory)'")
        }
        defer {
            try? out.close()
            try? err.close()
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        do {
            try process.run()
        } catch {
            return Outcome(status: nil, exited: false, stderr: "", seconds: 0, startError: "\(error)")
        }
        let pid = process.processIdentifier
        running.withLock { _ = $0.insert(pid) }
        // A simulation runs in virtual time and its handlers under the watchdog, so it ends unless
        // something the watchdog cannot reach holds it (a plugin inside one C call with a watchdog
        // scale that pushes its limit out, or a fault of the host): the limit keeps CI going.
        var timedOut = false
        if ended.wait(timeout: .now() + .nanoseconds(Int(min(timeout, 1e9) * 1e9))) == .timedOut {
            timedOut = true
            kill(pid, SIGKILL)
            ended.wait()
        }
        running.withLock { _ = $0.remove(pid) }
        // Killed because the test itself is ending on a signal: that exit is under way.
        ExitOnSignals.parkIfExiting()
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        let stderr = FileManager.default.contents(atPath: errPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return Outcome(
            status: process.terminationStatus, exited: process.terminationReason == .exit, stderr: stderr,
            seconds: seconds, startError: nil, timedOut: timedOut)
    }
}
