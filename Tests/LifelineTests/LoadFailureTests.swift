import Testing

@testable import Lifeline

/// SPEC 7 in `run`: a plugin that fails to load is skipped, and leaves nothing behind.
@Suite struct LoadFailureTests {
    @Test func skippedPlugin_timersAndTasksFromItsLoad_neverRun() throws {
        let fired = Shared(0)
        let broken = rawPlugin("a-broken") { context in
            context.after(1, perform: { fired.mutate { $0 += 1 } })
            _ = context.beginBackgroundTask("left-behind")
            return .raised(message: "init failed", traceback: "")
        }
        let fine = swiftPlugin("b-fine") { _ in }
        let h = Harness([broken, fine], loadFailurePolicy: .skip)
        h.at(0, .launch)
        h.at(5, .background)
        h.run(until: 60)
        #expect(fired.value == 0, "a timer of a plugin that failed to load ran")
        #expect(h.host.activeTasks.isEmpty)
        #expect(h.recorder.termination == nil, "a task from a failed load was left dangling")
        #expect(eventNames(h.recorder).contains("suspended"))
        #expect(h.recorder.exitCode == 1, "a skipped plugin makes the run's exit code 1")
    }

    @Test func skippedPlugin_contextCallsAfterTheFailure_doNothing() throws {
        let saved = Shared<PluginContext?>(nil)
        let broken = rawPlugin("broken") { context in
            saved.value = context
            return .raised(message: "init failed", traceback: "")
        }
        let h = Harness([broken], loadFailurePolicy: .skip)
        h.at(0, .launch)
        h.run(until: 1)
        let context = try #require(saved.value)
        #expect(context.beginBackgroundTask(name: "late", expirationHandler: nil) == 0)
        #expect(h.host.activeTasks.isEmpty)
    }
}
