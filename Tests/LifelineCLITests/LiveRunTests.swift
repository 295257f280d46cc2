import Foundation
import Lifeline
import Testing

// `LiveRun` as an embedder calls it: in this process, without signals, driven by `post`. The
// steps follow the app's own events, so nothing here waits on a fixed time.

/// Begins a background task when the app enters the background, and never ends it.
private final class Holder: SwiftPlugin {
    static let name = "holder"
    init() {}

    func load(_ context: PluginContext) throws {
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("held") }
    }
}

/// Does nothing: the app suspends as soon as it enters the background.
private final class Idle: SwiftPlugin {
    static let name = "idle"
    init() {}
    func load(_ context: PluginContext) throws {}
}

/// Schedules a refresh an hour away, and completes it at once when the system runs it.
private final class Refresher: SwiftPlugin {
    static let name = "refresher"
    init() {}
    func load(_ context: PluginContext) throws {
        try context.registerTask("com.example.refresh") { task in task.setTaskCompleted(success: true) }
        try context.submitTask(SystemTaskRequest(identifier: "com.example.refresh", kind: .refresh, earliestBegin: 3600))
    }
}

/// Posts `steps[event]` to the run when the app records `event`.
private func live(_ setup: RunSetup, steps: [String: Step]) -> LiveRun {
    let run = Locked<LiveRun?>(nil)
    let live = LiveRun(setup: setup) { event in
        if let step = steps[event.event] { run.withLock { $0 }?.post(step) }
    }
    live.handlesSignals = false
    run.withLock { $0 = live }
    return live
}

@Suite struct LiveRunTests {
    @Test func postedSteps_runTheApp_andItsReportIsTheCLIsText() throws {
        let state = try TemporaryDirectory(prefix: "lifeline-live-")
        defer { state.remove() }
        var setup = RunSetup(plugins: [Idle.descriptor])
        setup.stateDirectory = state.path
        setup.reportPath = state.path + "/report.json"
        let run = live(setup, steps: ["didBecomeActive": .background, "suspended": .terminate])

        let recorder = try run.run()

        #expect(recorder.timeline.map(\.event) == [
            "didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground", "suspended",
            "endedWhileSuspended",
        ])
        #expect(recorder.exitCode == 0)
        let written = try String(contentsOfFile: state.path + "/report.json", encoding: .utf8)
        #expect(written == RunOutput.text(of: recorder.report()))
        #expect(FileManager.default.fileExists(atPath: state.path + "/" + StateDatabase.fileName))
        #expect(!FileManager.default.fileExists(atPath: state.path + "/reports"))
    }

    /// On the real clock, a request that `run-tasks` makes due "now" runs: its time is read once
    /// per evaluation, not again after the clock has moved on.
    @Test func runTasks_onTheRealClock_wakesTheAppAndRunsTheTask() throws {
        let state = try TemporaryDirectory(prefix: "lifeline-live-")
        defer { state.remove() }
        var descriptor = Refresher.descriptor
        descriptor.taskIdentifiers = ["com.example.refresh"]
        var setup = RunSetup(plugins: [descriptor])
        setup.stateDirectory = state.path
        setup.reportPath = state.path + "/report.json"  // so the run keeps its timeline
        let run = live(
            setup,
            steps: ["didBecomeActive": .background, "suspended": .runTasks(.all), "systemTaskCompleted": .terminate])

        let recorder = try run.run()

        let names = recorder.timeline.map(\.event)
        #expect(names.contains("resumed"))
        #expect(names.contains("systemTaskStarted"))
        #expect(recorder.timeline.contains { $0.event == "systemTaskCompleted" && $0["success"] == .bool(true) })
        #expect(recorder.exitCode == 0)
    }

    @Test func aTermination_leavesACrashReportInTheStateDir() throws {
        let state = try TemporaryDirectory(prefix: "lifeline-live-")
        defer { state.remove() }
        var profile = Profile.ios13
        profile.budget = 0.2
        profile.expirationLead = 0.1
        var setup = RunSetup(plugins: [Holder.descriptor], profile: profile)
        setup.stateDirectory = state.path
        let run = live(setup, steps: ["didBecomeActive": .background])

        let recorder = try run.run()

        let termination = try #require(recorder.termination)
        #expect(recorder.exitCode == 1)
        let files = try FileManager.default.contentsOfDirectory(atPath: state.path + "/reports")
        let file = try #require(files.first)
        #expect(files.count == 1)
        #expect(file.hasPrefix("crash-") && file.hasSuffix("-\(termination.kind.rawValue).json"))
        let text = try String(contentsOfFile: state.path + "/reports/" + file, encoding: .utf8)
        #expect(text == RunOutput.text(of: termination.json))
    }
}
