/// What became of a call into plugin code.
public enum CallOutcome: Equatable, Sendable {
    /// The code returned.
    case returned
    /// The code raised an error: a `pluginError`.
    case raised(message: String, traceback: String)
    /// The host stopped the code inside its VM (W2); `traceback` says where.
    case preempted(traceback: String)
}

/// A handler for a lifecycle notification, as the core calls it.
public typealias EventHandler = (LifecycleEvent) -> CallOutcome
/// A callback the core calls: a timer, an expiration handler.
public typealias PluginCallback = () -> CallOutcome

/// What the host's components need of a loaded plugin's code, beyond calling the handlers it
/// registered: how to stop it, and how to close it. `PluginInstance` adds how it starts.
///
/// Threading: main executor only, except `preemptor`, which the watchdog uses from its thread.
public protocol PluginCode: AnyObject {
    /// How the watchdog stops this plugin's code; nil when it cannot (W3).
    var preemptor: (any Preemptible)? { get }
    /// Forgets a stop that the watchdog asked for after the code had already returned.
    func resetPreemption()
    /// Frees everything the instance holds. Nothing is called on it afterwards.
    func close()
    /// Counts `bytes` that the report keeps for an event the plugin caused and that the host
    /// records whatever the plugin's cap says (an error it raised), against that cap.
    func chargeRecorded(_ bytes: Int)
    /// A reload is ending this instance's generation: from now on a call that would start new
    /// work (a task, a timer, a request) is refused, while what it began may still end.
    func beginUnloading()
}

extension PluginCode {
    /// Swift plugins have no memory cap.
    public func chargeRecorded(_ bytes: Int) {}
    /// Swift plugins are refused through their context (`PluginContext.isUnloading`).
    public func beginUnloading() {}
}

/// Which watchdog limit plugin code runs under (SPEC 4.3).
public enum WatchdogLimit: Sendable {
    /// "Other transitions": timers, coroutine resumes.
    case transition
    /// "Each expiration handler": code that runs because its task expired.
    case expirationHandler
}
