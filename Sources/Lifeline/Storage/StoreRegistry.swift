/// The plugins' stores and files, by plugin name, each made on first use. They live in the state
/// dir (its database, its `files` folder) and outlive every launch of the app.
///
/// Threading: main executor only.
final class StoreRegistry {
    private let database: StateDatabase?
    /// Each plugin's quotas (plugin.toml's `[limits]`), by name; nil: the default.
    private var quotas: [String: Quotas]
    private var stores: [String: PluginStore] = [:]
    private var files: [String: PluginFiles] = [:]

    /// What a plugin's store and files may hold, in bytes.
    struct Quotas {
        var store: Int?
        var files: Int?
    }

    init(database: StateDatabase?, quotas: [String: Quotas]) {
        self.database = database
        self.quotas = quotas
    }

    /// A reload's new generation brings its plugin.toml's quotas: the store and files already
    /// made take them at once (the old generation's too, since both are one plugin's data).
    func setQuotas(_ new: Quotas, for plugin: String) {
        quotas[plugin] = new
        stores[plugin]?.quota = new.store ?? PluginStore.defaultQuota
        files[plugin]?.quota = new.files ?? PluginFiles.defaultQuota
    }

    /// The plugin's store; throws when the host has no state dir.
    func store(for plugin: String) throws(StoreError) -> PluginStore {
        if let store = stores[plugin] { return store }
        guard let database else {
            throw StoreError("the host was started without a state dir, so there is no store")
        }
        let quota = quotas[plugin]?.store ?? PluginStore.defaultQuota
        let store = PluginStore(plugin: plugin, quota: quota, database: database)
        stores[plugin] = store
        return store
    }

    /// The plugin's files; throws when the host has no state dir.
    func files(for plugin: String) throws(FileError) -> PluginFiles {
        if let files = files[plugin] { return files }
        guard let database else {
            throw FileError("the host was started without a state dir, so there are no files")
        }
        let quota = quotas[plugin]?.files ?? PluginFiles.defaultQuota
        let made = PluginFiles(plugin: plugin, root: database.filesRoot + "/" + plugin, quota: quota)
        files[plugin] = made
        return made
    }
}
