import Foundation

/// What a run of the host is given, the same whether it runs live (`LiveRun`) or in virtual time
/// (`Simulation`): the plugins, the profile, the state dir, and where the report goes. `lifeline
/// run` and `lifeline simulate` each fill one from their options and hand it on.
public struct RunSetup: Sendable {
    public var plugins: [PluginDescriptor]
    /// The budget and watchdog figures, overrides applied.
    public var profile: Profile
    /// Real handler time is multiplied by this before it is compared with a limit (W5).
    public var watchdogScale: Double = 1
    /// Where the plugins' stores, the background transfers and the crash reports live. nil: a
    /// simulation uses a temporary one, removed afterwards; a live run uses
    /// `LiveRun.defaultStateDirectory`.
    public var stateDirectory: String?
    /// Where the whole JSON report is written when the run ends (a live run also writes it when
    /// the app is killed or crashes); `-` is standard output; nil: nowhere.
    public var reportPath: String?
    /// Whether the run will be drawn (an HTML page, a trace, a lane chart): every call into plugin
    /// code is then noted with its real duration, and a live run keeps its timeline for the
    /// picture, as it does for a report.
    public var isDrawn = false

    public init(plugins: [PluginDescriptor], profile: Profile = .ios13) {
        self.plugins = plugins
        self.profile = profile
    }

    /// The host's configuration for this setup, with the state dir's database open (and the
    /// folder made) when there is a state dir.
    public func hostConfiguration(
        loadFailurePolicy: HostConfiguration.LoadFailurePolicy,
        onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)?
    ) throws(LifelineError) -> HostConfiguration {
        var configuration = HostConfiguration(
            profile: profile, watchdogScale: watchdogScale, loadFailurePolicy: loadFailurePolicy,
            onUnpreemptibleOverrun: onUnpreemptibleOverrun)
        configuration.recordsHandlerCalls = isDrawn
        if let stateDirectory { configuration.database = try StateDatabase.open(stateDirectory: stateDirectory) }
        return configuration
    }

    /// Writes `report` to `reportPath`, when there is one.
    public func writeReport(_ report: JSONValue) throws(LifelineError) {
        if let reportPath { try RunOutput.write(RunOutput.text(of: report), to: reportPath) }
    }
}

/// The files a run leaves: its report, a crash report, its pictures.
public enum RunOutput {
    /// A JSON document as a run's files hold it: pretty, ending in a newline. Every writer of the
    /// report (`--report`, a crash, a kill) and of a crash report goes through here, so the same
    /// run gives the same bytes whichever path wrote them.
    public static func text(of document: JSONValue) -> String {
        document.serialized(pretty: true) + "\n"
    }

    /// Writes `recorder`'s report to `path`, as `text(of: recorder.report())` reads.
    public static func writeReport(_ recorder: Recorder, to path: String) throws(LifelineError) {
        try write(text(of: recorder.report()), to: path)
    }

    /// Writes `text` to the file at `path`, replacing it at once (no reader sees half of it);
    /// `-` is standard output.
    public static func write(_ text: String, to path: String) throws(LifelineError) {
        if path == "-" {
            FileHandle.standardOutput.write(Data(text.utf8))
            return
        }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw .internalError("cannot write '\(path)': \(error.localizedDescription)")
        }
    }
}
