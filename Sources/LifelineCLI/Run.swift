import ArgumentParser
import Foundation
import Lifeline
import LifelineHTTP
import LifelineMetrics

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the plugins live, on the real clock, driven by signals and `lifeline ctl`.",
        discussion: """
            Example:
              lifeline run --plugins plugins --state-dir /tmp/lifeline &
              kill -USR1 $!   # background
              kill -USR2 $!   # foreground
              lifeline ctl --state-dir /tmp/lifeline fetch
              kill -TERM $!   # terminate

            Signals:
              SIGUSR1           background
              SIGUSR2           foreground
              SIGHUP            reload the plugins: check them all, then give each
                                changed one a new generation (docs/operations.md)
              SIGTERM, SIGINT   terminate
              a second SIGINT   kill
              SIGQUIT           force-quit: cancels every background transfer
                                (reason userForceQuit), then kills the app

            `lifeline ctl --state-dir DIR ACTION` sends any scenario action (fetch,
            push JSON, run-tasks, charging on|off, network on|off, memory-warning,
            ...) through <state-dir>/control.sock; see `lifeline ctl --help`.

            Background transfers live in the state dir and go on across restarts:
            a host started again on the same dir resumes the unfinished ones.

            When a rule terminates the app, a crash report is written to
            <state-dir>/reports/ and the exit code is 1.

            --metrics 127.0.0.1:9464 serves Prometheus' /metrics there (docs/operations.md).
            """
    )

    @OptionGroup var pluginOptions: PluginOptions

    @Option(help: "Where the plugins' stores and crash reports live (default: ~/.local/state/lifeline).")
    var stateDir: String?

    @Option(help: "Also write the whole JSON report here when the app ends.")
    var report: String?

    @Option(help: "How long a `lifeline ctl` step may wait for the app to carry it out, in seconds.")
    var ctlTimeout: Double = 30

    @Option(
        help: ArgumentHelp(
            "Serve Prometheus' /metrics at HOST:PORT; :PORT or PORT alone is 127.0.0.1 (port 0: any free one).",
            valueName: "host:port"))
    var metrics: String?

    @Option(
        help: ArgumentHelp(
            "Record the run as a scenario here, written as it goes: each step a signal or ctl carried out, and "
                + "each HTTP answer a plugin got (bodies in FILE.d/). An existing FILE is replaced. Replay it with "
                + "lifeline simulate --scenario FILE.",
            valueName: "file"))
    var record: String?

    @OptionGroup var profileOptions: ProfileOptions

    @OptionGroup var pictures: PictureOptions

    func validate() throws {
        if record == "-" || record == "" {
            throw ValidationError("--record takes a file: the answers' bodies go in FILE.d/ beside it")
        }
        if let record, let report, URL(fileURLWithPath: record).standardized == URL(fileURLWithPath: report).standardized {
            throw ValidationError("--record and --report name one file, '\(record)': the report would write over the recording")
        }
        checkWritable(record, "--record")
        guard ctlTimeout > 0, ctlTimeout <= 86_400 else {
            throw ValidationError("--ctl-timeout takes a number of seconds above 0, at most 86400 (a day)")
        }
        checkWritable(report, "--report")
        if let metrics {
            do { _ = try MetricsAddress(parsing: metrics) } catch { throw ValidationError(error.message) }
        }
    }

    func run() throws {
        bootstrapLogging(level: profileOptions.level)
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            var setup = try RunSetup(
                pluginOptions, profileOptions, pictures: pictures, stateDirectory: stateDir, reportPath: report)
            let hostMetrics = metrics == nil ? nil : HostMetrics()
            if let hostMetrics { setup.onHandlerCall = { hostMetrics.noteHandlerCall(plugin: $0, handler: $1, seconds: $2) } }
            let colour = Terminal.colours(2)
            // The real network: async-http-client, shared by every plugin.
            let transport = AsyncHTTPTransport()
            defer { transport.shutdown() }
            let live = LiveRun(setup: setup, transport: transport, transferTransport: transport) { event in
                hostMetrics?.observe(event)
                // Log lines reach stderr through the logger, on the same clock.
                guard event.name != .log else { return }
                FileHandle.standardError.write(Data((LiveLine.text(event, colour: colour) + "\n").utf8))
            }
            live.colour = colour
            live.controlTimeout = ctlTimeout
            live.serviceNotifier = ServiceNotifier()
            hostMetrics?.countEarlierTerminations(inReports: LiveRun.crashReportsFolder(live.setup))
            if let record {
                live.recording = try RunRecording(path: record, profile: setup.profile, taskPolicy: setup.taskPolicy ?? .earliest)
            }
            live.onUnstoppableLoad = exitWithError
            // Bound before the plugins launch: a port in use ends the run at once (exit 69).
            let server = try hostMetrics.map { hostMetrics throws(LifelineError) in
                try MetricsServer(
                    address: try MetricsAddress(parsing: metrics!), metrics: hostMetrics,
                    refresh: MetricsServer.reading(live, into: hostMetrics))
            }
            defer { server?.close() }
            if let server {
                hostMetrics?.bootstrapMetricsSystem()
                FileHandle.standardError.write(Data("lifeline: metrics on http://\(server.address)/metrics\n".utf8))
            }
            let recorder = try live.run()
            try pictures.write(
                [RenderedRun(title: "lifeline run", report: recorder.report(), calls: recorder.handlerCalls)],
                stdoutTaken: report == "-")
            return recorder.exitCode
        }
    }
}

/// A timeline line of `lifeline run`, coloured on a terminal: lifecycle in bold, terminations and
/// errors in red, expiry in yellow.
enum LiveLine {
    static func text(_ event: TimelineEvent, colour: Bool) -> String {
        let line = Terminal.safe(event.humanLine, indent: "    ")
        guard colour else { return line }
        switch event.name {
        case .terminated, .watchdog, .pluginError, .killed, .forceQuit: return paint(line, "31")
        case .taskExpiring, .endUnknownTask: return paint(line, "33")
        case .suspended: return paint(line, "2")
        default:
            return LifecycleEventName(rawValue: event.event) != nil && !event.event.hasPrefix("transfer")
                ? paint(line, "1") : line
        }
    }

    private static func paint(_ line: String, _ code: String) -> String { "\u{1B}[\(code)m\(line)\u{1B}[0m" }
}
