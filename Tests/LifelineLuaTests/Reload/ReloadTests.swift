import Foundation
import Logging
import Lifeline
import LifelineLua
import LifelineTesting
import Testing

/// A host on a virtual clock whose plugins live in a real folder that the test edits between
/// steps, with a real state database, reloaded as `lifeline run` reloads them.
private final class Reloading {
    let folder: String
    let stateFolder: String
    let executor = MainExecutor(clock: VirtualClock())
    let host: LifelineHost
    var refused: [Lifecycle.TransitionError] = []

    init(_ sources: [String: String], profile: Profile = .ios13, manifest: String = Reloading.manifest) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-reload-\(UUID().uuidString)").path
        folder = root + "/plugins"
        stateFolder = root + "/state"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let folder = folder
        for (name, source) in sources { try Self.write(folder, name, source, manifest: manifest) }
        // Info lines reach the report: the plugins' prints are what these tests read.
        var configuration = HostConfiguration(profile: profile, logger: Logger(label: "t") { _ in LogLines() })
        configuration.database = try StateDatabase.open(stateDirectory: stateFolder)
        configuration.reloadPlugins = { () throws(LifelineError) in try LuaPluginLoader.descriptors(in: folder) }
        host = LifelineHost(
            configuration: configuration, plugins: try LuaPluginLoader.descriptors(in: folder), executor: executor)
    }

    deinit {
        host.shutdown()
        try? FileManager.default.removeItem(atPath: (folder as NSString).deletingLastPathComponent)
    }

    /// Every plugin here may schedule the task "r".
    static let manifest = "[background]\nidentifiers = [\"r\"]\n"

    static func write(_ folder: String, _ name: String, _ source: String, manifest: String = manifest) throws {
        try FileManager.default.createDirectory(atPath: folder + "/" + name, withIntermediateDirectories: true)
        try source.write(toFile: folder + "/" + name + "/init.lua", atomically: true, encoding: .utf8)
        try manifest.write(toFile: folder + "/" + name + "/plugin.toml", atomically: true, encoding: .utf8)
    }

    /// Edits a plugin's init.lua at `seconds`, between two steps.
    func edit(at seconds: Double, _ name: String, _ source: String) {
        executor.schedule(at: .seconds(seconds)) { [folder] in try? Self.write(folder, name, source) }
    }

    func remove(at seconds: Double, _ name: String) {
        executor.schedule(at: .seconds(seconds)) { [folder] in try? FileManager.default.removeItem(atPath: folder + "/" + name) }
    }

    func at(_ seconds: Double, _ step: Step) {
        executor.schedule(at: .seconds(seconds)) { [unowned self] in
            do throws(Lifecycle.TransitionError) { try host.perform(step) } catch { refused.append(error) }
        }
    }

    var outcomes: [ReloadOutcome] = []
    /// Reloads at `seconds` and keeps what the reload did.
    func reload(at seconds: Double, all: Bool = false) {
        executor.schedule(at: .seconds(seconds)) { [unowned self] in outcomes.append(host.reload(all: all)) }
    }

    func run(until seconds: Double) {
        executor.run(until: .seconds(seconds), shouldStop: { [unowned self] in host.isStopped }, afterJob: host.afterJob)
    }

    /// The plugins' log lines and the reload's own events, as `time event fields` lines.
    var lines: [String] {
        LifelineTesting.lines(host.recorder, only: ["log", "reloaded", "unloaded", "willUnload", "taskExpiring", "taskEnded", "terminated"])
    }

    func logs(_ plugin: String) -> [String] {
        host.recorder.timeline.filter { $0.event == "log" && $0["plugin"] == .string(plugin) }.compactMap {
            if case .string(let message)? = $0["message"] { return message }
            return nil
        }
    }
}

/// A plugin that says which version it is and which events it hears.
private func talker(_ version: String) -> String {
    """
    print("\(version) loaded")
    for _, name in ipairs({"didFinishLaunching", "didBecomeActive", "didEnterBackground", "willEnterForeground"}) do
      lifeline.on(name, function(e) print("\(version) " .. name .. " " .. e.state) end)
    end
    """
}

