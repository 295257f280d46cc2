import Foundation
import Logging

/// How the host is set up: the profile, the watchdog's scale, and what to do with a plugin that
/// fails to load.
public struct HostConfiguration: Sendable {
    /// What to do when a plugin fails to load (SPEC 7).
    public enum LoadFailurePolicy: Sendable {
        /// Stop everything: simulate and check (exit 65).
        case abort
        /// Skip that plugin and log why: run.
        case skip
    }

    public var profile: Profile
    /// How eager the simulated system is to run scheduled tasks (`--task-policy`).
    public var taskPolicy: TaskPolicy = .earliest
    /// Real handler time is multiplied by this before it is compared with a limit (W5).
    public var watchdogScale: Double
    public var loadFailurePolicy: LoadFailurePolicy
    /// The wall-clock time (seconds since 1970) of the host's start, from which os.time counts;
    /// nil: the real time when the host is made. `Simulation` fixes it, for determinism.
    public var epochAtStart: Double?
    public var logger: Logger
    /// Makes the logger of each plugin (its print and lifeline.log lines) from the plugin's name;
    /// by default, one labelled "plugin.NAME" from the process's logging system.
    public var pluginLogger: @Sendable (String) -> Logger = { Logger(label: "plugin.\($0)") }
    /// Real seconds that Lua code, once asked to stop, has to unwind before it is treated as
    /// unstoppable, like Swift code (it is stuck inside one C call).
    public var stopGrace: Double = 1
    /// The watchdog's time: CLOCK_MONOTONIC, or a clock a test moves by hand. Deadlines are set
    /// and checked on it; handler durations for the pictures stay real.
    public var watchdogClock: any WatchdogClock = MonotonicWatchdogClock()
    /// Called on the watchdog's thread when code overruns and cannot be stopped (W3): Swift code,
    /// or Lua code still running a grace after it was asked to stop. The main executor is still
    /// inside that code. The CLI writes the report there and exits.
    public var onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)?
    /// Where plugins' HTTP requests go: the scripted network in simulate, a real client in run.
    public var transport: any HTTPTransport = NoNetworkTransport()
    /// The state dir's database, which holds the plugins' stores and the background transfers;
    /// nil: stores and transfers are unavailable, and every call says so.
    public var database: StateDatabase?
    /// Where background transfers go: the scripted network in simulate, a real client in run.
    public var transferTransport: any TransferTransport = NoTransferTransport()
    /// Background transfers that run at once; the rest wait in order.
    public var transferLimit = TransferManager.defaultLimit
    /// Seeds the retry jitter, for runs that must repeat exactly (simulate); nil: random.
    public var transferJitterSeed: UInt64?
    /// Whether every call into plugin code is noted with its real duration (`Recorder.handlerCalls`),
    /// for the pictures. Off by default: it costs two clock reads a call.
    public var recordsHandlerCalls = false
    /// Told of every call into plugin code, on the main executor, with its plugin, its handler and
    /// its real duration in seconds (the metrics page counts them). nil: nothing is told, and a call
    /// costs nothing more; set, a call costs two clock reads and the closure's own work.
    public var onHandlerCall: (@Sendable (_ plugin: String, _ handler: HandlerName, _ seconds: Double) -> Void)?
    /// Reads the plugins again from where they came from, for a reload (SIGHUP, `lifeline ctl
    /// reload`, a scenario's `reload` line); nil: a reload takes the same descriptors again, so
    /// only the plugins without a fingerprint get a new generation. Throws when the plugins'
    /// folder cannot be read, or two plugins share a name: the reload then changes nothing.
    public var reloadPlugins: (@Sendable () throws(LifelineError) -> [PluginDescriptor])?

    public init(
        profile: Profile = .ios13, watchdogScale: Double = 1, loadFailurePolicy: LoadFailurePolicy = .abort,
        logger: Logger = Logger(label: "lifeline"),
        onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)? = nil
    ) {
        self.profile = profile
        self.watchdogScale = watchdogScale
        self.loadFailurePolicy = loadFailurePolicy
        self.logger = logger
        self.onUnpreemptibleOverrun = onUnpreemptibleOverrun
    }
}

/// Swift code that overran a watchdog limit and is still running (W3).
public enum UnpreemptibleOverrun: Sendable {
    /// A handler overran: the app is terminated, and the recorder holds the report to write.
    case terminated(Termination, Recorder)
    /// A plugin overran the launch limit while loading: a load failure (exit 65).
    case loadFailed(LifelineError)
}
