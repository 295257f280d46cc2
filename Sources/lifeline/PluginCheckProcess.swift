import Dispatch
import Foundation
import Lifeline
import Synchronization

/// `lifeline check` loads each plugin in a process of its own: this binary again, with
/// `--only-plugin`. A plugin stuck where the watchdog cannot stop it (inside one C call, or in
/// Swift code) then takes only its own process down, and the check goes on with the next plugin.
enum PluginCheckProcess {
    /// What became of one plugin.
    struct Verdict {
        enum Kind {
            case loaded
            case failed
            /// The process ended without saying (it crashed, say): a host error, not the plugin's.
            case noVerdict
        }
        var kind: Kind
        /// The line(s) to print: what the process printed, or what the check says in its place.
        var text: String
    }

    /// The process being waited for, so a signal that ends the check can end it too; 0: none.
    private static let running = Atomic<Int32>(0)

    /// Ends the plugin's process now, if one runs (from a signal handler's queue).
    @Sendable static func killRunning() {
        let pid = running.load(ordering: .sequentiallyConsistent)
        if pid > 0 { kill(pid, SIGKILL) }
    }

    /// Runs this binary with `arguments` to check `descriptor`, and kills it if it has not ended
    /// after `timeout` seconds.
    static func run(_ descriptor: PluginDescriptor, limit: Double, timeout: Double, arguments: [String]) -> Verdict {
        let label = "\(descriptor.name) (\(descriptor.kind.rawValue))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        do {
            try process.run()
        } catch {
            return Verdict(kind: .noVerdict, text: "FAIL \(label): the check could not start a process for it: \(error)")
        }
        running.store(process.processIdentifier, ordering: .sequentiallyConsistent)
        defer { running.store(0, ordering: .sequentiallyConsistent) }
        try? output.fileHandleForWriting.close()
        // Read while it runs, so that a long message cannot fill the pipe and block the process.
        let text = Locked("")
        let read = DispatchGroup()
        read.enter()
        DispatchQueue.global().async {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            text.withLock { $0 = String(decoding: data, as: UTF8.self) }
            read.leave()
        }
        var timedOut = false
        if ended.wait(timeout: .now() + min(max(timeout, 0), 86_400)) == .timedOut {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            ended.wait()
        }
        read.wait()
        // Killed because the check itself is ending on a signal: that exit is under way.
        ExitOnSignals.parkIfExiting()
        let printed = text.withLock { $0 }.trimmingCharacters(in: .newlines)
        if timedOut {
            let message = "plugin '\(descriptor.name)' did not finish loading within the launch limit "
                + "(\(ReportNumber.seconds(limit)) s) and could not be stopped"
            return Verdict(kind: .failed, text: "FAIL \(label): \(message)")
        }
        let status = process.terminationStatus
        let exited = process.terminationReason == .exit
        if exited && status == 0 && printed.hasPrefix("ok ") { return Verdict(kind: .loaded, text: printed) }
        if exited && status == 65 && printed.hasPrefix("FAIL ") { return Verdict(kind: .failed, text: printed) }
        let how = exited ? "exit status \(status)" : "signal \(status)"
        let said = printed.isEmpty ? "" : printed + "\n"
        return Verdict(
            kind: .noVerdict, text: said + "FAIL \(label): the check of this plugin ended without a verdict (\(how))")
    }
}
