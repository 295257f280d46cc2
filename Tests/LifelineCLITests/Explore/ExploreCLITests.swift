import Foundation
import Testing

/// Plugins with a bug that only one interleaving of the lifecycle shows, and the fewest steps a
/// scenario needs to show it.
private struct PlantedBug: Sendable, CustomTestStringConvertible {
    var name: String
    var lua: String
    var toml: String?
    /// The start of the FAIL line after the plugin's name.
    var failure: String
    /// The steps of the smallest scenario that shows the bug.
    var steps: Int
    var testDescription: String { name }
}

private let plantedBugs = [
    PlantedBug(
        name: "leak",
        lua: """
            -- Leaks a background task when a fetch arrives while its processing task runs.
            local processing = false
            lifeline.tasks.register("com.example.process", function(task)
              processing = true
              task.expirationHandler = function() processing = false; task:setTaskCompleted(false) end
              lifeline.after(20, function() processing = false; task:setTaskCompleted(true) end)
            end)
            lifeline.on("didFinishLaunching", function()
              lifeline.tasks.submit{identifier = "com.example.process", kind = "processing", earliestBegin = 3600}
            end)
            lifeline.on("performFetch", function(event)
              if processing then lifeline.beginBackgroundTask("forgotten") end
              event.complete("noData")
            end)
            """,
        toml: "[background]\nidentifiers = [\"com.example.process\"]\n",
        failure: "terminated (backgroundTaskTimeout, 0x2182bad2)",
        // A launch in the background, the processing task run, a fetch during it.
        steps: 3),
    PlantedBug(
        name: "twice",
        lua: """
            -- Holds a task it never ends when the app enters the background twice within 10 s.
            local last
            lifeline.on("didEnterBackground", function()
              local now = lifeline.now()
              if last and now - last < 10 then lifeline.beginBackgroundTask("held") end
              last = now
            end)
            """,
        failure: "terminated (backgroundTaskTimeout, 0x2182bad2)",
        // launch, background, foreground, background.
        steps: 4),
    PlantedBug(
        name: "warn",
        lua: """
            -- Raises when a memory warning comes in the second after its task's expiration handler.
            local expiring = false
            lifeline.on("didEnterBackground", function()
              local id
              id = lifeline.beginBackgroundTask("work", function()
                expiring = true
                lifeline.after(1, function() expiring = false; lifeline.endBackgroundTask(id) end)
              end)
            end)
            lifeline.on("didReceiveMemoryWarning", function()
              if expiring then error("memory warning while expiring") end
            end)
            """,
        failure: "pluginError at ",
        // launch, background, a memory warning 25 to 26 s later.
        steps: 3),
]

/// A plugin that ends every task it begins, on every path.
private let correct = """
    local id
    lifeline.on("didEnterBackground", function()
      if id then return end
      id = lifeline.beginBackgroundTask("flush", function() lifeline.endBackgroundTask(id); id = nil end)
      lifeline.after(2, function() if id then lifeline.endBackgroundTask(id); id = nil end end)
    end)
    lifeline.on("performFetch", function(event) event.complete("noData") end)
    lifeline.on("didReceiveRemoteNotification", function(event) event.complete("noData") end)
    """

/// The step lines of a scenario (a time, then an action; not `http`).
private func stepLines(_ text: String) -> [String] {
    text.split(separator: "\n").map(String.init).filter { line in
        guard let first = line.first, first.isNumber else { return false }
        return !line.contains(" http ")
    }
}

/// The scenario files a folder holds, by name.
private func scenarios(in folder: String) -> [String: String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
    var files: [String: String] = [:]
    for name in names where name.hasSuffix(".scenario") {
        files[name] = try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)
    }
    return files
}

