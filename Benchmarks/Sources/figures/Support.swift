#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Lifeline
import LifelineLua

/// A folder of Lua plugins, one per entry (name → init.lua), removed by the caller. Written with
/// plain system calls: plugins.load counts making the folder with the loading, and Foundation's
/// atomic writes cost about 25,000 instructions a plugin, a twentieth of the row.
func tempPlugins(_ plugins: [String: String], manifest: String? = nil) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-figures-\(UUID().uuidString)").path
    precondition(mkdir(dir, 0o755) == 0)
    func put(_ text: String, at path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0)
        let written = text.utf8.withContiguousStorageIfAvailable { Glibc.write(fd, $0.baseAddress, $0.count) }
            ?? Array(text.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        precondition(close(fd) == 0 && written == text.utf8.count)
    }
    for (name, lua) in plugins {
        precondition(mkdir(dir + "/" + name, 0o755) == 0)
        put(lua, at: dir + "/" + name + "/init.lua")
        if let manifest { put(manifest, at: dir + "/" + name + "/plugin.toml") }
    }
    return dir
}

/// Removes a folder `tempPlugins` made, with plain system calls: plugins.load's count includes
/// it, and FileManager's removal costs about 50,000 instructions a plugin, an eighth of the row.
func removePlugins(_ dir: String) {
    func remove(_ fd: Int32) {
        guard let listing = fdopendir(fd) else { return }
        defer { closedir(listing) }
        while let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name == "." || name == ".." { continue }
            // A file system that gives no type (DT_UNKNOWN) refuses to unlink a folder: then recurse.
            if entry.pointee.d_type != DT_DIR, unlinkat(fd, name, 0) == 0 || (errno != EISDIR && errno != EPERM) {
                continue
            }
            let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if sub >= 0 { remove(sub) }
            unlinkat(fd, name, AT_REMOVEDIR)
        }
    }
    let fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    if fd >= 0 { remove(fd) }
    rmdir(dir)
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