@Suite struct ReloadTests {
    @Test func reload_withNothingChanged_keepsEveryPluginsState_andStartsNoGeneration() throws {
        let run = try Reloading(["a": talker("a1"), "b": talker("b1")])
        run.at(0, .launch)
        run.reload(at: 1)
        run.at(2, .background)
        run.run(until: 3)
        #expect(run.outcomes.count == 1)
        #expect(run.outcomes.first?.generation == 1)
        #expect(run.outcomes.first?.unchanged == 2)
        #expect(run.outcomes.first?.changed == [])
        #expect(run.outcomes.first?.failure == nil)
        #expect(run.logs("a") == ["a1 loaded", "a1 didFinishLaunching inactive", "a1 didBecomeActive active", "a1 didEnterBackground background"])
        #expect(run.lines.contains("1 reloaded generation=1 result=ok changed=[] added=[] removed=[] unchanged=2"))
        #expect(!run.lines.contains { $0.contains("unloaded") })
    }

    @Test func reload_ofAChangedFile_givesThatPluginAloneANewGeneration_broughtToTheActiveApp() throws {
        let run = try Reloading(["a": talker("a1"), "b": talker("b1")])
        run.at(0, .launch)
        run.edit(at: 1, "a", talker("a2"))
        run.reload(at: 2)
        run.at(3, .background)
        run.run(until: 4)
        #expect(run.outcomes.first?.changed == ["a"])
        #expect(run.outcomes.first?.unchanged == 1)
        #expect(run.outcomes.first?.generation == 2)
        // The new generation is launched into the active app: didFinishLaunching, then didBecomeActive.
        #expect(run.logs("a") == [
            "a1 loaded", "a1 didFinishLaunching inactive", "a1 didBecomeActive active",
            "a2 loaded", "a2 didFinishLaunching inactive", "a2 didBecomeActive active", "a2 didEnterBackground background",
        ])
        // The unchanged plugin heard nothing of it.
        #expect(run.logs("b") == ["b1 loaded", "b1 didFinishLaunching inactive", "b1 didBecomeActive active", "b1 didEnterBackground background"])
        #expect(run.lines.contains("2 unloaded plugin=a ended=[]"))
    }

    @Test func reload_withASyntaxError_changesNothing_andSaysFileAndLine() throws {
        let run = try Reloading(["a": talker("a1")])
        run.at(0, .launch)
        run.edit(at: 1, "a", "print('half'\n")
        run.reload(at: 2)
        run.at(3, .background)
        run.run(until: 4)
        let outcome = try #require(run.outcomes.first)
        #expect(outcome.generation == 1)
        #expect(outcome.changed.isEmpty)
        #expect(outcome.failure?.contains("a/init.lua:2:") == true, "\(outcome.failure ?? "")")
        #expect(run.logs("a").last == "a1 didEnterBackground background")
        #expect(run.lines.contains { $0.hasPrefix("2 reloaded generation=1 result=failed reason=plugin 'a': ") })
        #expect(!run.lines.contains { $0.contains("unloaded") })
    }

    @Test func reload_thatFailsToLoadAtRuntime_changesNothing() throws {
        // A plugin that raises while it loads fails the check as a syntax error does.
        let run = try Reloading(["a": talker("a1")])
        run.at(0, .launch)
        run.edit(at: 1, "a", "error('not today')")
        run.reload(at: 2)
        run.run(until: 3)
        #expect(run.outcomes.first?.failure?.contains("not today") == true)
        #expect(run.host.recorder.termination == nil)
    }

    @Test func reload_ofAPluginThatOverrunsTheLaunchLimit_changesNothing_andNamesItOnce() throws {
        let run = try Reloading(["a": talker("a1")], profile: profile { $0.launchLimit = 0.2 })
        run.at(0, .launch)
        run.edit(at: 1, "a", "while true do end")
        run.reload(at: 2)
        run.run(until: 3)
        let failure = try #require(run.outcomes.first?.failure)
        #expect(failure.hasPrefix("plugin 'a' did not finish loading within the launch limit"), "\(failure)")
        #expect(run.outcomes.first?.generation == 1)
        #expect(run.host.recorder.termination == nil)
    }

    @Test func reload_ofAnAddedAndARemovedPlugin() throws {
        let run = try Reloading(["a": talker("a1"), "b": talker("b1")])
        run.at(0, .launch)
        run.remove(at: 1, "b")
        run.executor.schedule(at: .seconds(1)) { [folder = run.folder] in try? Reloading.write(folder, "c", talker("c1")) }
        run.reload(at: 2)
        run.at(3, .background)
        run.run(until: 4)
        #expect(run.outcomes.first?.added == ["c"])
        #expect(run.outcomes.first?.removed == ["b"])
        #expect(run.logs("c") == ["c1 loaded", "c1 didFinishLaunching inactive", "c1 didBecomeActive active", "c1 didEnterBackground background"])
        #expect(run.logs("b").last == "b1 didBecomeActive active")
        #expect(run.lines.contains("2 unloaded plugin=b ended=[]"))
    }

    @Test func oldGeneration_hearsWillUnloadOnce_cannotStartWork_andItsTimersAreCancelled() throws {
        let old = """
            lifeline.after(10, function() print("old timer fired") end)
            lifeline.on("willUnload", function()
              print("goodbye")
              for _, start in ipairs({
                function() return lifeline.beginBackgroundTask("late") end,
                function() return lifeline.after(1, function() end) end,
                function() return lifeline.on("didBecomeActive", function() end) end,
                function() return lifeline.background(function() end) end,
              }) do
                local ok, err = pcall(start)
                print(tostring(ok) .. " " .. tostring(err))
              end
            end)
            """
        let run = try Reloading(["a": old])
        run.at(0, .launch)
        run.edit(at: 1, "a", "print('new')")
        run.reload(at: 2)
        run.run(until: 30)
        let logs = run.logs("a")
        #expect(logs.first == "goodbye")
        #expect(logs.filter { $0.hasPrefix("false ") && $0.contains("no new work may start") }.count == 4, "\(logs)")
        #expect(!logs.contains("old timer fired"))
        #expect(logs.last == "new")
        #expect(run.lines.filter { $0.contains("willUnload") }.count == 1)
    }

    @Test func oldGenerationsTasks_getTheirExpirationHandlers_andWhatIsLeftIsEndedAtTheDeadline_withoutTermination() throws {
        let old = """
            local polite, stubborn
            polite = lifeline.beginBackgroundTask("polite", function() print("polite expiring"); lifeline.endBackgroundTask(polite) end)
            stubborn = lifeline.beginBackgroundTask("stubborn", function() print("stubborn expiring") end)
            """
        let run = try Reloading(["a": old], profile: profile { $0.expirationHandlerLimit = 5 })
        run.at(0, .launch)
        run.edit(at: 1, "a", "print('new')")
        run.reload(at: 10)
        run.run(until: 60)
        let lines = run.lines
        #expect(lines.contains("10 taskExpiring plugin=a task=1"))
        #expect(lines.contains("10 taskExpiring plugin=a task=2"))
        #expect(lines.contains("10 taskEnded plugin=a task=1 expired=true"))
        // The deadline is the expiration-handler limit: what is left then is ended and reported.
        #expect(lines.contains("15 taskEnded plugin=a task=2 expired=true"))
        #expect(lines.contains("15 unloaded plugin=a ended=[2]"))
        #expect(run.host.recorder.termination == nil)
        #expect(run.host.state == .active)
    }

    @Test func aTaskLeftAtTheDeadline_ofAReloadInTheBackground_isEndedAsExpired() throws {
        // The fresh budget of a reload in the background must not wipe the old task's expiring mark.
        let old = """
            lifeline.on("didEnterBackground", function()
              lifeline.beginBackgroundTask("stubborn", function() print("stubborn expiring") end)
            end)
            """
        let run = try Reloading(["a": old], profile: profile { $0.expirationHandlerLimit = 5 })
        run.at(0, .launch)
        run.at(1, .background)
        run.edit(at: 2, "a", "print('new')")
        run.reload(at: 3)
        run.run(until: 20)
        let lines = run.lines
        #expect(lines.contains("3 taskExpiring plugin=a task=1"), "\(lines)")
        #expect(lines.contains("8 taskEnded plugin=a task=1 expired=true"), "\(lines)")
        #expect(lines.contains("8 unloaded plugin=a ended=[1]"))
        #expect(run.host.recorder.termination == nil)
    }

    @Test func anOldGenerationWhoseTasksEndedBeforeTheDeadline_isUnloadedThen_whileTheAppSleeps() throws {
        // Its work is stopped as expired on a later turn; then the app has no task and sleeps. The
        // old state is closed at the deadline all the same, not when the app next wakes.
        let old = """
            lifeline.on("didEnterBackground", function()
              lifeline.background("w", function() pcall(lifeline.sleep, 100) end)
            end)
            """
        let run = try Reloading(["a": old], profile: profile { $0.expirationHandlerLimit = 5 })
        run.at(0, .launch)
        run.at(1, .background)
        run.edit(at: 2, "a", "print('new')")
        run.reload(at: 3)
        run.run(until: 20)
        let lines = run.lines
        #expect(lines.contains("3 taskEnded plugin=a task=1 expired=true"), "\(lines)")
        #expect(lines.contains("8 unloaded plugin=a ended=[]"), "\(lines)")
        #expect(run.host.state == .suspended)
    }

    @Test func aLoadThatFailsAfterTheCheckPassed_skipsThePlugin_andLeavesTheOlderGenerationsTasksToEndAsExpired() throws {
        // The check's store is empty; the real one says this plugin has loaded twice already.
        let source = """
            local v = lifeline.store.get("gen") or 0
            if v >= 2 then error("the store says " .. v) end
            lifeline.store.set("gen", v + 1)
            lifeline.on("didEnterBackground", function()
              lifeline.beginBackgroundTask("keep", function() print("expiring " .. (v + 1)) end)
            end)
            """
        let run = try Reloading(["a": source, "b": "print('b')"], profile: profile { $0.expirationHandlerLimit = 5 })
        run.at(0, .launch)
        run.at(1, .background)
        run.reload(at: 2, all: true)
        run.reload(at: 3, all: true)
        run.reload(at: 4)
        run.run(until: 20)
        let lines = run.lines
        // One expiration handler for task 1, though two reloads came while it ran.
        #expect(run.logs("a") == ["expiring 1"], "\(lines)")
        #expect(lines.contains("7 taskEnded plugin=a task=1 expired=true"), "\(lines)")
        #expect(lines.contains("7 unloaded plugin=a ended=[1]"), "\(lines)")
        #expect(run.host.loadError == nil)
        #expect(run.host.recorder.termination == nil)
        // The run goes on without it, and its exit code says a plugin failed.
        #expect(run.host.recorder.pluginErrorCount == 2)
        #expect(run.host.recorder.exitCode == 1)
        #expect(run.outcomes[1].skipped == ["a"])
        #expect(run.outcomes[1].summary == "a, b changed, 0 unchanged, a skipped: failed to load")
        // It is loaded again by the next reload, though its files did not change.
        #expect(run.outcomes.last?.changed == ["a"])
        #expect(run.outcomes.last?.unchanged == 1)
    }

    @Test func anOldGenerationsQueueOperations_neverStartAfterTheReload_andItsQueueDelegatesHearNothing() throws {
        let source = """
            local gen = (lifeline.store.get("gen") or 0) + 1
            lifeline.store.set("gen", gen)
            local q = lifeline.queue("notes")
            q:on("didFinishOperations", function() print("all done, heard by " .. gen) end)
            lifeline.on("didEnterBackground", function()
              for i = 1, 3 do
                q:add{name = "op-" .. i, run = function() lifeline.sleep(1); print("done " .. i) end}
              end
            end)
            """
        let run = try Reloading(["a": source])
        run.at(0, .launch)
        run.at(2, .background)
        run.reload(at: 3.5, all: true)
        run.at(10, .foreground)
        run.run(until: 20)
        let ops = LifelineTesting.lines(run.host.recorder, only: ["opStarted", "opFinished"])
        // The queue is shared by name: the new generation's delegate may hear it finish, the old one's not.
        #expect(!run.logs("a").contains("all done, heard by 1"), "\(run.logs("a"))")
        #expect(run.logs("a").first == "done 1")
        #expect(!run.logs("a").contains { $0.hasPrefix("done 2") || $0.hasPrefix("done 3") })
        #expect(ops.contains("3.5 opFinished plugin=a queue=notes op=2 name=op-2 result=expired"), "\(ops)")
        #expect(ops.contains("3.5 opFinished plugin=a queue=notes op=3 name=op-3 result=cancelled"), "\(ops)")
        #expect(!ops.contains { $0.contains("opStarted") && $0.contains("op=3") }, "\(ops)")
    }

    @Test func aChangedPluginToml_bringsItsNewStoreAndFilesQuotas() throws {
        let source = """
            print("store " .. tostring(pcall(lifeline.store.set, "big", string.rep("x", 2000))))
            print("files " .. tostring(pcall(lifeline.files.write, "big.txt", string.rep("x", 2000))))
            """
        func limits(_ size: String) -> String { "[limits]\nstore = \"\(size)\"\nfiles = \"\(size)\"\n" }
        let run = try Reloading(["a": source], manifest: limits("1KiB"))
        run.at(0, .launch)
        run.executor.schedule(at: .seconds(1)) { [folder = run.folder] in
            try? Reloading.write(folder, "a", source, manifest: limits("1MiB"))
        }
        run.reload(at: 2)
        run.run(until: 3)
        #expect(run.outcomes.first?.changed == ["a"])
        #expect(run.logs("a") == ["store false", "files false", "store true", "files true"], "\(run.logs("a"))")
    }

    @Test func aScheduledTaskUnderWay_expiresWithItsGeneration_andTheNewOneRegistersItsOwnHandler() throws {
        func source(_ version: String) -> String {
            """
            lifeline.tasks.register("r", function(task)
              print("\(version) runs " .. task.identifier)
              task.expirationHandler = function() print("\(version) task expiring") end
            end)
            if not lifeline.store.get("submitted") then
              lifeline.store.set("submitted", true)
              lifeline.tasks.submit{identifier = "r", kind = "refresh"}
            end
            print("\(version) loaded")
            """
        }
        let run = try Reloading(["a": source("v1")], profile: profile { $0.expirationHandlerLimit = 5 })
        run.at(0, .launch)
        run.at(1, .background)
        run.at(2, .runTasks(.all))
        run.edit(at: 3, "a", source("v2"))
        run.reload(at: 4)
        run.run(until: 60)
        #expect(run.outcomes.first?.changed == ["a"])
        let logs = run.logs("a")
        #expect(logs.contains("v1 runs r"), "\(logs)")
        #expect(logs.contains("v1 task expiring"))
        #expect(logs.last == "v2 loaded")
        #expect(pluginErrors(run.host.recorder).isEmpty)
        #expect(run.host.recorder.termination == nil)
        #expect(run.lines.contains("9 unloaded plugin=a ended=[]"))
    }

    @Test func aReloadInTheBackground_givesAFreshBudget_andTheNewGenerationStartsThere() throws {
        let source = """
            lifeline.on("didFinishLaunching", function(e)
              print(e.state .. " " .. string.format("%.0f", lifeline.backgroundTimeRemaining()))
            end)
            """
        let run = try Reloading(["a": "print('v1')"])
        run.at(0, .launch)
        run.at(1, .background)
        run.edit(at: 20, "a", source)
        run.reload(at: 25)
        run.run(until: 26)
        #expect(run.logs("a").last == "background \(Int(Profile.ios13.budget))")
    }

    @Test func aReloadOfASuspendedApp_wakesIt_first() throws {
        let run = try Reloading(["a": talker("a1")])
        run.at(0, .launch)
        run.at(1, .background)
        run.edit(at: 20, "a", talker("a2"))
        run.reload(at: 30)
        run.run(until: 31)
        let names = eventNames(run.host.recorder)
        let suspended = try #require(names.firstIndex(of: "suspended"))
        #expect(names[suspended...].contains("resumed"))
        #expect(run.logs("a").suffix(2) == ["a2 loaded", "a2 didFinishLaunching background"])
    }

    @Test func reloadAll_inAScenario_givesEveryPluginANewGeneration_thatRecoversItsStateFromItsStore() throws {
        let counter = """
            local n = (lifeline.store.get("n") or 0) + 1
            lifeline.store.set("n", n)
            print("generation " .. n)
            """
        let recorder = try withPluginFolder(["counter/init.lua": counter]) { dir in
            try withDatabase { database in
                var setup = RunSetup(plugins: try LuaPluginLoader.descriptors(in: dir))
                setup.reloadPlugins = { () throws(LifelineError) in try LuaPluginLoader.descriptors(in: dir) }
                return try Simulation.run(
                    scenario: try Scenario.parse("0s launch\n1s reload\n2s reload all\n3s reload all\n", fileName: "t"),
                    setup: setup, database: database)
            }
        }
        let logs = lines(recorder, only: ["log", "reloaded"])
        #expect(logs == [
            "0 log plugin=counter level=info message=generation 1",
            "1 reloaded generation=1 result=ok changed=[] added=[] removed=[] unchanged=1",
            #"2 reloaded generation=2 result=ok changed=["counter"] added=[] removed=[] unchanged=0"#,
            "2 log plugin=counter level=info message=generation 2",
            #"3 reloaded generation=3 result=ok changed=["counter"] added=[] removed=[] unchanged=0"#,
            "3 log plugin=counter level=info message=generation 3",
        ])
    }

    @Test func aReloadWithTwoPluginsOfOneName_changesNothing() throws {
        try withPluginFolder(["a/init.lua": talker("a1")]) { dir in
            let descriptors = try LuaPluginLoader.descriptors(in: dir)
            var configuration = HostConfiguration(logger: quietLogger())
            // Two plugins with one name, as two folders that name one compiled-in plugin would give.
            configuration.reloadPlugins = { descriptors + descriptors }
            let host = LifelineHost(configuration: configuration, plugins: descriptors, executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            try host.perform(.launch)
            let outcome = host.reload(all: true)
            #expect(outcome.failure == "two plugins are named 'a'")
            #expect(outcome.generation == 1)
            #expect(host.recorder.timeline.filter { $0.event == "unloaded" }.isEmpty)
        }
    }

    @Test func aHostWithoutReloadPlugins_findsItsPluginsUnchanged_fromTheFirstReload() throws {
        try withPluginFolder(["a/init.lua": talker("a1")]) { dir in
            let descriptors = try LuaPluginLoader.descriptors(in: dir)
            let host = LifelineHost(
                configuration: HostConfiguration(logger: quietLogger()), plugins: descriptors,
                executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            try host.perform(.launch)
            let first = host.reload()
            #expect(first.changed.isEmpty && first.unchanged == 1 && first.generation == 1, "\(first)")
            #expect(host.reload(all: true).changed == ["a"])
        }
    }

    @Test func aPluginAReloadCouldNotLoad_isLoadedAgainByTheNextReload_evenOnAHostWithoutReloadPlugins() throws {
        // Its second load fails on what its store holds by then; the check, on an empty store, passes.
        let source = """
            local n = (lifeline.store.get("loads") or 0) + 1
            lifeline.store.set("loads", n)
            if n == 2 then error("the second load fails") end
            print("load " .. n)
            """
        try withPluginFolder(["a/init.lua": source]) { dir in
            let state = FileManager.default.temporaryDirectory.appendingPathComponent("reload-state-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: state) }
            var configuration = HostConfiguration(logger: Logger(label: "t") { _ in LogLines() })
            configuration.database = try StateDatabase.open(stateDirectory: state)
            let host = LifelineHost(
                configuration: configuration, plugins: try LuaPluginLoader.descriptors(in: dir),
                executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            try host.perform(.launch)
            #expect(host.reload(all: true).changed == ["a"])
            let next = host.reload()
            #expect(next.changed == ["a"], "\(next)")
            let loads = host.recorder.timeline.filter { $0.event == "log" }.compactMap { event -> String? in
                if case .string(let message)? = event["message"] { return message }
                return nil
            }
            #expect(loads == ["load 1", "load 3"], "\(loads)")
        }
    }

    @Test func scenarioFiles_readReloadLines() throws {
        let scenario = try Scenario.parse("0s launch\n1s reload\n2s reload all\n", fileName: "t")
        #expect(scenario.entries.map(\.step) == [.launch, .reload(all: false), .reload(all: true)])
        #expect(try Step.parse("reload") == .reload(all: false))
        #expect(Step.actionList.contains("reload, reload all"))
    }
}
