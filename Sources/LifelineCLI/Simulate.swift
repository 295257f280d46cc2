import ArgumentParser
import Foundation
import Lifeline
import Logging

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a scripted lifecycle in virtual time and write a JSON verdict.",
        discussion: """
            Example:
              lifeline simulate --plugins plugins [--state-dir DIR] \\
                --scenario plugins/save-changes/scenarios/save.scenario --report -

            The scenario may script the network with http lines (simulate never touches the
            real one); a request that no line matches is refused:
              0s   http POST 127.0.0.1:8080/session/end -> 200 {"success": true} in 300ms
              0s   http * api.example.com/* -> hang
              30s  http * * -> refuse
              0s   http GET 127.0.0.1:8080/big.bin -> 200 size=50MB rate=2MB/s
              0s   http GET 127.0.0.1:8080/flaky -> 503, 503, 200
            A later line takes over from its time on (above, every request is refused from
            30 s); '-> 503, 503, 200' answers a line's requests in turn, the last repeating.

            expect lines say what must have happened, checked at the end (docs/testing.md):
              expect outcome completed
              expect taskEnded plugin=save-changes expired=false at 7s
              expect log plugin=save-changes level=error contains "corrupt"
            With expect lines, the exit code is 0 when every one holds, 1 when one fails.

            A body given by size and rate takes virtual time to arrive, so background
            transfers (lifeline.transfers) can outlive a kill; the force-quit action cancels
            them (docs/transfers.md).

            Exit codes:
              0   completed (with expect lines: every one holds)
              1   terminated by a rule, or a plugin raised an error (with expect lines: one fails)
              64  bad usage
              65  a scenario or plugin that cannot be read or loaded
              70  an internal error
            """
    )

    @OptionGroup var pluginOptions: PluginOptions

    @Option(help: "The scenario file (steps, http lines, expect lines; at most 1 MiB); - reads standard input.")
    var scenario: String

    @Option(help: "Where to write the JSON report; - for stdout.")
    var report: String?

    @Option(help: "Keep the plugins' stores in this state dir (default: a temporary one, removed afterwards).")
    var stateDir: String?

    @Option(help: "Multiply real handler time by this before comparing it with a watchdog limit.")
    var watchdogScale: Double = 1

    @Option(help: "Stop at this time at the latest (default: the last step + 15m), e.g. 10m or 1h30m.")
    var until: String?

    @OptionGroup var profileOptions: ProfileOptions

    @OptionGroup var pictures: PictureOptions

    /// Where `lifeline test` has each of its processes leave the run it draws (`RenderedRun.json`).
    @Option(help: .hidden)
    var renderData: String?

    func validate() throws {
        guard watchdogScale.isFinite, watchdogScale > 0 else {
            throw ValidationError("--watchdog-scale must be a number > 0")
        }
        if let until {
            do { _ = try Units.parseDuration(until, at: "--until") } catch { throw ValidationError(error.message) }
        }
        checkWritable(report, "--report")
        checkWritable(renderData, "--render-data")
    }

    func run() throws {
        bootstrapLogging(level: profileOptions.level)
        // Ended by a signal, simulate still removes its temporary state dir.
        ExitOnSignals.install()
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let data = try readScenario(scenario)
            guard let text = String(data: data, encoding: .utf8) else {
                throw .badInput("\(scenario):1: the scenario is not valid UTF-8")
            }
            let parsed = try Scenario.parse(text, fileName: scenario)
            var setup = try RunSetup(
                pluginOptions, profileOptions, pictures: pictures, scenario: parsed, stateDirectory: stateDir,
                reportPath: report)
            setup.watchdogScale = watchdogScale
            setup.isDrawn = setup.isDrawn || renderData != nil
            let limit = try until.map { u throws(LifelineError) in try Units.parseDuration(u, at: "--until") }
            let outputs = Outputs(scenario: parsed, setup: setup, pictures: pictures, renderData: renderData)
            let recorder = try Simulation.run(
                scenario: parsed, setup: setup, until: limit,
                onUnpreemptibleOverrun: { overrun in
                    // W3: Swift code cannot be stopped; give the verdict now and end the process.
                    switch overrun {
                    case .terminated(let termination, let recorder):
                        // The host's own "app terminated" line is logged on the main executor,
                        // which is stuck in that code: say it here, or the exit 1 comes unexplained.
                        FileHandle.standardError.write(Data((Terminal.safe("lifeline: " + termination.headline) + "\n").utf8))
                        Foundation.exit((try? outputs.write(recorder)) ?? 70)
                    case .loadFailed(let error):
                        exitWithError(error)
                    }
                })
            return try outputs.write(recorder)
        }
    }
}

