// explore.runs: what lifeline explore adds to each simulation it makes.
import Foundation
import Lifeline
import LifelineLua

/// The bundled Lua plugins, as lifeline explore targets them: each alone, with its
/// explore.scenario if it has one, on ios13.
func bundledExploreTargets() -> [ExploreTarget] {
    let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("plugins").path
    let descriptors = try! LuaPluginLoader.descriptors(in: dir)
    return descriptors.map { descriptor in
        let path = dir + "/" + descriptor.name + "/explore.scenario"
        var settings = ExploreSettings(fileName: "\(descriptor.name) (explored)")
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            settings = try! ExploreSettings(text: text, fileName: path)
        }
        return ExploreTarget(plugin: descriptor.name, settings: settings, setup: RunSetup(plugins: [descriptor]))
    }
}

/// Explores `runs` runs of each target on this thread, as one of explore's workers does: draw,
/// write the scenario, read it back, simulate, check. Returns the failures (none expected).
func exploreRuns(_ targets: [ExploreTarget], runs: Int, database: StateDatabase) -> Int {
    var failures = 0
    for run in 0..<runs {
        for target in targets {
            let drawn = target.generator.draw(seed: 1, plugin: target.plugin, run: run)
            if let outcome = try! Explorer.run(drawn, target, database: database), !outcome.failures.isEmpty {
                failures += 1
            }
        }
    }
    return failures
}

/// The same scenarios, drawn beforehand, simulated alone: what `lifeline simulate` of each costs
/// in this process, with the state emptied between runs as explore empties it.
func simulateRuns(_ scenarios: [(Scenario, RunSetup)], database: StateDatabase) {
    for (scenario, setup) in scenarios {
        try! database.erase()
        _ = try! Simulation.run(scenario: scenario, setup: setup, database: database)
    }
}

func exploreRow() -> Row {
    let targets = bundledExploreTargets()
    let runs = 200
    let scenarios = (0..<runs).flatMap { run in
        targets.map { target in
            let drawn = target.generator.draw(seed: 1, plugin: target.plugin, run: run)
            let text = drawn.scenarioText(settings: target.settings)
            return (try! Scenario.parse(text, fileName: target.settings.fileName), target.setup)
        }
    }
    // One plugin whose runs have at most 20 steps and do little: the per-core figure.
    let small = targets.filter { $0.plugin == "save-changes" }
    let count = runs * targets.count
    let m = try! StateDatabase.withTemporary { database in
        interleaved(rounds: 3, [
            {
                let start = Monotonic.nanoseconds()
                let failures = exploreRuns(targets, runs: runs, database: database)
                precondition(failures == 0, "explore.runs: \(failures) bundled runs failed")
                return Double(Monotonic.nanoseconds() - start) / Double(count)
            },
            {
                let start = Monotonic.nanoseconds()
                simulateRuns(scenarios, database: database)
                return Double(Monotonic.nanoseconds() - start) / Double(count)
            },
            {
                let start = Monotonic.nanoseconds()
                _ = exploreRuns(small, runs: 1000, database: database)
                return Double(Monotonic.nanoseconds() - start) / 1000
            },
        ])
    }
    let perCore = 1e9 / m[2]
    return Row(
        name: "explore.runs", unit: "µs/run", value: m[0] / 1000,
        baseline: ("simulating the same scenarios", m[1] / 1000),
        target: "≤ 1.5, and ≥ 1000 runs/s on one core (save-changes)", met: m[0] / m[1] <= 1.5 && perCore >= 1000,
        others: [("runs/s on one core, save-changes", perCore), ("runs/s on one core, all bundled", 1e9 / m[0])])
}

/// explore.runs' per-core side alone, for a profiler.
func profileExplore() {
    let small = bundledExploreTargets().filter { $0.plugin == "save-changes" }
    try! StateDatabase.withTemporary { database in _ = exploreRuns(small, runs: 3000, database: database) }
}
