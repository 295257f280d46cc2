import CLua
import CLuaShims
import Foundation
import Logging
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Helpers for the Lua bridge tests: what needs Lua or the plugin loader. The rest (folders,
// databases, logs, plugins as closures) is in LifelineTesting. Every test writes its plugins to a
// folder of its own (tests run in parallel), and nothing here is global or mutable.

/// One line of Lua to put before a plugin's code, on the same line so that line numbers in
/// messages stay those of the code as written. `mark(x)` makes `x` visible in the timeline: it
/// begins and at once ends a background task named "mark:<x>", which costs nothing and leaves no
/// task behind.
let markPrelude =
    "local function mark(s) lifeline.endBackgroundTask(lifeline.beginBackgroundTask('mark:' .. tostring(s))) end "

/// A plugin folder holding one plugin per entry: `name -> init.lua`, each with `markPrelude`.
func plugins(_ sources: [String: String]) -> [String: String] {
    var files: [String: String] = [:]
    for (name, source) in sources { files["\(name)/init.lua"] = markPrelude + source }
    return files
}

/// Loads the Lua plugins in `files` and runs `scenario` in virtual time. With `logs`, the lines
/// the host and the plugins log land there.
func simulate(
    _ files: [String: String], binary: [String: [UInt8]] = [:], scenario: String = "0s launch",
    profile: Profile = .ios13, watchdogScale: Double = 1, until: HostTime? = nil, logs: LogLines? = nil
) throws -> Recorder {
    try withPluginFolder(files, binary: binary) { dir in
        let descriptors = try LuaPluginLoader.descriptors(in: dir)
        var configuration = HostConfiguration(profile: profile, watchdogScale: watchdogScale)
        if let logs { configuration.pluginLogger = { Logger(label: "plugin.\($0)") { _ in logs } } }
        return try Simulation.run(
            scenario: try Scenario.parse(scenario, fileName: "t.scenario"), plugins: descriptors,
            configuration: configuration, until: until)
    }
}

/// Runs `files` under `scenario` with the stores (and transfers) in `database`.
func simulate(
    _ files: [String: String], scenario: String = "0s launch", database: StateDatabase
) throws -> Recorder {
    try withPluginFolder(files) { dir in
        var configuration = HostConfiguration()
        configuration.database = database
        return try Simulation.run(
            scenario: try Scenario.parse(scenario, fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir), configuration: configuration)
    }
}

/// The error that loading and running `files` fails with, or nil when it runs.
func simulationError(
    _ files: [String: String], binary: [String: [UInt8]] = [:], scenario: String = "0s launch",
    profile: Profile = .ios13
) throws -> LifelineError? {
    try withPluginFolder(files, binary: binary) { dir -> LifelineError? in
        do throws(LifelineError) {
            let descriptors = try LuaPluginLoader.descriptors(in: dir)
            _ = try Simulation.run(
                scenario: try Scenario.parse(scenario, fileName: "t.scenario"), plugins: descriptors,
                configuration: HostConfiguration(profile: profile))
            return nil
        } catch {
            return error
        }
    }
}

/// Runs one plugin "p" whose init.lua is `source` (with `markPrelude`) and returns its marks.
func marksOf(_ source: String, scenario: String = "0s launch") throws -> [String] {
    let recorder = try simulate(plugins(["p": source]), scenario: scenario)
    #expect(recorder.pluginErrorCount == 0, "unexpected plugin errors: \(pluginErrors(recorder))")
    return marks(recorder)
}

/// The marks a run recorded (see `markPrelude`), in order.
func marks(_ recorder: Recorder) -> [String] { markEvents(recorder).map(\.mark) }

/// The marks a run recorded, with the plugin and the time of each.
func markEvents(_ recorder: Recorder) -> [(mark: String, plugin: String, time: HostTime)] {
    recorder.timeline.compactMap { e in
        guard e.event == "taskBegan", let name = e["name"]?.stringValue, name.hasPrefix("mark:") else { return nil }
        return (String(name.dropFirst("mark:".count)), e["plugin"]?.stringValue ?? "", e.time)
    }
}

/// A real Lua 5.4 binary chunk of `source`, as string.dump or luac would make it.
func binaryChunk(of source: String) -> [UInt8] {
    guard let L = luaL_newstate() else { fatalError("no Lua state") }
    defer { lua_close(L) }
    guard luaL_loadstring(L, source) == LUA_OK else { fatalError("bad Lua source in a test") }
    var bytes: [UInt8] = []
    withUnsafeMutablePointer(to: &bytes) { out in
        _ = lua_dump(
            L,
            { _, data, size, ud in
                guard let data, let ud else { return 0 }
                ud.assumingMemoryBound(to: [UInt8].self).pointee
                    .append(contentsOf: UnsafeRawBufferPointer(start: data, count: size))
                return 0
            }, out, 0)
    }
    return bytes
}

/// Holds the LuaPlugin a descriptor made, so a test can look into its state between steps.
/// Only touched on the test's own thread (the host makes plugins synchronously in `perform`).
final class PluginBox: @unchecked Sendable {
    var plugin: LuaPlugin?
}

/// A descriptor for the Lua plugin in `directory` that hands the instance it makes to `box`.
func capturingDescriptor(
    name: String, directory: String, memoryLimit: Int = PluginManifest.defaultMemoryLimit, box: PluginBox
) -> PluginDescriptor {
    PluginDescriptor(name: name, kind: .lua) { () throws(LifelineError) -> any PluginInstance in
        let plugin = try LuaPlugin(name: name, directory: directory, memoryLimit: memoryLimit)
        box.plugin = plugin
        return plugin
    }
}

/// Reads the folder's plugins and makes each, as a run loads them: a plugin.toml that cannot be
/// read fails its own plugin's load, not the reading of the folder.
func loadDescriptors(in dir: String) throws(LifelineError) {
    for descriptor in try LuaPluginLoader.descriptors(in: dir) { _ = try descriptor.make() }
}