@Suite struct ExploreCLITests {
    @Test(arguments: plantedBugs)
    fileprivate func aPlantedBugIsFoundShrunkAndKeptAsAFailingScenario(_ bug: PlantedBug) throws {
        let ws = try Workspace()
        try ws.plugin(bug.name, bug.lua, toml: bug.toml)
        let result = try CLI.run(["explore", ws.plugins])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("FAIL \(bug.name): \(bug.failure)"), "\(result.stdout)")
        #expect(result.stdout.contains("1 of 1 plugins failing"))
        let folder = ws.plugins + "/\(bug.name)/scenarios"
        let files = scenarios(in: folder)
        try #require(files.count == 1, "\(files.keys)")
        let (name, text) = files.first!
        #expect(name.hasPrefix("explore-1-"))
        #expect(stepLines(text).count == bug.steps, "\(text)")
        #expect(result.stdout.contains("after \(bug.steps) steps, shrunk from "))
        #expect(text.contains("expect outcome completed"))

        // A regression test now: lifeline test fails on it.
        let test = try CLI.run(["test", ws.plugins])
        #expect(test.status == 1, "\(test.stdout)")
        #expect(test.stdout.contains("FAIL \(bug.name)/scenarios/\(name)"))

        // simulate gives the same failure, with the same report every time.
        let arguments = ["simulate", "--plugins", ws.plugins, "--scenario", folder + "/" + name, "--report", "-"]
        let first = try CLI.run(arguments)
        let second = try CLI.run(arguments)
        #expect(first.status == 1)
        #expect(first.stdout == second.stdout)
        #expect(!first.stdout.isEmpty)

