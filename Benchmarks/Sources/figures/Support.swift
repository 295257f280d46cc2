import Foundation
import Lifeline
import LifelineLua

/// A folder of Lua plugins, one per entry (name → init.lua), removed by the caller.
func tempPlugins(_ plugins: [String: String], manifest: String? = nil) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-figures-\(UUID().uuidString)").path
    for (name, lua) in plugins {
        try! FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
        try! lua.write(toFile: dir + "/" + name + "/init.lua", atomically: true, encoding: .utf8)
        if let manifest { try! manifest.write(toFile: dir + "/" + name + "/plugin.toml", atomically: true, encoding: .utf8) }
    }
    return dir
}

/// A launched host in simulate's setting (virtual clock, the timeline kept), with its executor.
final class BenchHost {
    let executor = MainExecutor(clock: VirtualClock())
    let host: LifelineHost

    init(_ descriptors: [PluginDescriptor], configuration: HostConfiguration = HostConfiguration()) {
        host = LifelineHost(configuration: configuration, plugins: descriptors, executor: executor)
        try! host.perform(.launch)
        drain()
    }

    convenience init(lua folder: String) {
        self.init(try! LuaPluginLoader.descriptors(in: folder))
    }

    /// Runs every job the executor holds now (virtual time does not move).
    func drain() { executor.run(shouldStop: { false }, afterJob: host.afterJob) }

    /// Performs `step` and runs the jobs it leaves.
    func perform(_ step: Step) {
        try! host.perform(step)
        drain()
    }

    func checkClean() {
        // Say why, so a row that fails on a loaded machine can be told from a real fault. Only
        // then: reading the whole timeline is no part of the work the counted rows measure.
        func errors() -> [TimelineEvent] {
            host.recorder.timeline.filter { $0.event == "pluginError" || $0.event == "terminated" }
        }
        precondition(host.recorder.pluginErrorCount == 0, "a benchmark plugin raised an error: \(errors())")
        precondition(host.activeTaskCount == 0, "a benchmark left a task running: \(errors())")
    }

    deinit { host.shutdown() }
}
