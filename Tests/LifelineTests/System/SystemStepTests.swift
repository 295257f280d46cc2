import Testing

@testable import Lifeline
@testable import LifelineRules

// The system's scenario steps as a file writes them: each form read, every bad argument refused
// with the line, and a profile without the API refusing the step before anything runs.

@Test(arguments: [
    ("fetch", Step.fetch),
    ("push", Step.push(payload: Step.defaultPushPayload)),
    (#"push {"aps": {"content-available": 1}, "n": [1, 2]}"#, Step.push(payload: #"{"aps": {"content-available": 1}, "n": [1, 2]}"#)),
    ("run-tasks", Step.runTasks(.all)),
    ("run-tasks refresh", Step.runTasks(.kind(.refresh))),
    ("run-tasks processing", Step.runTasks(.kind(.processing))),
    ("run-tasks com.example.x", Step.runTasks(.identifier("com.example.x"))),
    ("charging on", Step.charging(true)),
    ("charging off", Step.charging(false)),
    ("network on", Step.network(true)),
    ("network off", Step.network(false)),
])
func systemSteps_parse(text: String, step: Step) throws {
    let scenario = try Scenario.parse("0s launch\n1s \(text)", fileName: "s.scenario")
    #expect(scenario.entries.last?.step == step)
    // Every step reads back from what it prints.
    #expect(try Step.parse(Substring(step.description)) == step)
}

@Test(arguments: [
    ("1s push {not json}", "s.scenario:2: 'push' takes a JSON object as its payload"),
    ("1s push [1, 2]", "s.scenario:2: 'push' takes a JSON object as its payload"),
    ("1s charging maybe", "s.scenario:2: 'charging' takes 'on' or 'off', as in 'charging on'"),
    ("1s network", "s.scenario:2: 'network' takes 'on' or 'off', as in 'network on'"),
    ("1s run-tasks a b", "s.scenario:2: 'run-tasks' takes at most one word"),
    ("1s fetch now", "s.scenario:2: unknown action 'fetch now'"),
    ("task-policy sometimes", "s.scenario:2: unknown task policy 'sometimes'"),
    ("task-policy delay:5x", "s.scenario:2: unknown unit 'x'"),
])
func systemSteps_badArguments_areErrorsWithTheLine(line: String, message: String) {
    do {
        _ = try Scenario.parse("0s launch\n\(line)", fileName: "s.scenario")
        Issue.record("'\(line)' was accepted")
    } catch {
        #expect(error.message.hasPrefix(message), "\(error.message)")
        #expect(error.exitCode == 65)
    }
}

@Test func systemSteps_areAllowedInEveryState_evenBeforeALaunch() throws {
    let scenario = try Scenario.parse(
        "0s fetch\n0s charging on\n1s launch\n2s terminate\n3s push\n4s run-tasks\n5s network off", fileName: "s")
    #expect(scenario.entries.count == 7)
}

@Test func taskPolicy_parsesItsForms() throws {
    #expect(try TaskPolicy.parse("earliest", at: "x") == .earliest)
    #expect(try TaskPolicy.parse("manual", at: "x") == .manual)
    #expect(try TaskPolicy.parse("delay:15m", at: "x") == .delayed(900))
    #expect(try TaskPolicy.parse("delay:90", at: "x") == .delayed(90))
    #expect(throws: LifelineError.self) { try TaskPolicy.parse("delay:", at: "x") }
    #expect(try Scenario.parse("task-policy manual\n0s launch", fileName: "s").taskPolicy == .manual)
    #expect(try Scenario.parse("0s launch", fileName: "s").taskPolicy == nil)
}

@Test func profiles_sayWhichAPIsTheyHave() {
    #expect(Profile.ios6.lacks(.fetch) != nil)
    #expect(Profile.ios6.lacks(.push(payload: "{}")) != nil)
    #expect(Profile.ios7.lacks(.fetch) == nil)
    #expect(Profile.ios7.lacks(.runTasks(.all)) != nil)
    #expect(Profile.ios13.lacks(.runTasks(.all)) == nil)
    // The device's conditions exist under every profile.
    #expect(Profile.ios6.lacks(.charging(true)) == nil)
    #expect(Profile.ios13.fetchLimit == 30 && Profile.ios13.refreshTaskLimit == 30)
    #expect(Profile.ios13.processingTaskLimit == 180 && Profile.ios13.transferEventsLimit == 30)
}

@Test func manifest_backgroundIdentifiers_areReadAndChecked() throws {
    let manifest = try PluginManifest.parse("[background]\nidentifiers = [\"com.a.b\", \"x_1-2\"]\n", fileName: "f.toml")
    #expect(manifest.taskIdentifiers == ["com.a.b", "x_1-2"])
    #expect(throws: LifelineError.self) { try PluginManifest.parse("[background]\nidentifiers = [\"a b\"]\n", fileName: "f.toml") }
    #expect(throws: LifelineError.self) { try PluginManifest.parse("[background]\nidentifiers = \"a\"\n", fileName: "f.toml") }
    #expect(throws: LifelineError.self) { try PluginManifest.parse("[background]\nmodes = [\"fetch\"]\n", fileName: "f.toml") }
}
