import ArgumentParser
import Dispatch
import Foundation
import Lifeline

struct TestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Simulate every plugin's scenarios and check their expect lines.",
        discussion: """
            Example:
              lifeline test plugins --junit results.xml

            Runs every DIR/PLUGIN/scenarios/*.scenario with lifeline simulate, each
            in a process of its own, several at once (--jobs). A scenario loads its
            own plugin and the ones its 'uses' lines name. One line per scenario, in
            plugin then file order:
              ok   PLUGIN/scenarios/NAME.scenario (0.12 s)
              FAIL PLUGIN/scenarios/NAME.scenario: FILE:LINE: expected …
            then 'N passed, M failed'. A scenario's further failure lines go to
            stderr, under its name.

            --filter TEXT keeps the scenarios whose path as printed
            (PLUGIN/scenarios/NAME.scenario) contains TEXT, case and all.
            --shard INDEX/COUNT then keeps the INDEX-th of COUNT disjoint slices of
            the scenarios left, numbered in the order above from 0: scenario i is in
            shard i % COUNT + 1. The COUNT shards of a CI matrix run every scenario
            once; a shard left with none passes with '0 passed, 0 failed'.

            A scenario passes when simulate exits 0: with expect lines, every one
            holds and nothing unexpected happened (a termination or a pluginError
            that no line expects); without, the app was not terminated and no
            plugin raised an error.

            Exit codes:
              0   every scenario passed
              1   one or more failed
              64  bad usage
              65  DIR is missing, or holds no scenario, or none matches --filter
              70  an internal error
            """
    )

    @Argument(help: ArgumentHelp("The folder of plugins.", valueName: "DIR"))
    var directory: String = "plugins"

    @Option(
        help: ArgumentHelp(
            "Test only the scenarios whose path as printed (PLUGIN/scenarios/NAME.scenario) contains this text.",
            valueName: "TEXT"))
    var filter: String?

    @Option(
        help: ArgumentHelp(
            "Test only this slice of the scenarios (after --filter), as in 2/4: scenario i (from 0, in the order "
                + "they are listed) is in shard i % COUNT + 1.",
            valueName: "INDEX/COUNT"))
    var shard: String?

    /// `--shard` read (`validate` has checked it); every scenario without it.
    private var slice: Shard { shard.flatMap { try? Shard.parse($0) } ?? .all }

    @Option(help: "How many scenarios to simulate at once (default: the number of cores).")
    var jobs: Int?

    @Option(help: SecondsOption.timeout.help)
    var timeout: Profile.Seconds?

    /// `--timeout` in seconds (`validate` has read it).
    private var timeoutSeconds: Double { ((try? SecondsOption.timeout.value(timeout)) ?? nil) ?? 300 }

    @Option(help: "Multiply real handler time by this before comparing it with a watchdog limit.")
    var watchdogScale: Double?

    @Option(help: ArgumentHelp("Write the results as JUnit XML here, for CI.", valueName: "FILE"))
    var junit: String?

    @Option(help: ArgumentHelp("Write one HTML page of every run here.", valueName: "FILE"))
    var html: String?

    @Option(help: ArgumentHelp("Write Chrome's trace-event JSON of every run here.", valueName: "FILE"))
    var trace: String?

    func validate() throws {
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1") }
        if let shard {
            do { _ = try Shard.parse(shard) } catch { throw ValidationError(error.message) }
        }
        let seconds = try SecondsOption.timeout.value(timeout) ?? 300
        if !(seconds.isFinite && seconds > 0) { throw ValidationError("--timeout must be a number of seconds > 0") }
        checkWritable(junit, "--junit")
        checkWritable(html, "--html")
        checkWritable(trace, "--trace")
        if let watchdogScale, !(watchdogScale.isFinite && watchdogScale > 0) {
            throw ValidationError("--watchdog-scale must be a number > 0")
        }
    }

    func run() throws {
        // Ended by a signal, the test still ends its simulations and removes its temporary folder.
        ExitOnSignals.install(before: ChildProcess.killRunning)
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let files = try Self.select(ScenarioFile.find(in: directory), in: directory, filter: filter, shard: slice)
            let temporary = try TemporaryDirectory(prefix: "lifeline-test-")
            defer { temporary.remove() }
            let start = ContinuousClock.now
            let verdicts = runAll(files, in: temporary.path)
            let seconds = (ContinuousClock.now - start) / .seconds(1)
            let failed = verdicts.filter { !$0.passed }.count
            writeLine("\(verdicts.count - failed) passed, \(failed) failed")
            if let junit {
                let cases = verdicts.map {
                    JUnit.Case(
                        classname: $0.file.plugin, name: $0.file.stem, seconds: $0.seconds, failure: $0.lines,
                        stderr: $0.passed ? "" : $0.stderr)
                }
                try RunOutput.write(JUnit.xml(cases, seconds: seconds), to: junit)
            }
            if html != nil || trace != nil {
                let runs = verdicts.compactMap(\.run)
                if let html { try RunOutput.write(ReportPage.html(runs), to: html) }
                if let trace { try RunOutput.write(ChromeTrace.json(runs).serialized() + "\n", to: trace) }
            }
            return failed > 0 ? 1 : 0
        }
    }

    /// The scenarios to test: those whose printed path contains `filter`, then those of `shard`,
    /// numbered in the order they are listed. A folder without scenarios, or a filter that keeps
    /// none, is bad input; a shard left with none is not (a CI matrix may have more shards than
    /// scenarios).
    static func select(
        _ files: [ScenarioFile], in directory: String, filter: String?, shard: Shard
    ) throws(LifelineError) -> [ScenarioFile] {
        guard !files.isEmpty else {
            throw .badInput("no scenarios to test: nothing matches '\(directory)/*/scenarios/*.scenario'")
        }
        var kept = files
        if let filter {
            kept = kept.filter { $0.display.contains(filter) }
            guard !kept.isEmpty else {
                throw .badInput(
                    "no scenario matches --filter '\(filter)': none of the \(files.count) paths "
                        + "(PLUGIN/scenarios/NAME.scenario) contains it")
            }
        }
        return kept.indices.filter(shard.contains).map { kept[$0] }
    }

    /// Simulates every scenario, `jobs` at a time, printing each verdict as soon as those before
    /// it are printed: the output is in file order whatever order the runs end in.
    private func runAll(_ files: [ScenarioFile], in temporary: String) -> [Verdict] {
        struct Progress {
            var next = 0
            var verdicts: [Verdict?]
            var printed = 0
        }
        let progress = Locked(Progress(verdicts: Array(repeating: nil, count: files.count)))
        let workers = min(jobs ?? ProcessInfo.processInfo.activeProcessorCount, files.count)
        let done = DispatchGroup()
        for _ in 0..<max(workers, 1) {
            done.enter()
            // A thread each: a worker blocks while its simulation runs, which Dispatch's pool
            // would not widen for.
            let thread = Thread {
                while true {
                    let index = progress.withLock { p in
                        defer { p.next += 1 }
                        return p.next
                    }
                    guard index < files.count else { break }
                    let verdict = test(files[index], folder: temporary + "/\(index)")
                    progress.withLock { p in
                        p.verdicts[index] = verdict
                        while p.printed < files.count, let ready = p.verdicts[p.printed] {
                            writeLine(ready.text)
                            if !ready.passed && ready.lines.count > 1 {
                                writeErrorLines(
                                    ["\(ready.file.display), more:"] + ready.lines.dropFirst().map { "    " + $0 })
                            }
                            p.printed += 1
                        }
                    }
                }
                done.leave()
            }
            thread.start()
        }
        done.wait()
        return progress.withLock { $0.verdicts.compactMap { $0 } }
    }

    /// Simulates one scenario in a process of its own and says how it went.
    private func test(_ file: ScenarioFile, folder: String) -> Verdict {
        var verdict = Verdict(file: file)
        guard mkdir(folder, 0o700) == 0 else {
            return verdict.failing(["cannot make '\(folder)': \(String(cString: strerror(errno)))"])
        }
        // simulate reads the scenario: it adds the plugins its `uses` lines name to this, and
        // refuses a bad line or a name DIR lacks (65, with file:line).
        let only = [file.plugin]
        let reportPath = folder + "/report.json"
        let runPath = folder + "/run.json"
        // With "=", a value that starts with "-" is still read as the value.
        var arguments = [
            "simulate", "--plugins=\(directory)", "--only=\(only.joined(separator: ","))",
            "--scenario=\(file.path)", "--report=\(reportPath)",
        ]
        if html != nil || trace != nil { arguments.append("--render-data=\(runPath)") }
        if let watchdogScale { arguments.append("--watchdog-scale=\(watchdogScale)") }
        let outcome = ChildProcess.run(arguments, directory: folder, timeout: timeoutSeconds)
        verdict.seconds = outcome.seconds
        verdict.stderr = outcome.stderr
        if html != nil || trace != nil { verdict.run = Self.readRun(runPath) }
        if let startError = outcome.startError {
            return verdict.failing(["could not start a process to simulate it: \(startError)"])
        }
        let lines = outcome.stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        if outcome.timedOut {
            return verdict.failing(
                ["simulate ran longer than --timeout \(ReportNumber.seconds(timeoutSeconds)) s and was killed"]
                    + Self.tail(lines))
        }
        guard let status = outcome.status, outcome.exited else {
            return verdict.failing(
                ["simulate ended on signal \(outcome.status ?? 0), without a verdict"] + Self.tail(lines))
        }
        switch status {
        case 0:
            verdict.passed = true
            return verdict
        case 1:
            // simulate's own verdicts: "FILE:LINE: expected …" and "FILE: unexpected …".
            let own = lines.filter { $0.hasPrefix(file.path + ":") }
            if !own.isEmpty { return verdict.failing(own) }
            let found = Self.whatWentWrong(reportPath)
            return verdict.failing(found.isEmpty ? ["simulate exited with status 1"] + Self.tail(lines) : found)
        case 64, 65, 70:
            let errors = lines.filter { $0.hasPrefix("lifeline: ") }.map { String($0.dropFirst("lifeline: ".count)) }
            return verdict.failing(
                errors.isEmpty ? ["simulate exited with status \(status)"] + Self.tail(lines) : errors)
        default:
            return verdict.failing(["simulate exited with status \(status), without a verdict"] + Self.tail(lines))
        }
    }

    /// Without expect lines, a run fails on a termination or a plugin error: say which, from the
    /// report.
    private static func whatWentWrong(_ reportPath: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: reportPath),
            let report = try? JSONValue.parse(String(decoding: data, as: UTF8.self))
        else { return [] }
        var lines: [String] = []
        if let termination = report["termination"], termination != .null {
            var line = "terminated (\(text(termination["kind"])))"
            if let t = termination["t"], t != .null { line += " at t=\(text(t))" }
            lines.append(line + ": " + text(termination["reason"]))
        }
        if case .array(let events)? = report["timeline"] {
            for event in events where event["event"] == .string(ReportEventName.pluginError.rawValue) {
                lines.append(
                    "plugin error in \(text(event["plugin"])) at t=\(text(event["t"])): \(text(event["message"]))")
            }
        }
        return lines
    }

    /// A string's text, or other JSON as written.
    private static func text(_ value: JSONValue?) -> String {
        guard let value else { return "?" }
        if case .string(let s) = value { return s }
        return value.serialized()
    }

    /// The last lines of a process's stderr, indented, for a failure without a verdict.
    private static func tail(_ lines: [String]) -> [String] {
        lines.suffix(10).map { "| " + $0 }
    }

    /// What `--render-data` left, when it did.
    private static func readRun(_ path: String) -> RenderedRun? {
        guard let data = FileManager.default.contents(atPath: path),
            let value = try? JSONValue.parse(String(decoding: data, as: UTF8.self))
        else { return nil }
        return RenderedRun(json: value)
    }
}

