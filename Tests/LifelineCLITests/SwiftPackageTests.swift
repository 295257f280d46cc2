import Foundation
import Testing

/// A package of one's own builds its own `lifeline`, with its own Swift plugin, against this
/// checkout and with no edit to it: `lifeline new --swift` writes the package in a temporary
/// folder, `swift build` builds it there, and its binary runs the plugin's scenarios.
///
/// The slow tier: the build compiles Lifeline and every package it depends on for the new
/// package (about 10 minutes on two cores from nothing). It runs when LIFELINE_SLOW_TESTS=1, as
/// `.ci/run` sets it. The build's scratch folder is `.build-own-lifeline` in this checkout
/// (ignored by git), so a second run here compiles only what changed, and the new package's own
/// targets, which are new each time; a new clone, as CI's, builds it all. Its packages resolve
/// as this checkout's do, from the machine's package sources.
@Suite struct SwiftPackageTests {
    static let enabled = ProcessInfo.processInfo.environment["LIFELINE_SLOW_TESTS"] == "1"

    /// Runs `executable` with `arguments`; its exit status, stdout, and both outputs together.
    private func run(_ executable: String, _ arguments: [String]) throws -> (
        status: Int32, stdout: String, output: String
    ) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outText = Captured(out)
        let errText = Captured(err)
        process.waitUntilExit()
        let stdout = outText.text(waitingForEOF: true)
        return (process.terminationStatus, stdout, stdout + errText.text(waitingForEOF: true))
    }

    private var swift: String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/swift" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test(
        .enabled(if: enabled, "the slow tier: set LIFELINE_SLOW_TESTS=1 (it builds a package and all of Lifeline)"),
        .timeLimit(.minutes(60)))
    func aPackageOfOnesOwn_buildsItsOwnLifeline_andRunsItsPlugin() throws {
        let ws = try Workspace()
        let dir = ws.path + "/T"
        let made = try CLI.run(["new", "autosave", "--swift", "--dir", dir])
        #expect(made.status == 0, "\(made.stderr)")
        let package = dir + "/autosave"
        // The package builds against this very checkout, found from the binary itself.
        let manifest = try String(contentsOfFile: package + "/Package.swift", encoding: .utf8)
        #expect(manifest.contains("let lifelinePath = \"\(CLI.packageRoot)\""))

        let swift = try #require(swift, "swift is not on PATH")
        let build = ["build", "--package-path", package, "--scratch-path", CLI.packageRoot + "/.build-own-lifeline"]
        let start = ContinuousClock.now
        let built = try run(swift, build)
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        // A time, not a bound: it depends on the machine and on what the scratch folder holds.
        print("SwiftPackageTests: swift build of the new package took \(Int(seconds.rounded())) s")
        try #require(built.status == 0, "swift build failed:\n\(built.output.suffix(6_000))")
        let bin = try run(swift, build + ["--show-bin-path"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let own = bin + "/autosave-lifeline"
        #expect(FileManager.default.isExecutableFile(atPath: own), "\(own)")

        // Its test runs the scenarios of the plugin folder, with the Swift plugin in it.
        let tested = try run(own, ["test", dir])
        #expect(tested.status == 0, "\(tested.output)")
        #expect(tested.output.contains("ok   autosave/scenarios/basic.scenario"), "\(tested.output)")
        #expect(tested.output.contains("ok   autosave/scenarios/expired.scenario"), "\(tested.output)")
        #expect(tested.output.contains("ok   autosave/scenarios/twice.scenario"), "\(tested.output)")
        #expect(tested.output.contains("3 passed, 0 failed"))

        // Its simulate runs the plugin: the work's log line, its task ended in time.
        let report = try run(
            own,
            [
                "simulate", "--plugins", dir, "--scenario", package + "/scenarios/basic.scenario",
                "--report", "-",
            ])
        #expect(report.status == 0, "\(report.output)")
        let parsed = try parseReport(report.stdout)
        #expect(events(parsed, "log", plugin: "autosave").contains { ($0["message"] as? String) == "saved (run 1)" })
        let ended = events(parsed, "taskEnded", plugin: "autosave")
        #expect(ended.count == 1 && ended.first?["expired"] as? Bool == false && ended.first?["t"] as? Double == 7)
        #expect(
            ((parsed["plugins"] as? [[String: Any]]) ?? []).contains {
                $0["name"] as? String == "autosave" && $0["kind"] as? String == "swift"
            })
    }
}
