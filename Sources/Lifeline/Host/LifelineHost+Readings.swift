/// What observers outside the host (the metrics page) read of it, on the main executor only
/// (`LiveRun.onMainExecutor`): nothing here changes the host.
extension LifelineHost {
    /// T2: seconds of background time left now; `.greatestFiniteMagnitude` while the app is not
    /// in the background, as iOS's `backgroundTimeRemaining` says in the foreground.
    public var backgroundTimeRemaining: Double { parts.tasks.backgroundTimeRemaining }

    /// Each plugin the app holds now, by name, with its code: a reload's old generation may still
    /// be there beside the new one, under the same name.
    public var pluginCodes: [(name: String, code: any PluginCode)] {
        session.plugins.map { ($0.ref.name, $0.code) }
    }
}
