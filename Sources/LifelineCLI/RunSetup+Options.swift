import Lifeline

extension RunSetup {
    /// The setup `run` and `simulate` share, from the options they share: the plugins (with a
    /// scenario, also those its `uses` lines name), the profile with its overrides, the state dir,
    /// where the report goes, and whether the run is drawn.
    init(
        _ pluginOptions: PluginOptions, _ profileOptions: ProfileOptions, pictures: PictureOptions,
        scenario: Scenario? = nil, stateDirectory: String?, reportPath: String?
    ) throws(LifelineError) {
        self.init(plugins: try pluginOptions.descriptors(for: scenario), profile: try profileOptions.resolved(scenario: scenario))
        self.stateDirectory = stateDirectory
        self.reportPath = reportPath
        isDrawn = pictures.any
        taskPolicy = profileOptions.policy
        // A reload reads the folder again as it is then, with the same options and scenario. Only
        // a live run and a scenario with a reload step can reload: the others fingerprint nothing.
        if scenario?.reloads ?? true {
            reloadPlugins = { () throws(LifelineError) in try pluginOptions.descriptors(for: scenario) }
        }
    }
}