extension SecondsOption {
    static let timeout = SecondsOption(
        flag: "--timeout",
        abstract: "Kill a scenario's simulation that runs longer than this many real seconds (or 5m …), and fail it "
            + "(default: 300).")
}

/// One scenario of a plugins folder: DIR/PLUGIN/scenarios/NAME.scenario.
struct ScenarioFile {
    var directory: String
    var plugin: String
    /// The file's name: `save.scenario`.
    var name: String

    /// `PLUGIN/scenarios/NAME.scenario`, as the output names it.
    var display: String { "\(plugin)/scenarios/\(name)" }
    /// The path to hand simulate (its messages start with it).
    var path: String { directory + "/" + display }
    /// The name without `.scenario`, for JUnit.
    var stem: String { String(name.dropLast(".scenario".count)) }

    /// Every scenario under `directory`, sorted by plugin, then file.
    static func find(in directory: String) throws(LifelineError) -> [ScenarioFile] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            throw .badInput("no folder '\(directory)': give the folder of plugins, as in 'lifeline test plugins'")
        }
        let plugins: [String]
        do {
            plugins = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw .badInput("cannot read the folder '\(directory)': \(error.localizedDescription)")
        }
        var files: [ScenarioFile] = []
        for plugin in plugins.sorted() where !plugin.hasPrefix(".") {
            let folder = directory + "/" + plugin + "/scenarios"
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue,
                let names = try? FileManager.default.contentsOfDirectory(atPath: folder)
            else { continue }
            for name in names.sorted() where name.hasSuffix(".scenario") && !name.hasPrefix(".") {
                files.append(ScenarioFile(directory: directory, plugin: plugin, name: name))
            }
        }
        return files
    }
}

/// How one scenario went.
private struct Verdict: Sendable {
    var file: ScenarioFile
    var passed = false
    /// Why it failed, the first line the headline; empty when it passed.
    var lines: [String] = []
    var seconds: Double = 0
    var stderr = ""
    /// The run to draw (`--html`, `--trace`), when asked for and written.
    var run: RenderedRun?

    init(file: ScenarioFile) { self.file = file }

    func failing(_ lines: [String]) -> Verdict {
        var copy = self
        copy.passed = false
        copy.lines = lines
        return copy
    }

    /// The one line `lifeline test` prints on stdout for the scenario: a line break in a failure
    /// or in the file's name shows as `\n`, so stdout stays a line per scenario. Further failure
    /// lines go to stderr.
    var text: String {
        let line =
            passed
            ? "ok   \(file.display) (\(String(format: "%.2f", seconds)) s)"
            : "FAIL \(file.display): \(lines.first ?? "failed")"
        return line.replacingOccurrences(of: "\n", with: "\\n")
    }
}

extension ScenarioFile: Sendable {}
