/// `lifeline simulate`: replays a scenario in virtual time and returns the recorder that holds the
/// report (SPEC 2.2, 2.3).
public enum Simulation {
    /// Where os.time starts in a simulation: 2026-01-01T00:00:00Z, the same on every run.
    public static let fixedEpoch: Double = 1_767_225_600

    /// By default the simulation stops at the last step + 15 minutes at the latest.
    public static let defaultGrace: Double = 15 * 60

    /// Runs `scenario` with the setup's plugins, profile and state dir (none: a temporary one,
    /// removed afterwards). `onUnpreemptibleOverrun` is called on the watchdog's thread when
    /// Swift code overruns and cannot be stopped (W3); `lifeline simulate` writes its verdict
    /// there and exits. Throws a load failure (exit 65) or an internal error.
    ///
    /// - Parameter database: the state to use in place of the setup's state dir (`lifeline
    ///   explore` empties one between its runs).
    public static func run(
        scenario: Scenario, setup: RunSetup, until: HostTime? = nil, database: StateDatabase? = nil,
        onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)? = nil
    ) throws(LifelineError) -> Recorder {
        var setup = setup
        // The flag wins over the scenario's own line, as a flag wins over a file.
        setup.taskPolicy = setup.taskPolicy ?? scenario.taskPolicy
        var configuration = try setup.hostConfiguration(
            loadFailurePolicy: .abort, onUnpreemptibleOverrun: onUnpreemptibleOverrun)
        if let database { configuration.database = database }
        return try run(scenario: scenario, plugins: setup.plugins, configuration: configuration, until: until)
    }

    /// Runs `scenario` against the plugins. Throws a load failure (exit 65) or an internal error.
    ///
    /// - Parameter until: the latest time to run to; default, the last step + 15 minutes.
    /// - Parameter configuration: without a `database`, the plugins' stores live in a temporary
    ///   state dir that is removed afterwards.
    public static func run(
        scenario: Scenario, plugins: [PluginDescriptor], configuration: HostConfiguration, until: HostTime? = nil
    ) throws(LifelineError) -> Recorder {
        guard configuration.database != nil else {
            return try StateDatabase.withTemporary { database throws(LifelineError) in
                var configuration = configuration
                configuration.database = database
                return try run(scenario: scenario, plugins: plugins, configuration: configuration, until: until)
            }
        }
        // A step the profile has no API for cannot be played: ios6 never fetches.
        for entry in scenario.entries {
            if let lack = configuration.profile.lacks(entry.step) {
                throw .badInput("\(scenario.fileName):\(entry.line): \(lack); run it with --profile ios13")
            }
        }
        let executor = MainExecutor(clock: VirtualClock())
        // simulate never touches the real network: the scenario's http lines script it.
        let network = ScriptedNetwork(rules: scenario.network, executor: executor, fileName: scenario.fileName)
        // A recording's body files are read when their answers are given: a missing one is the
        // scenario's fault, said before anything runs.
        for rule in scenario.network {
            for case .recorded(_, _, let file?, _) in rule.results where network.recordedBody(file) == nil {
                throw .badInput("\(scenario.fileName):\(rule.line): the body file '\(file)' cannot be read")
            }
        }
        var configuration = configuration
        configuration.loadFailurePolicy = .abort
        configuration.epochAtStart = configuration.epochAtStart ?? fixedEpoch
        configuration.transport = network
        configuration.transferTransport = network
        configuration.transferJitterSeed = configuration.transferJitterSeed ?? 0
        let host = LifelineHost(configuration: configuration, plugins: plugins, executor: executor)
        defer { host.shutdown() }
        var transitionError: Lifecycle.TransitionError?
        for entry in scenario.entries {
            executor.schedule(at: entry.time) {
                do throws(Lifecycle.TransitionError) {
                    try host.perform(entry.step)
                } catch {
                    transitionError = transitionError ?? error
                }
            }
        }
        let lastStep = scenario.entries.last?.time ?? .zero
        let limit = until ?? lastStep.adding(seconds: defaultGrace)
        executor.run(
            until: limit, shouldStop: { host.isStopped || transitionError != nil }, afterJob: host.afterJob)
        if let error = host.loadError { throw error }
        if let error = transitionError {
            throw .internalError("the scenario was valid but the host refused a step: \(error)")
        }
        return host.recorder
    }
}
