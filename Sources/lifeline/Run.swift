import ArgumentParser
import Dispatch
import Foundation
import Lifeline
import LifelineHTTP
import Logging

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the plugins live, on the real clock, driven by signals.",
        discussion: """
            Example:
              lifeline run --plugins plugins --state-dir /tmp/lifeline &
              kill -USR1 $!   # background
              kill -USR2 $!   # foreground
              kill -TERM $!   # terminate

            Signals:
              SIGUSR1           background
              SIGUSR2           foreground
              SIGTERM, SIGINT   terminate
              a second SIGINT   kill
              SIGQUIT           force-quit: cancels every background transfer
                                (reason userForceQuit), then kills the app

            Background transfers live in the state dir and go on across restarts:
            a host started again on the same dir resumes the unfinished ones.

            When a rule terminates the app, a crash report is written to
            <state-dir>/reports/ and the exit code is 1.
            """
    )

    @OptionGroup var pluginOptions: PluginOptions

    @Option(help: "Where the plugins' stores and crash reports live (default: ~/.local/state/lifeline).")
    var stateDir: String?

    @Option(help: "Also write the whole JSON report here when the app ends.")
    var report: String?

    @OptionGroup var profileOptions: ProfileOptions

    @OptionGroup var pictures: PictureOptions

    func validate() throws { checkWritable(report, "--report") }

    func run() throws {
        bootstrapLogging(level: profileOptions.level)
        let stateDirectory = stateDir ?? (NSHomeDirectory() + "/.local/state/lifeline")
        let reportPath = report
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let descriptors = try pluginOptions.descriptors()
            let colour = Terminal.colours(2)
            let recorder = Recorder(
                profile: try profileOptions.resolved(), keepsTimeline: reportPath != nil || pictures.any
            ) { event in
                // Log lines reach stderr through the logger, on the same clock.
                guard event.event != "log" else { return }
                FileHandle.standardError.write(Data((LiveLine.text(event, colour: colour) + "\n").utf8))
            }
            let clock = MonotonicClock()
            let executor = MainExecutor(clock: clock)
            // The real network: async-http-client, shared by every plugin.
            let transport = AsyncHTTPTransport()
            defer { transport.shutdown() }
            var configuration = HostConfiguration(
                profile: try profileOptions.resolved(), loadFailurePolicy: .skip,
                onUnpreemptibleOverrun: { overrun in
                    // W3: Swift code cannot be stopped; report now and end the process.
                    switch overrun {
                    case .terminated(let termination, let recorder):
                        CrashReport.write(
                            termination, recorder: recorder, stateDir: stateDirectory, reportPath: reportPath)
                        Foundation.exit(1)
                    case .loadFailed(let error):
                        exitWithError(error)
                    }
                })
            configuration.transport = transport
            configuration.transferTransport = transport
            configuration.recordsHandlerCalls = pictures.any
            configuration.database = try StateDatabase.open(stateDirectory: stateDirectory)
            let host = LifelineHost(
                configuration: configuration, plugins: descriptors, executor: executor, recorder: recorder)
            let signals = SignalSteps(
                clock: clock,
                perform: { signal, step in
                    // Each signal is echoed on the timeline's clock, with what it does now.
                    let stamp = "[\(TimelineEvent.paddedSeconds(host.now.seconds))s]"
                    var what = step.description
                    if step == .terminate && host.state == .suspended {
                        what += " (the app is suspended: it ends without willTerminate, as on iOS)"
                    }
                    FileHandle.standardError.write(Data(LiveLine.paint("\(stamp) -- \(signal): \(what)\n", "1", colour).utf8))
                    do {
                        try host.perform(step)
                    } catch {
                        host.logger.warning("signal ignored: \(signal) asks for \(step.description), but \(error)")
                    }
                },
                kill: {
                    // A second SIGINT ends the app at once, even while a handler is still running:
                    // no notification, nothing more runs.
                    FileHandle.standardError.write(Data("-- SIGINT again: kill\nlifeline: killed\n".utf8))
                    if let reportPath {
                        try? writeFile(recorder.report().serialized(pretty: true) + "\n", to: reportPath)
                    }
                    Foundation.exit(recorder.exitCode)
                })
            executor.schedule(at: clock.now) { try? host.perform(.launch) }
            executor.run(shouldStop: { host.isStopped || host.state == .ended }, afterJob: host.afterJob)
            signals.cancel()
            host.shutdown()
            if let termination = recorder.termination {
                CrashReport.write(termination, recorder: recorder, stateDir: stateDirectory, reportPath: reportPath)
            } else if let reportPath {
                try writeFile(recorder.report().serialized(pretty: true) + "\n", to: reportPath)
            }
            try pictures.write(
                [RenderedRun(title: "lifeline run", report: recorder.report(), calls: recorder.handlerCalls)],
                stdoutTaken: reportPath == "-")
            return recorder.exitCode
        }
    }
}

