#if canImport(Glibc)
import Glibc
#endif
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
    /// How eager the system is to run scheduled tasks (`--task-policy`); nil: the scenario's
    /// `task-policy` line, else `earliest`.
    public var taskPolicy: TaskPolicy?
    /// Reads the plugins again for a reload (`HostConfiguration.reloadPlugins`); nil: a reload
    /// takes `plugins` again.
    public var reloadPlugins: (@Sendable () throws(LifelineError) -> [PluginDescriptor])?
    /// Handed to the host's configuration (`HostConfiguration.onHandlerCall`): told of every call
    /// into plugin code with its real duration, as the metrics page counts them.
    public var onHandlerCall: (@Sendable (_ plugin: String, _ handler: HandlerName, _ seconds: Double) -> Void)?

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
        configuration.onHandlerCall = onHandlerCall
        configuration.taskPolicy = taskPolicy ?? .earliest
        configuration.reloadPlugins = reloadPlugins
        if let stateDirectory { configuration.database = try StateDatabase.open(stateDirectory: stateDirectory) }
        return configuration
    }

    /// Writes `report` to `reportPath`, when there is one.
    public func writeReport(_ recorder: Recorder) throws(LifelineError) {
        if let reportPath { try RunOutput.writeReport(recorder, to: reportPath) }
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

    /// Writes `recorder`'s report to `path`, the bytes of `text(of: recorder.report())`, streamed
    /// as it is written (`Recorder.writeReport`).
    public static func writeReport(_ recorder: Recorder, to path: String) throws(LifelineError) {
        try writeStreamed(to: path) { sink throws(LifelineError) in try recorder.writeReport(sink) }
    }

    /// Writes what `produce` gives its sink to `path`, replacing the file at once (no reader sees
    /// half of it): into a new file beside it, renamed over it when complete. `-` is standard
    /// output.
    public static func writeStreamed(
        to path: String, _ produce: ((UnsafeRawBufferPointer) throws(LifelineError) -> Void) throws(LifelineError) -> Void
    ) throws(LifelineError) {
        func failure(_ errno: Int32) -> LifelineError {
            .internalError("cannot write '\(path)': \(String(cString: strerror(errno)))")
        }
        func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(LifelineError) {
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw failure(errno)
                }
                done += n
            }
        }
        if path == "-" {
            try produce { bytes throws(LifelineError) in try writeAll(1, bytes) }
            return
        }
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let leaf = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let temporary = folder + "." + leaf + ".\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw failure(errno) }
        do {
            try produce { bytes throws(LifelineError) in try writeAll(fd, bytes) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        let closed = close(fd)
        if closed != 0 || rename(temporary, path) != 0 {
            let error = errno
            unlink(temporary)
            throw failure(error)
        }
    }

    /// Writes `text` to the file at `path`, replacing it at once (no reader sees half of it);
    /// `-` is standard output.
    public static func write(_ text: String, to path: String) throws(LifelineError) {
        try writeStreamed(to: path) { sink throws(LifelineError) in
            var text = text
            // withUTF8 rethrows untyped: carry the error out as a Result.
            try text.withUTF8 { bytes in Result { () throws(LifelineError) in try sink(UnsafeRawBufferPointer(bytes)) } }.get()
        }
    }
}
