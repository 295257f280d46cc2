import Testing

@testable import Lifeline
@testable import LifelineRules

// The runs lifeline explore draws: valid scenarios, the same for the same seed, within the kinds
// and the profile they are given, and written so that reading them back gives the same run.

private func generator(_ text: String? = nil, profile: Profile = .ios13) throws -> ExploreGenerator {
    let settings = try text.map { try ExploreSettings(text: $0, fileName: "explore.scenario") }
        ?? ExploreSettings(fileName: "p (explored)")
    return ExploreGenerator(settings: settings, profile: profile)
}

/// The kind of step each step is.
private func kind(_ step: Step) -> ExploreStepKind {
    switch step {
    case .launch, .launchInBackground: return .launch
    case .background: return .background
    case .foreground: return .foreground
    case .resign: return .resign
    case .activate: return .activate
    case .terminate: return .terminate
    case .kill: return .kill
    case .forceQuit: return .forceQuit
    case .memoryWarning: return .memoryWarning
    case .fetch: return .fetch
    case .push: return .push
    case .runTasks: return .runTasks
    case .charging: return .charging
    case .network: return .network
    case .reload: preconditionFailure("explore draws no reload: the files do not change during a run")
    }
}

@Suite struct ExploreGeneratorTests {
    @Test func everyDrawnRunIsAValidScenarioThatReadsBackAsDrawn() throws {
        for settingsText in [nil, "0s launch\n2s background\n", "0s launch background\nsteps foreground, fetch\n"] {
            let g = try generator(settingsText)
            var kinds: Set<ExploreStepKind> = []
            for run in 0..<500 {
                let drawn = g.draw(seed: 3, plugin: "p", run: run)
                #expect(drawn.moves.count <= ExploreGenerator.maximumSteps)
                #expect((1...ExploreGenerator.maximumAnswers).contains(drawn.answers.count))
                let text = drawn.scenarioText(settings: g.settings)
                let scenario = try Scenario.parse(text, fileName: "run.scenario")
                let prefix = g.settings.scenario.entries.count
                #expect(scenario.entries.count == prefix + drawn.moves.count)
                #expect(scenario.entries.dropFirst(prefix).map(\.step) == drawn.moves.map(\.step))
                let start = g.settings.scenario.entries.last?.time.milliseconds ?? 0
                #expect(scenario.entries.dropFirst(prefix).map(\.time.milliseconds) == drawn.times(after: start))
                // The drawn line is the last http line, and reads back as the answers drawn.
                #expect(scenario.network.last?.results == drawn.answers)
                kinds.formUnion(drawn.moves.map { kind($0.step) })
            }
            if settingsText?.contains("steps") == true {
                #expect(kinds == [.foreground, .fetch], "only the kinds the steps line names")
            } else {
                #expect(kinds == Set(ExploreStepKind.allCases), "\(kinds)")
            }
        }
    }

    @Test func theSameSeedPluginAndRunGiveTheSameRun() throws {
        let g = try generator()
        for run in 0..<50 {
            #expect(g.draw(seed: 9, plugin: "sync", run: run) == g.draw(seed: 9, plugin: "sync", run: run))
        }
        let a = (0..<50).map { g.draw(seed: 9, plugin: "sync", run: $0) }
        let b = (0..<50).map { g.draw(seed: 10, plugin: "sync", run: $0) }
        let c = (0..<50).map { g.draw(seed: 9, plugin: "cleanup", run: $0) }
        #expect(a != b)
        #expect(a != c)
        #expect(Set(a.map { $0.moves.count }).count > 5, "runs differ from one another")
    }

    @Test func aProfileWithoutAnAPIGetsNoStepThatNeedsIt() throws {
        let g = try generator(profile: .ios6)
        for run in 0..<300 {
            for move in g.draw(seed: 1, plugin: "p", run: run).moves {
                #expect(Profile.ios6.lacks(move.step) == nil, "\(move.step)")
            }
        }
    }

    @Test func waitsReachPastTheBudget() throws {
        let g = try generator()
        let waits = (0..<300).flatMap { g.draw(seed: 1, plugin: "p", run: $0).moves.map(\.wait) }
        #expect(waits.contains { $0 > Int64(Profile.ios13.budget * 1000) })
        #expect(waits.contains { $0 > 0 && $0 < 100 })
    }

    @Test func timesAreWrittenAsTheyAreRead() throws {
        for ms: Int64 in [0, 1, 9, 999, 1000, 1001, 1050, 1500, 25_996, 60_000, 3_599_999, 86_400_000] {
            let text = ScenarioText.time(ms)
            #expect(try Units.parseDuration(text, at: "t").milliseconds == ms, "\(text)")
        }
    }

    @Test func settingsRefuseWhatCannotHoldInEveryRun() {
        #expect(throws: LifelineError.self) { try ExploreSettings(text: "steps launch, fly\n", fileName: "e") }
        #expect(throws: LifelineError.self) { try ExploreSettings(text: "steps launch\nsteps kill\n", fileName: "e") }
        #expect(throws: LifelineError.self) { try ExploreSettings(text: "steps\n", fileName: "e") }
        #expect(throws: LifelineError.self) {
            try ExploreSettings(text: "0s launch\nexpect taskBegan between 1s and 2s\n", fileName: "e")
        }
        #expect(throws: Never.self) {
            try ExploreSettings(text: "0s launch\nexpect no taskExpiring\nexpect outcome completed\n", fileName: "e")
        }
    }

    @Test func stepsTheLifecycleRefusesAfterADropAreDroppedToo() {
        // kill, launch background, foreground: without the kill, the launch and the foreground
        // that follows it are refused, so only the network step and the background are left.
        let run = ExploreCase(
            moves: [
                .init(wait: 100, step: .network(false)), .init(wait: 200, step: .launchInBackground),
                .init(wait: 300, step: .foreground), .init(wait: 400, step: .background),
            ], answers: [])
        let prefix = Scenario(entries: [.init(time: .zero, step: .launch, line: 1)], fileName: "e")
        let kept = Explorer.allowed(run, after: prefix)
        #expect(kept.moves.map(\.step) == [.network(false), .background])
        #expect(kept.times(after: 0) == [100, 1000], "the steps left keep their times")
    }
}

@Suite struct ShardTests {
    @Test func theShardsOfACountPartitionTheItems() throws {
        for count in 1...7 {
            var seen = Array(repeating: 0, count: 100)
            for index in 1...count {
                let shard = try Shard.parse("\(index)/\(count)")
                for item in 0..<100 where shard.contains(item) { seen[item] += 1 }
            }
            #expect(seen.allSatisfy { $0 == 1 }, "count \(count)")
        }
    }

    @Test func onlyIndexOverCountWithTheIndexInRangeIsAShard() throws {
        for text in ["0/3", "4/3", "1", "1/0", "a/b", "-1/3", "1/3/4", "", "/", "1/", " 1/3"] {
            #expect(throws: LifelineError.self, "\(text)") { try Shard.parse(text) }
        }
        #expect(try Shard.parse("3/3") == Shard(index: 3, count: 3))
    }
}
