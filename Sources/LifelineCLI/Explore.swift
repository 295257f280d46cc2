import ArgumentParser
import Dispatch
import Foundation
import Lifeline
import LifelineLua
import Logging

struct Explore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Search for the lifecycle that breaks a plugin, shrink it, and keep it as a scenario.",
        discussion: """
            Example:
              lifeline explore plugins
              lifeline explore plugins --only sync --runs 10000 --seed 7

            For each plugin of DIR, draws random lifecycles (steps, waits, and answers to its
            HTTP requests) in virtual time and checks each run: no termination by a rule, no
            pluginError, and the expect lines of DIR/NAME/explore.scenario, if there is one.
            That file's steps start every run, its http lines answer before the drawn ones,
            and a 'steps KIND[, KIND…]' line limits the kinds of step drawn.

            A failing run is shrunk to the smallest one that still fails the same way, and
            written as an ordinary scenario, DIR/NAME/scenarios/explore-SEED-RUN.scenario
            (--out), which lifeline test then runs: it fails until the bug is fixed.

            The same seed gives the same runs, failures and files, whatever --jobs.
            docs/explore.md has every rule.

            Exit codes:
              0   no run failed
              1   a run failed
              64  bad usage
              65  DIR, a plugin or an explore.scenario that cannot be read or loaded
              70  an internal error
            """
    )

    @Argument(help: ArgumentHelp("The folder of plugins.", valueName: "DIR"))
    var directory: String = "plugins"

    @Option(help: ArgumentHelp("Explore only these plugins (folder names, separated by commas).", valueName: "NAME[,NAME…]"))
    var only: [String] = []

    @Option(help: ArgumentHelp("The seed of the runs: a whole number, or 'random' (printed).", valueName: "SEED"))
    var seed: String = "1"

    @Option(help: ArgumentHelp("Runs per plugin (default 1000; with --time, no limit).", valueName: "N"))
    var runs: Int?

    @Option(help: ArgumentHelp("Explore until this much real time is spent, as in 30s or 5m.", valueName: "DURATION"))
    var time: String?

    @Option(help: ArgumentHelp("Run only the INDEX-th of COUNT disjoint slices of the run numbers.", valueName: "INDEX/COUNT"))
    var shard: String?

    @Option(help: "How many runs at once (default: the number of cores).")
    var jobs: Int?

    @Option(help: ArgumentHelp("Where to write the shrunk failing scenarios (default: each plugin's scenarios/).", valueName: "DIR"))
    var out: String?

    @Option(help: ArgumentHelp("Write one JUnit testcase per plugin here, for CI.", valueName: "FILE"))
    var junit: String?

    @Option(help: ArgumentHelp("Write an HTML page of the shrunk failing runs here.", valueName: "FILE"))
    var html: String?

    @Flag(help: "Print one line per run: its number and how it went.")
    var verbose = false

    @Option(help: "Multiply real handler time by this before comparing it with a watchdog limit.")
    var watchdogScale: Double = 1

    @OptionGroup var profileOptions: ProfileOptions

    func validate() throws {
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
        if let runs, runs < 1 { throw ValidationError("--runs must be at least 1") }
        if seed != "random", UInt64(seed) == nil {
            throw ValidationError("--seed takes a whole number from 0 to \(UInt64.max), or 'random'")
        }
        if let time {
            do {
                let t = try Units.parseDuration(time, at: "--time")
                guard t > .zero else { throw ValidationError("--time must be longer than 0s") }
            } catch let error as LifelineError { throw ValidationError(error.message) }
        }
        if let shard {
            do { _ = try Shard.parse(shard) } catch { throw ValidationError(error.message) }
        }
        guard watchdogScale.isFinite, watchdogScale > 0 else {
            throw ValidationError("--watchdog-scale must be a number > 0")
        }
        checkWritable(junit, "--junit")
        checkWritable(html, "--html")
    }

    func run() throws {
        // Thousands of runs: the plugins' log lines would drown the verdict. Each run's report
        // still records them, at the level --log-level lets through, for `expect log` lines.
        let level = profileOptions.level
        LoggingSystem.bootstrap { _ in SilentLogHandler(logLevel: level) }
        ExitOnSignals.install()
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let seedValue = seed == "random" ? UInt64.random(in: 0...UInt64.max) : UInt64(seed)!
            let limit = try time.map { t throws(LifelineError) in try Units.parseDuration(t, at: "--time").seconds }
            let options = ExploreOptions(
                seed: seedValue, runs: runs ?? (limit == nil ? 1000 : Int.max), seconds: limit,
                shard: try shard.map { s throws(LifelineError) in try Shard.parse(s) } ?? .all,
                jobs: jobs ?? ProcessInfo.processInfo.activeProcessorCount, verbose: verbose)
            let targets = try loadTargets()
            let session = ExploreSession(targets: targets, options: options)
            session.onUnpreemptibleOverrun = { target, run in
                // Compiled code (Swift or native) cannot be stopped: its thread is lost, and the
                // process must end.
                writeLine(
                    "FAIL \(target.plugin): a compiled (Swift or native) handler overran its watchdog limit in run \(run) and cannot be "
                        + "stopped (W3); explore ends here. See the run with: lifeline explore \(directory) --only "
                        + "\(target.plugin) --seed \(seedValue) --runs \(run + 1) --verbose")
                Foundation.exit(1)
            }
            let progressShown = isatty(STDERR_FILENO) == 1 && !verbose
            if progressShown {
                let began = ContinuousClock.now
                session.progress = { runs, failing in
                    let seconds = (ContinuousClock.now - began) / .seconds(1)
                    let rate = seconds > 0 ? Int(Double(runs) / seconds) : 0
                    FileHandle.standardError.write(
                        Data("\r\u{1B}[Kexplore: \(runs) runs, \(rate) runs/s, \(failing) failing".utf8))
                }
            }
            let start = ContinuousClock.now
            let found = try session.explore()
            let seconds = (ContinuousClock.now - start) / .seconds(1)
            let total = session.runsDone
            let rate = seconds > 0 ? Int((Double(total) / seconds).rounded()) : total
            if progressShown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            writeLine(
                "explored \(total) runs of \(targets.count) plugins in \(String(format: "%.1f", seconds)) s "
                    + "(\(rate) runs/s), seed \(seedValue)")
            var cases: [JUnit.Case] = []
            var drawn: [RenderedRun] = []
            for (index, target) in targets.enumerated() {
                guard let failure = found[index] else {
                    cases.append(JUnit.Case(classname: "explore", name: target.plugin, seconds: 0, failure: [], stderr: ""))
                    continue
                }
                let written = try keep(failure, of: target, seed: seedValue)
                writeLine(
                    "FAIL \(target.plugin): \(written.failure.summary) after \(written.steps) steps, "
                        + "shrunk from \(written.originalSteps)")
                writeLine("     \(written.path)")
                writeLine("     \(written.message)")
                if !written.reproduces {
                    writeErrorLines([
                        "\(written.path): simulating the written file did not fail the same way: the plugin may "
                            + "depend on real time (its watchdog limits); try --watchdog-scale"
                    ])
                }
                cases.append(
                    JUnit.Case(
                        classname: "explore", name: target.plugin, seconds: 0,
                        failure: ["\(written.failure.summary) (seed \(seedValue), run \(failure.number)): \(written.path)"]
                            + written.messages,
                        stderr: ""))
                if html != nil {
                    drawn.append(try draw(written, target))
                }
            }
            let failing = found.compactMap { $0 }.count
            writeLine("\(failing) of \(targets.count) plugins failing")
            if let junit { try RunOutput.write(JUnit.xml(cases, seconds: seconds), to: junit) }
            if let html { try RunOutput.write(ReportPage.html(drawn), to: html) }
            return failing > 0 ? 1 : 0
        }
    }

    /// The plugins to explore, each with its explore.scenario and the plugins it needs.
    private func loadTargets() throws(LifelineError) -> [ExploreTarget] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            throw .badInput("no folder '\(directory)': give the folder of plugins, as in 'lifeline explore plugins'")
        }
        var folders = try LuaPluginLoader.luaPluginNames(in: directory)
        folders += try LuaPluginLoader.compiledPluginRequests(in: directory).map(\.folder)
        folders.sort()
        let wanted = only.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for name in wanted where !folders.contains(name) {
            throw .badInput("--only: no plugin folder '\(name)' in '\(directory)' (there are: \(folders.joined(separator: ", ")))")
        }
        if !wanted.isEmpty { folders = folders.filter(wanted.contains) }
        guard !folders.isEmpty else { throw .badInput("no plugins to explore in '\(directory)'") }
        let pictures: PictureOptions
        do { pictures = try PictureOptions.parse([]) } catch { throw .internalError("\(error)") }
        return try folders.map { folder throws(LifelineError) in
            let path = directory + "/" + folder + "/explore.scenario"
            var settings = ExploreSettings(fileName: "\(folder) (explored)")
            if FileManager.default.fileExists(atPath: path) {
                let data = try readScenario(path)
                guard let text = String(data: data, encoding: .utf8) else {
                    throw .badInput("\(path):1: the scenario is not valid UTF-8")
                }
                settings = try ExploreSettings(text: text, fileName: path)
            }
            let pluginOptions: PluginOptions
            do {
                pluginOptions = try PluginOptions.parse(["--plugins=\(directory)", "--only=\(folder)"])
            } catch { throw .internalError("\(error)") }
            var setup = try RunSetup(
                pluginOptions, profileOptions, pictures: pictures, scenario: settings.scenario, stateDirectory: nil,
                reportPath: nil)
            setup.watchdogScale = watchdogScale
            return ExploreTarget(plugin: folder, settings: settings, setup: setup)
        }
    }

    /// Shrinks a failure, writes it as a scenario, and simulates the file once to see that it
    /// fails the same way.
    private func keep(_ found: ExploreSession.Found, of target: ExploreTarget, seed: UInt64) throws(LifelineError)
        -> Written
    {
        let shrunk = Explorer.shrink(found.run, failing: found.failure, target)
        let outcome = (try? Explorer.run(shrunk, target)) ?? nil
        let failures = outcome?.failures ?? [found.failure]
        var expectations = failures.compactMap { failure -> String? in
            if case .expectation(let text) = failure { return text }
            return nil
        }
        var seen: Set<String> = []
        expectations = expectations.filter { seen.insert($0).inserted }
        if failures.contains(where: { if case .expectation = $0 { return false } else { return true } }) {
            expectations.append("expect outcome completed")
        }
        let prefix = target.settings.scenario.entries.count
        let header = [
            "# Found by lifeline explore, seed \(seed), run \(found.number) of \(target.plugin): "
                + found.failure.summary + ".",
            "# Shrunk from \(prefix + found.run.moves.count) steps to \(prefix + shrunk.moves.count). "
                + "lifeline test fails on it until the bug is fixed.",
        ]
        let text = shrunk.scenarioText(
            settings: target.settings, header: header, expectations: expectations, profile: target.setup.profile)
        let folder = out ?? (directory + "/" + target.plugin + "/scenarios")
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw .internalError("cannot make the folder '\(folder)': \(error.localizedDescription)")
        }
        let path = folder + "/explore-\(seed)-\(found.number).scenario"
        try RunOutput.write(text, to: path)
        var reproduces = false
        if let scenario = try? Scenario.parse(text, fileName: path) {
            let recorder = try Simulation.run(scenario: scenario, setup: target.setup)
            let results = Expectation.check(scenario.expectations, report: recorder.report(), fileName: path)
            reproduces = Expectation.exitCode(results, withoutExpectations: recorder.exitCode) == 1
        }
        return Written(
            path: path, text: text, failure: found.failure,
            message: outcome?.message(found.failure) ?? found.messages.first ?? "", steps: prefix + shrunk.moves.count,
            originalSteps: prefix + found.run.moves.count, messages: outcome?.messages ?? found.messages,
            reproduces: reproduces)
    }

    /// The written scenario, simulated again and drawn.
    private func draw(_ written: Written, _ target: ExploreTarget) throws(LifelineError) -> RenderedRun {
        let scenario = try Scenario.parse(written.text, fileName: written.path)
        var setup = target.setup
        setup.isDrawn = true
        let recorder = try Simulation.run(scenario: scenario, setup: setup)
        let results = Expectation.check(scenario.expectations, report: recorder.report(), fileName: written.path)
        if !results.isEmpty { recorder.setExpectations(Expectation.reportEntries(results)) }
        return RenderedRun(title: written.path, report: recorder.report(), calls: recorder.handlerCalls)
    }

    private struct Written {
        var path: String
        var text: String
        var failure: ExploreFailure
        /// What the failure said.
        var message: String
        var steps: Int
        var originalSteps: Int
        var messages: [String]
        var reproduces: Bool
    }
}

/// Lets a log line through at its level, so the report records it, and prints nothing.
private struct SilentLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {}
}
