extension LifelineHost {
    /// `lifeline check`: loads every plugin, each on a host of its own under the launch limit,
    /// runs nothing else, and says which failed and why (nil: loaded). No app is launched.
    public static func check(
        configuration: HostConfiguration, plugins: [PluginDescriptor]
    ) -> [(plugin: PluginDescriptor, failure: String?)] {
        var configuration = configuration
        configuration.loadFailurePolicy = .skip
        if configuration.database == nil {
            // A plugin may use its store while it loads; check keeps nothing it writes.
            if let result = try? StateDatabase.withTemporary({ database throws(LifelineError) in
                configuration.database = database
                return check(configuration: configuration, plugins: plugins)
            }) {
                return result
            }
        }
        return plugins.sorted { $0.name < $1.name }.map { descriptor in
            // A host per plugin, so nothing one plugin does (T8 while loading, say) reaches the next.
            let host = LifelineHost(
                configuration: configuration, plugins: [descriptor], executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            return (descriptor, host.loadForCheck(descriptor))
        }
    }
}
