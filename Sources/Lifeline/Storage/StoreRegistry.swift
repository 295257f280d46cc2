/// The plugins' stores, by plugin name, each made on first use. They live in the state dir's
/// database and outlive every launch of the app.
///
/// Threading: main executor only.
final class StoreRegistry {
    private let database: StateDatabase?
    private let plugins: [PluginDescriptor]
    private var stores: [String: PluginStore] = [:]

    init(database: StateDatabase?, plugins: [PluginDescriptor]) {
        self.database = database
        self.plugins = plugins
    }

    /// The plugin's store; throws when the host has no state dir.
    func store(for plugin: String) throws(StoreError) -> PluginStore {
        if let store = stores[plugin] { return store }
        guard let database else {
            throw StoreError("the host was started without a state dir, so there is no store")
        }
        let quota = plugins.first { $0.name == plugin }?.storeQuota ?? PluginStore.defaultQuota
        let store = PluginStore(plugin: plugin, quota: quota, database: database)
        stores[plugin] = store
        return store
    }
}
