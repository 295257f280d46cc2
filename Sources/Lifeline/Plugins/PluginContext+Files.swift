extension PluginContext {
    /// The plugin's files, in `<state-dir>/files/<plugin>/`: the folder its background transfers
    /// read and write too, so an upload can send a file the plugin wrote. Throws when the app is
    /// not running or the host has no state dir.
    public func files() throws(FileError) -> PluginFiles {
        guard isCurrent else { throw FileError("the app is not running, so its files cannot be used") }
        return try parts.stores.files(for: pluginName)
    }
}