        // The smallest: without any one of its steps, the scenario no longer fails (or is no
        // longer a valid lifecycle).
        let steps = stepLines(text)
        for dropped in steps.indices {
            let fewer = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                .filter { $0 != steps[dropped] }.joined(separator: "\n")
            let path = try ws.file("fewer.scenario", fewer)
            let run = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", path])
            #expect(run.status != 1, "still fails without '\(steps[dropped])':\n\(fewer)")
        }
    }

    @Test func aCorrectPluginPassesTenThousandRuns() throws {
        let ws = try Workspace()
        try ws.plugin("good", correct)
        let result = try CLI.run(["explore", ws.plugins, "--runs", "10000"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("explored 10000 runs of 1 plugins"))
        #expect(result.stdout.contains("0 of 1 plugins failing"))
        #expect(scenarios(in: ws.plugins + "/good/scenarios").isEmpty)
    }

    @Test func theShardsPartitionTheRuns() throws {
        let ws = try Workspace()
        try ws.plugin("good", correct)
        try ws.plugin("other", correct)
        func runs(_ extra: [String]) throws -> [String] {
            let result = try CLI.run(["explore", ws.plugins, "--runs", "40", "--verbose"] + extra)
            #expect(result.status == 0, "\(result.stderr)")
            return result.stdout.split(separator: "\n").map(String.init).filter { $0.contains(" run ") }
        }
        let all = try runs([])
        #expect(all.count == 80)
        var union: [String] = []
        for index in 1...3 {
            let shard = try runs(["--shard", "\(index)/3"])
            #expect(!shard.isEmpty)
            union += shard
        }
        #expect(union.count == all.count, "the shards overlap or miss runs")
        #expect(Set(union) == Set(all))
    }

    @Test func theSameSeedWritesTheSameFilesWhateverTheJobs() throws {
        let ws = try Workspace()
        for bug in plantedBugs { try ws.plugin(bug.name, bug.lua, toml: bug.toml) }
        var outputs: [[String: String]] = []
        for jobs in ["1", "8"] {
            let out = ws.path + "/out-\(jobs)"
            let result = try CLI.run(["explore", ws.plugins, "--seed", "7", "--jobs", jobs, "--out", out])
            #expect(result.status == 1)
            outputs.append(scenarios(in: out))
        }
        #expect(outputs[0].count == plantedBugs.count)
        #expect(outputs[0] == outputs[1])
        #expect(outputs[0].keys.allSatisfy { $0.hasPrefix("explore-7-") })
    }

    @Test func anExploreScenarioLimitsTheKindsOfStep() throws {
        let ws = try Workspace()
        // Fails as soon as a fetch or a foreground comes.
        let lua = """
            lifeline.on("performFetch", function() error("fetched") end)
            lifeline.on("willEnterForeground", function() error("came back") end)
            """
        try ws.plugin("picky", lua)
        let failing = try CLI.run(["explore", ws.plugins, "--runs", "300", "--out", ws.path + "/out"])
        #expect(failing.status == 1, "\(failing.stdout)")
        try ws.file("plugins/picky/explore.scenario", "steps launch, background, memory-warning, kill  # no fetch\n")
        let passing = try CLI.run(["explore", ws.plugins, "--runs", "300", "--out", ws.path + "/out2"])
        #expect(passing.status == 0, "\(passing.stdout)\(passing.stderr)")
    }

    @Test func anExploreScenarioGivesThePrefixTheAnswersAndTheInvariants() throws {
        let ws = try Workspace()
        // Sends one request as it enters the background; logs "bad answer" when an answer comes
        // that does not say ok (no answer at all, offline or refused, is fine).
        let lua = """
            lifeline.on("didEnterBackground", function()
              lifeline.background("check", function()
                local response = lifeline.http.request{url = "http://api.example.com/state"}
                if response and response.body ~= "ok" then lifeline.log.info("bad answer") end
              end)
            end)
            """
        try ws.plugin("client", lua, toml: "[permissions]\nnetwork = [\"api.example.com:*\"]\n")
        try ws.file(
            "plugins/client/explore.scenario",
            """
            0s launch
            expect no log plugin=client contains "bad answer"
            """)
        // The drawn answers break the invariant; the file's expect line is kept, with no
        // `outcome` line, and the file's own step starts the run.
        let failing = try CLI.run(["explore", ws.plugins, "--runs", "300"])
        #expect(failing.status == 1, "\(failing.stdout)\(failing.stderr)")
        #expect(failing.stdout.contains("FAIL client: 'expect no log plugin=client contains \"bad answer\"' failed"), "\(failing.stdout)")
        let files = scenarios(in: ws.plugins + "/client/scenarios")
        let text = try #require(files.values.first)
        #expect(text.contains("expect no log plugin=client contains \"bad answer\""))
        #expect(!text.contains("expect outcome completed"))
        #expect(stepLines(text).first == "0s launch")
        #expect(stepLines(text).contains { $0.hasSuffix(" background") })
        try FileManager.default.removeItem(atPath: ws.plugins + "/client/scenarios")

        // An http line of the file answers the requests it matches, before any drawn answer.
        try ws.file(
            "plugins/client/explore.scenario",
            """
            0s launch
            0s http GET api.example.com/state -> 200 ok
            expect no log plugin=client contains "bad answer"
            """)
        let passing = try CLI.run(["explore", ws.plugins, "--runs", "300"])
        #expect(passing.status == 0, "\(passing.stdout)\(passing.stderr)")
    }

    @Test func withExpectLinesAPluginErrorStillFailsTheRunByItsPlace() throws {
        let ws = try Workspace()
        try ws.plugin("raises", "lifeline.on('didReceiveMemoryWarning', function() error('no memory for this') end)")
        try ws.file("plugins/raises/explore.scenario", "expect no taskExpiring\n")
        let result = try CLI.run(["explore", ws.plugins, "--runs", "300"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("FAIL raises: pluginError at "), "\(result.stdout)")
        #expect(result.stdout.contains("raises/init.lua:1: no memory for this"), "\(result.stdout)")
        let text = try #require(scenarios(in: ws.plugins + "/raises/scenarios").values.first)
        #expect(text.contains("expect outcome completed"))
        #expect(stepLines(text).last?.hasSuffix("memory-warning") == true, "\(text)")
    }

    @Test func junitAndHtmlShowTheFailingPlugins() throws {
        let ws = try Workspace()
        try ws.plugin("twice", plantedBugs[1].lua)
        try ws.plugin("good", correct)
        let junit = ws.path + "/explore.xml", html = ws.path + "/explore.html"
        let result = try CLI.run(["explore", ws.plugins, "--runs", "500", "--junit", junit, "--html", html])
        #expect(result.status == 1)
        let xml = try String(contentsOfFile: junit, encoding: .utf8)
        #expect(xml.contains("name=\"good\""))
        #expect(xml.contains("name=\"twice\""))
        #expect(xml.components(separatedBy: "<failure").count == 2)
        #expect(xml.contains("backgroundTaskTimeout"))
        #expect(xml.contains("twice/scenarios/explore-1-"))
        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.contains("explore-1-"))
        #expect(page.contains("<html"))
    }

    @Test func aRandomSeedIsPrintedAndRepeats() throws {
        let ws = try Workspace()
        try ws.plugin("twice", plantedBugs[1].lua)
        let result = try CLI.run(["explore", ws.plugins, "--seed", "random", "--runs", "1000", "--out", ws.path + "/a"])
        let line = try #require(result.stdout.split(separator: "\n").first)
        let seed = try #require(line.split(separator: " ").last.map(String.init))
        #expect(UInt64(seed) != nil, "\(line)")
        let again = try CLI.run(["explore", ws.plugins, "--seed", seed, "--runs", "1000", "--out", ws.path + "/b"])
        #expect(again.status == result.status)
        #expect(scenarios(in: ws.path + "/a") == scenarios(in: ws.path + "/b"))
    }

    @Test func badUsageAndBadInputGetTheirExitCodes() throws {
        let ws = try Workspace()
        try ws.plugin("good", correct)
        for arguments in [
            ["--runs", "0"], ["--seed", "x"], ["--seed", "-1"], ["--shard", "0/2"], ["--shard", "3/2"],
            ["--shard", "1"], ["--jobs", "0"], ["--time", "0s"], ["--time", "soon"],
        ] {
            let result = try CLI.run(["explore", ws.plugins] + arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
        }
        try ws.plugin("broken", "lifeline.on('didEnterBackground', function() end")
        let broken = try CLI.run(["explore", ws.plugins, "--runs", "10"])
        #expect(broken.status == 65)
        #expect(broken.stderr.contains("broken/init.lua:"), "\(broken.stderr)")
        try FileManager.default.removeItem(atPath: ws.plugins + "/broken")
        let missing = try CLI.run(["explore", ws.path + "/nowhere"])
        #expect(missing.status == 65)
        let unknown = try CLI.run(["explore", ws.plugins, "--only", "bad"])
        #expect(unknown.status == 65)
        #expect(unknown.stderr.contains("no plugin folder 'bad'"))
        for (text, message) in [
            ("steps launch, jump\n", "unknown kind of step 'jump'"),
            ("steps launch\nsteps fetch\n", "a second 'steps' line"),
            ("0s launch\nexpect taskBegan at 2s\n", "cannot name a time"),
            ("0s fly\n", "unknown action"),
        ] {
            try ws.file("plugins/good/explore.scenario", text)
            let result = try CLI.run(["explore", ws.plugins])
            #expect(result.status == 65, "\(text): \(result.stderr)")
            #expect(result.stderr.contains("explore.scenario:"), "\(result.stderr)")
            #expect(result.stderr.contains(message), "\(result.stderr)")
        }
    }

    @Test func theWrittenFileNamesTheProfileTheRunsHad() throws {
        let ws = try Workspace()
        try ws.plugin("twice", plantedBugs[1].lua)
        let result = try CLI.run(["explore", ws.plugins, "--profile", "ios7", "--budget", "20s", "--runs", "2000"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let (name, text) = try #require(scenarios(in: ws.plugins + "/twice/scenarios").first)
        #expect(text.contains("profile ios7\n"), "\(text)")
        #expect(text.contains("limit budget 20.0\n"), "\(text)")
        // No flag needed: the file says the figures it failed with.
        let run = try CLI.run(["simulate", "--plugins", ws.plugins, "--scenario", ws.plugins + "/twice/scenarios/" + name, "--report", "-"])
        #expect(run.status == 1)
        let report = try parseReport(run.stdout)
        #expect((report["termination"] as? [String: Any])?["kind"] as? String == "backgroundTaskTimeout")
    }

    @Test func timeSpendsTheRunsUntilItRunsOut() throws {
        let ws = try Workspace()
        try ws.plugin("good", correct)
        let result = try CLI.run(["explore", ws.plugins, "--time", "1s"])
        #expect(result.status == 0, "\(result.stderr)")
        let line = try #require(result.stdout.split(separator: "\n").first)
        let count = try #require(Int(line.split(separator: " ")[1]))
        #expect(count > 0)
    }
}
