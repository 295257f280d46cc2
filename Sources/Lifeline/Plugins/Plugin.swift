/// The language a plugin is written in.
public enum PluginKind: String, Sendable {
    case lua
    case swift
    /// A shared library loaded over the C ABI (lifeline_plugin.h).
    case native
}

/// One live instance of a plugin, for one launch of the app. The core knows nothing of what runs
/// inside it: it calls `start` once, then the handlers the plugin registered through its context.
///
/// Threading: main executor only, except `preemptor`, which the watchdog uses from its thread.
public protocol PluginInstance: PluginCode {
    var name: String { get }
    var kind: PluginKind { get }
    /// Runs the plugin's setup (init.lua, or a Swift plugin's `load`) against its context.
    func start(_ context: PluginContext) -> CallOutcome
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
    /// Fingerprints the plugin's files as they are now (`PluginFingerprint`), which a reload
    /// compares with what was loaded; nil, or a nil answer: it cannot tell, and a reload always
    /// gives the plugin a new generation. Called only by a host that can be reloaded, so a run
    /// that never reloads reads no file for it.
    public var fingerprint: (@Sendable () -> String?)?
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

extension PluginDescriptor {
    /// What plugin.toml says of any plugin, whatever its language: its network permissions, its
    /// store and files quotas, its task identifiers; and the fingerprint of its `folder`, which a
    /// reload compares.
    public mutating func apply(_ manifest: PluginManifest, folder: String) {
        network = (try? NetworkPermissions(manifest.networkPermissions)) ?? .none  // checked when parsed
        storeQuota = manifest.storeQuota
        filesQuota = manifest.filesQuota
        taskIdentifiers = manifest.taskIdentifiers
        fingerprint = { PluginFingerprint.of(folder: folder) }
    }
}