/// What simulate writes once the run is over: the expectations' verdict on stderr, the report,
/// the pictures. Returns the exit code.
private struct Outputs: Sendable {
    let scenario: Scenario
    let setup: RunSetup
    let pictures: PictureOptions
    let renderData: String?

    func write(_ recorder: Recorder) throws(LifelineError) -> Int32 {
        // The report as one JSON value is made only for what reads it (expectations, pictures):
        // for a long run it is the whole timeline again, which `--report` streams without it.
        let results =
            scenario.expectations.isEmpty
            ? [] : Expectation.check(scenario.expectations, report: recorder.report(), fileName: scenario.fileName)
        if !results.isEmpty { recorder.setExpectations(Expectation.reportEntries(results)) }
        for result in results where !result.passed {
            FileHandle.standardError.write(Data((Terminal.safe(result.message, indent: "    ") + "\n").utf8))
        }
        try setup.writeReport(recorder)
        if renderData != nil || pictures.any {
            let run = RenderedRun(title: scenario.fileName, report: recorder.report(), calls: recorder.handlerCalls)
            if let renderData { try RunOutput.write(run.json.serialized() + "\n", to: renderData) }
            try pictures.write([run], stdoutTaken: setup.reportPath == "-")
        }
        return Expectation.exitCode(results, withoutExpectations: recorder.exitCode)
    }
}

/// The bytes of a scenario file; `-` reads standard input, and a pipe (`<(…)`) works too. A file
/// that cannot be read is a scenario error (65) that says why. At most `Scenario.maximumBytes` are
/// read: a larger file is refused from its size when it has one, and anything else (standard
/// input, a pipe, a FIFO, /dev/zero) once one byte more than the limit has come, so no input
/// holds the host for longer than reading the limit takes.
func readScenario(_ path: String) throws(LifelineError) -> Data {
    let name = path == "-" ? "standard input" : "'\(path)'"
    let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
        throw .badInput("cannot read scenario file \(name): \(String(cString: strerror(errno)))")
    }
    defer { if fd != STDIN_FILENO { close(fd) } }
    let limit = Scenario.maximumBytes
    let tooLarge = LifelineError.badInput(
        "cannot read scenario file \(name): it is larger than \(Units.formatBytes(limit)), the most a "
            + "scenario may hold")
    var info = stat()
    if fstat(fd, &info) == 0 {
        if (info.st_mode & S_IFMT) == S_IFDIR { throw .badInput("cannot read scenario file \(name): it is a folder") }
        if (info.st_mode & S_IFMT) == S_IFREG, info.st_size > limit { throw tooLarge }
    }
    // One byte past the limit is enough to know the input is too large.
    var bytes = [UInt8](repeating: 0, count: limit + 1)
    var count = 0
    while count < bytes.count {
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
        if n == 0 { break }
        if n < 0 {
            if errno == EINTR { continue }
            throw .badInput("cannot read scenario file \(name): \(String(cString: strerror(errno)))")
        }
        count += n
    }
    guard count <= limit else { throw tooLarge }
    return Data(bytes[..<count])
}
