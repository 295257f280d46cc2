// The rows about size: plugins.load, report.write, scale.plugins.
import BenchBaselines
import Foundation
import Lifeline
import LifelineLua

// MARK: plugins.load

/// ns per plugin to load `count` copies of the one-handler plugin, as `simulate` does: find them,
/// read their manifests, make and sandbox their states, run their init.lua, launch.
func loadPlugins(_ dir: String, count: Int) -> Double {
    var bench: BenchHost?
    let ns = nanoseconds(per: count) { bench = BenchHost(lua: dir) }
    precondition(bench!.host.recorder.pluginErrorCount == 0)
    return ns
}

/// ns per state to make `count` sandboxed states that compile the same source.
func sandboxedStates(count: Int) -> Double {
    var states: UnsafeMutableRawPointer?
    let ns = nanoseconds(per: count) { states = bench_sandboxed_states_new(Int32(count), minimalPlugin) }
    bench_sandboxed_states_free(states)
    return ns
}

/// A folder of `count` copies of the one-handler plugin.
func pluginFolder(count: Int) -> String {
    tempPlugins(Dictionary(uniqueKeysWithValues: (0..<count).map { ("p\($0)", minimalPlugin) }))
}

func pluginsLoadRow() -> Row {
    let dir = pluginFolder(count: 1000)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let m = interleaved(rounds: 7, [{ loadPlugins(dir, count: 1000) }, { sandboxedStates(count: 1000) }])
    return Row(
        name: "plugins.load", unit: "µs/plugin", value: m[0] / 1000,
        baseline: ("a sandboxed state compiling the same source", m[1] / 1000), target: "≤ 2", met: m[0] / m[1] <= 2)
}

// MARK: report.write

/// A recorder holding `count` events like a long run's: task events with names, lifecycle events,
/// log lines.
func bigRecorder(events count: Int) -> Recorder {
    let recorder = Recorder(profile: .ios13)
    recorder.notePlugin(name: "sync", kind: "lua", status: "loaded")
    var task = 0
    for i in 0..<count {
        let time = HostTime(nanoseconds: Int64(i + 1) * 1_000_000)
        switch i % 4 {
        case 0:
            task += 1
            recorder.record(.task(time: time, event: "taskBegan", plugin: "sync", task: task, name: "upload \(task)"))
        case 1: recorder.record(.task(time: time, event: "taskEnded", plugin: "sync", task: task))
        case 2:
            recorder.record(TimelineEvent(
                time: time, event: "log",
                fields: [("plugin", .string("sync")), ("level", .string("info")), ("message", .string("sent batch \(i)"))]))
        default:
            recorder.record(TimelineEvent(time: time, event: "didReceiveMemoryWarning", fields: [("state", .string("background"))]))
        }
    }
    return recorder
}

/// MB/s at which the report of `recorder` is written to `path`, as `--report` writes it.
func writeReport(_ recorder: Recorder, to path: String) -> Double {
    let start = Monotonic.nanoseconds()
    try! RunOutput.writeReport(recorder, to: path)
    let seconds = Double(Monotonic.nanoseconds() - start) / 1e9
    return Double(fileSize(path)) / 1e6 / seconds
}

/// MB/s at which `bytes` go to `path` with one write.
func writeOnce(_ bytes: [UInt8], to path: String) -> Double {
    let start = Monotonic.nanoseconds()
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
    precondition(written == bytes.count)
    return Double(bytes.count) / 1e6 / (Double(Monotonic.nanoseconds() - start) / 1e9)
}

func fileSize(_ path: String) -> Int {
    var info = stat()
    precondition(stat(path, &info) == 0)
    return Int(info.st_size)
}

func reportWriteRow() -> Row {
    let recorder = bigRecorder(events: 1_000_000)
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-report-\(UUID().uuidString)").path
    try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    _ = writeReport(recorder, to: dir + "/report.json")
    let bytes = [UInt8](FileManager.default.contents(atPath: dir + "/report.json")!)
    // Each round starts with the rounds before it written back (outside the time): otherwise a
    // side pays for the other's writeback, and the flush that replacing a file starts waits behind it.
    let m = interleaved(rounds: 5, [
        { sync(); return writeReport(recorder, to: dir + "/report.json") },
        { sync(); return writeOnce(bytes, to: dir + "/bytes.json") },
    ])
    return Row(
        name: "report.write", unit: "MB/s", value: m[0], baseline: ("the same bytes with one write", m[1]),
        target: "≥ 0.5", met: m[0] / m[1] >= 0.5)
}

// MARK: scale.plugins

/// The plugin counts scale.plugins dispatches to.
let scaleCounts = [10, 100, 1_000, 10_000]

func scalePluginsRow() -> Row {
    let hosts = scaleCounts.map { dispatchHost(plugins: $0) }
    defer { for (_, dir) in hosts { try? FileManager.default.removeItem(atPath: dir) } }
    let m = interleaved(
        rounds: 7, zip(scaleCounts, hosts).map { count, host in { dispatchPerHandler(host.0, plugins: count, handlers: 100_000) } })
    for (host, _) in hosts { host.checkClean() }
    return Row(
        name: "scale.plugins", unit: "ns/handler", value: m[3], baseline: ("the same with 10 plugins", m[0]),
        target: "≤ 1.5", met: m[3] / m[0] <= 1.5, others: [("100 plugins", m[1]), ("1,000 plugins", m[2])])
}
