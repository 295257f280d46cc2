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

/// The language a plugin is written in.
public enum PluginKind: String, Sendable {
    case lua
    case swift
}

/// One live instance of a plugin, for one launch of the app. The core knows nothing of what runs
/// inside it: it calls `start` once, then the handlers the plugin registered through its context.
///
/// Threading: main executor only, except `preemptor`, which the watchdog uses from its thread.
public protocol PluginInstance: AnyObject {
    var name: String { get }
    var kind: PluginKind { get }
    /// How the watchdog stops this plugin's code; nil when it cannot (W3).
    var preemptor: (any Preemptible)? { get }
    /// Runs the plugin's setup (init.lua, or a Swift plugin's `load`) against its context.
    func start(_ context: PluginContext) -> CallOutcome
    /// Forgets a stop that the watchdog asked for after the code had already returned.
    func resetPreemption()
    /// Frees everything the instance holds. Nothing is called on it afterwards.
    func close()
    /// Counts `bytes` that the report keeps for an event the plugin caused and that the host
    /// records whatever the plugin's cap says (an error it raised), against that cap.
    func chargeRecorded(_ bytes: Int)
}

extension PluginInstance {
    /// Swift plugins have no memory cap.
    public func chargeRecorded(_ bytes: Int) {}
}

/// A plugin the host knows how to start: it makes a fresh instance at every launch, as a new
/// process would (SPEC 2.2: "every plugin afresh").
public struct PluginDescriptor: Sendable {
    public var name: String
    public var kind: PluginKind
    /// The hosts the plugin may reach (plugin.toml's `[permissions] network`).
    public var network: NetworkPermissions = .none
    /// Bytes its store may keep (plugin.toml's `[limits] store`); nil: `PluginStore.defaultQuota`.
    public var storeQuota: Int?
    /// Bytes its files folder may hold (plugin.toml's `[limits] files`); nil: `PluginFiles.defaultQuota`.
    public var filesQuota: Int?
    /// The task identifiers it may register and submit (plugin.toml's `[background] identifiers`).
    public var taskIdentifiers: [String] = []
    /// Makes a new instance, or says why the plugin cannot be loaded (file:line where known).
    public var make: @Sendable () throws(LifelineError) -> any PluginInstance

    public init(
        name: String, kind: PluginKind, network: NetworkPermissions = .none, storeQuota: Int? = nil,
        filesQuota: Int? = nil, make: @escaping @Sendable () throws(LifelineError) -> any PluginInstance
    ) {
        self.name = name
        self.kind = kind
        self.network = network
        self.storeQuota = storeQuota
        self.filesQuota = filesQuota
        self.make = make
    }
}

/// Which watchdog limit plugin code runs under (SPEC 4.3).
public enum WatchdogLimit: Sendable {
    /// "Other transitions": timers, coroutine resumes.
    case transition
    /// "Each expiration handler": code that runs because its task expired.
    case expirationHandler
}
