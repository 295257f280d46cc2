import CLua
import CLuaShims
import Foundation
import Logging
import Testing

@testable import Lifeline
@testable import LifelineLua

// Helpers shared by the Lua bridge tests. Every test writes its plugins to a folder of its own
// (tests run in parallel), and nothing here is global or mutable.

/// One line of Lua to put before a plugin's code, on the same line so that line numbers in
/// messages stay those of the code as written. `mark(x)` makes `x` visible in the timeline: it
/// begins and at once ends a background task named "mark:<x>", which costs nothing and leaves no
/// task behind.
let markPrelude =
    "local function mark(s) lifeline.endBackgroundTask(lifeline.beginBackgroundTask('mark:' .. tostring(s))) end "

/// Writes `files` (paths relative to a fresh temporary folder) and calls `body` with the folder's
/// path. The folder is removed afterwards, whatever happens.
func withPluginFolder<T>(
    _ files: [String: String], binary: [String: [UInt8]] = [:], _ body: (String) throws -> T
) throws -> T {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("lifeline-lua-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    for (path, text) in files {
        try write(Data(text.utf8), to: root.appendingPathComponent(path))
    }
    for (path, bytes) in binary {
        try write(Data(bytes), to: root.appendingPathComponent(path))
    }
    return try body(root.path)
}

private func write(_ data: Data, to url: URL) throws {
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url)
}

/// A plugin folder holding one plugin per entry: `name -> init.lua`, each with `markPrelude`.
func plugins(_ sources: [String: String]) -> [String: String] {
    var files: [String: String] = [:]
    for (name, source) in sources { files["\(name)/init.lua"] = markPrelude + source }
    return files
}

/// A profile with every watchdog limit as in ios13 except the ones given.
func profile(
    launch: Double? = nil, background: Double? = nil, transition: Double? = nil, expiration: Double? = nil
) -> Profile {
    var p = Profile.ios13
    if let launch { p.launchLimit = launch }
    if let background { p.backgroundLimit = background }
    if let transition { p.transitionLimit = transition }
    if let expiration { p.expirationHandlerLimit = expiration }
    return p
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

/// A state database in a fresh folder, removed afterwards.
func withDatabase<T>(_ body: (StateDatabase) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(try StateDatabase.open(stateDirectory: dir))
}

/// Collects log lines as "level: message" (a LogHandler whose copies share one list).
final class LogLines: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [String] = []
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) { lock.withLock { collected.append("\(event.level): \(event.message)") } }
    var lines: [String] { lock.withLock { collected } }
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

extension JSONValue {
    var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
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

/// The pluginError events of a run.
func pluginErrors(_ recorder: Recorder) -> [(plugin: String, message: String, traceback: String)] {
    recorder.timeline.compactMap { e in
        guard e.event == "pluginError" else { return nil }
        return (e["plugin"]?.stringValue ?? "", e["message"]?.stringValue ?? "", e["traceback"]?.stringValue ?? "")
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

/// A host on a virtual clock with the given plugins; the caller drives it step by step.
func makeHost(_ descriptors: [PluginDescriptor], profile: Profile = .ios13) -> LifelineHost {
    LifelineHost(
        configuration: HostConfiguration(profile: profile), plugins: descriptors,
        executor: MainExecutor(clock: VirtualClock()))
}

/// Reads the folder's plugins and makes each, as a run loads them: a plugin.toml that cannot be
/// read fails its own plugin's load, not the reading of the folder.
func loadDescriptors(in dir: String) throws(LifelineError) {
    for descriptor in try LuaPluginLoader.descriptors(in: dir) { _ = try descriptor.make() }
}
