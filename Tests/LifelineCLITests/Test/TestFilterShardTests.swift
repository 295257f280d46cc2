import Foundation
import Testing

// `lifeline test --filter TEXT` and `--shard INDEX/COUNT`: which scenarios run.

/// Three plugins, seven scenarios that pass.
private func sevenScenarios() throws -> Workspace {
    let ws = try Workspace()
    let names = ["alpha": ["one", "two", "three"], "beta": ["one", "four"], "gamma": ["five", "six"]]
    for (plugin, scenarios) in names {
        try ws.plugin(plugin, "lifeline.on(\"didEnterBackground\", function() end)")
        try FileManager.default.createDirectory(
            atPath: ws.plugins + "/\(plugin)/scenarios", withIntermediateDirectories: true)
        for name in scenarios {
            try ws.file("plugins/\(plugin)/scenarios/\(name).scenario", "0s launch\n1s background\nexpect outcome completed\n")
        }
    }
    return ws
}

/// The scenarios `lifeline test` ran, as it printed them, and its last line.
private func tested(_ ws: Workspace, _ arguments: [String]) throws -> (paths: [String], summary: String, status: Int32) {
    let r = try CLI.run(["test", ws.plugins] + arguments)
    let lines = r.stdout.split(separator: "\n").map(String.init)
    let paths = lines.filter { $0.hasPrefix("ok   ") }.map {
        String($0.dropFirst(5).prefix { $0 != " " })
    }
    return (paths, lines.last ?? "", r.status)
}

private let all = [
    "alpha/scenarios/one.scenario", "alpha/scenarios/three.scenario", "alpha/scenarios/two.scenario",
    "beta/scenarios/four.scenario", "beta/scenarios/one.scenario", "gamma/scenarios/five.scenario",
    "gamma/scenarios/six.scenario",
]

@Suite struct TestFilterShardTests {
    @Test func withoutEither_everyScenarioRuns_inPluginThenFileOrder() throws {
        let r = try tested(try sevenScenarios(), [])
        #expect(r.paths == all)
        #expect(r.summary == "7 passed, 0 failed")
    }

    @Test func filter_keepsTheScenariosWhosePrintedPathContainsTheText() throws {
        let ws = try sevenScenarios()
        #expect(try tested(ws, ["--filter", "one"]).paths == ["alpha/scenarios/one.scenario", "beta/scenarios/one.scenario"])
        #expect(try tested(ws, ["--filter", "beta/"]).paths == ["beta/scenarios/four.scenario", "beta/scenarios/one.scenario"])
        #expect(try tested(ws, ["--filter", "a/scenarios/t"]).paths == ["alpha/scenarios/three.scenario", "alpha/scenarios/two.scenario"])
        // Case counts; the folder of plugins is not part of the path.
        let none = try CLI.run(["test", ws.plugins, "--filter", "ONE"])
        #expect(none.status == 65)
        #expect(
            none.stderr.contains(
                "lifeline: no scenario matches --filter 'ONE': none of the 7 paths (PLUGIN/scenarios/NAME.scenario) contains it"),
            "\(none.stderr)")
        #expect(try CLI.run(["test", ws.plugins, "--filter", "plugins/alpha"]).status == 65)
    }

    @Test func theShardsOfACount_partitionTheScenarios() throws {
        let ws = try sevenScenarios()
        for count in [1, 3, 9] {
            var seen: [String] = []
            for index in 1...count {
                let r = try tested(ws, ["--shard", "\(index)/\(count)"])
                #expect(r.status == 0)
                // Scenario i, from 0 in the listed order, is in shard i % count + 1.
                let expected = all.indices.filter { $0 % count == index - 1 }.map { all[$0] }
                #expect(r.paths == expected, "shard \(index)/\(count)")
                #expect(r.summary == "\(expected.count) passed, 0 failed")
                seen += r.paths
            }
            #expect(seen.count == Set(seen).count, "disjoint for \(count)")
            #expect(seen.sorted() == all.sorted(), "the union of the \(count) shards is every scenario")
        }
    }

    @Test func theShardSlicesWhatTheFilterKept() throws {
        let ws = try sevenScenarios()
        let kept = ["alpha/scenarios/one.scenario", "alpha/scenarios/three.scenario", "alpha/scenarios/two.scenario"]
        #expect(try tested(ws, ["--filter", "alpha", "--shard", "1/2"]).paths == [kept[0], kept[2]])
        #expect(try tested(ws, ["--shard", "2/2", "--filter", "alpha"]).paths == [kept[1]])
    }

    @Test func aShardWithNoScenario_passesWithZero() throws {
        let ws = try sevenScenarios()
        let r = try CLI.run(["test", ws.plugins, "--filter", "gamma", "--shard", "3/3"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "0 passed, 0 failed\n")
    }

    @Test(arguments: ["0/3", "4/3", "1/0", "a/b", "1", "1/3/3", "-1/3", " 1/3", ""])
    func aBadShard_isUsageExit64(_ shard: String) throws {
        let r = try CLI.run(["test", "--shard=\(shard)", try sevenScenarios().plugins])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("is not a shard; --shard takes INDEX/COUNT with 1 <= INDEX <= COUNT, as in 2/4"), "\(r.stderr)")
    }
}