/// Crash reports of `lifeline run` (SPEC 2.5): the termination object, under <state-dir>/reports/.
enum CrashReport {
    static func write(_ termination: Termination, recorder: Recorder, stateDir: String, reportPath: String?) {
        let folder = stateDir + "/reports"
        let millis = Int64(Date().timeIntervalSince1970 * 1000)
        let path = "\(folder)/crash-\(millis)-\(termination.kind.rawValue).json"
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try writeFile(termination.json.serialized(pretty: true) + "\n", to: path)
            FileHandle.standardError.write(Data("lifeline: crash report written to \(path)\n".utf8))
        } catch {
            FileHandle.standardError.write(Data("lifeline: cannot write crash report to \(path): \(error)\n".utf8))
        }
        if let reportPath { try? writeFile(recorder.report().serialized(pretty: true) + "\n", to: reportPath) }
    }
}

/// Maps signals to steps (SPEC 2.5) and posts them to the main executor. The second SIGINT does
/// not wait for the executor: a kill must work even while a handler is stuck.
final class SignalSteps: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let queue = DispatchQueue(label: "lifeline.signals")
    private var interrupts = 0  // touched on `queue` only

    init(clock: MonotonicClock, perform: @escaping (String, Step) -> Void, kill: @escaping @Sendable () -> Void) {
        nonisolated(unsafe) let perform = perform
        let post: @Sendable (String, Step) -> Void = { signal, step in clock.post { perform(signal, step) } }
        let map: [(Int32, () -> Void)] = [
            (SIGUSR1, { post("SIGUSR1", .background) }),
            (SIGUSR2, { post("SIGUSR2", .foreground) }),
            (SIGTERM, { post("SIGTERM", .terminate) }),
            (SIGQUIT, { post("SIGQUIT", .forceQuit) }),
            (SIGINT, { [unowned self] in
                interrupts += 1
                if interrupts == 1 { post("SIGINT", .terminate) } else { kill() }
            }),
        ]
        for (signo, handler) in map {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler(handler: handler)
            source.resume()
            sources.append(source)
        }
    }

    func cancel() { for s in sources { s.cancel() } }
}

/// A timeline line of `lifeline run`, coloured on a terminal: lifecycle in bold, terminations and
/// errors in red, expiry in yellow.
enum LiveLine {
    static func text(_ event: TimelineEvent, colour: Bool) -> String {
        let line = Terminal.safe(event.humanLine, indent: "    ")
        guard colour else { return line }
        switch event.event {
        case "terminated", "watchdog", "pluginError", "killed", "forceQuit": return paint(line, "31", true)
        case "taskExpiring", "endUnknownTask": return paint(line, "33", true)
        case "suspended": return paint(line, "2", true)
        default:
            return LifecycleEventName(rawValue: event.event) != nil && !event.event.hasPrefix("transfer")
                ? paint(line, "1", true) : line
        }
    }

    static func paint(_ text: String, _ code: String, _ colour: Bool) -> String {
        guard colour else { return text }
        let newline = text.hasSuffix("\n")
        let body = newline ? String(text.dropLast()) : text
        return "\u{1B}[\(code)m\(body)\u{1B}[0m" + (newline ? "\n" : "")
    }
}
