import Logging

/// The operations a plugin sees (SPEC 6.2), for one plugin in one launch of the app. Lua plugins
/// reach it through the bridge; Swift plugins call it directly.
///
/// Threading: main executor only. Calls made after the app ended do nothing.
public final class PluginContext {
    unowned let host: LifelineHost
    /// The plugin's name.
    public let pluginName: String
    /// The plugin's index in this launch's load order.
    let index: Int
    let generation: Int
    /// The plugin's log; `print` and `lifeline.log` go here.
    public let logger: Logger
    /// Set when the plugin failed to load: its calls then do nothing.
    var isUnloaded = false

    init(host: LifelineHost, pluginName: String, index: Int, generation: Int) {
        self.host = host
        self.pluginName = pluginName
        self.index = index
        self.generation = generation
        var logger = Logger(label: "plugin.\(pluginName)")
        logger.logLevel = host.logger.logLevel
        self.logger = logger
    }

    var isCurrent: Bool { host.isCurrent(self) }

    /// Subscribes a handler that reports its own outcome (the bridge's form; Swift plugins use
    /// `on(_:perform:)`). Returns a subscription id for `cancelSubscription`.
    @discardableResult
    public func subscribe(_ event: LifecycleEventName, handler: @escaping EventHandler) -> Int {
        guard isCurrent else { return 0 }
        return host.subscribe(self, event: event, handler: handler)
    }

    /// Cancels a subscription; harmless if it is gone already.
    public func cancelSubscription(_ id: Int) { if isCurrent { host.unsubscribe(id) } }

    /// T1: begins a background task. Returns its id (> 0), or 0 if the app is not running it.
    public func beginBackgroundTask(name: String?, expirationHandler: PluginCallback?) -> Int {
        guard isCurrent else { return 0 }
        return host.beginBackgroundTask(self, name: name, expirationHandler: expirationHandler)
    }

    /// T6: ends a background task. Returns false, with iOS's warning, if it is unknown or ended.
    @discardableResult
    public func endBackgroundTask(_ id: Int) -> Bool {
        guard isCurrent else { return false }
        return host.endBackgroundTask(self, id: id)
    }

    /// T2: seconds of background time left; `.greatestFiniteMagnitude` in the foreground.
    public var backgroundTimeRemaining: Double { host.backgroundTimeRemaining }

    /// The app's state: inactive, active or background.
    public var state: AppState { host.visibleState }

    /// Seconds since the host started, on the host's clock.
    public var now: Double { host.now.seconds }

    /// Seconds since 1970 on the host's clock: virtual in simulate (from a fixed epoch), real in run.
    public var epochNow: Double { host.epochAtStart + host.now.seconds }

    /// A one-shot timer whose callback reports its own outcome (the bridge's form; Swift plugins
    /// use `after(_:perform:)`). Returns its id for `cancelTimer`.
    @discardableResult
    public func startTimer(after seconds: Double, callback: @escaping PluginCallback) -> Int {
        guard isCurrent else { return 0 }
        return host.startTimer(self, after: seconds, callback: callback)
    }

    /// Cancels a timer; harmless if it fired or was cancelled already.
    public func cancelTimer(_ id: Int) { if isCurrent { host.cancelTimer(id) } }
}
