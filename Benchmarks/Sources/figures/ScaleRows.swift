// The rows about size: plugins.load, report.write, scale.plugins at each size.
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

/// MB/s at which `bytes` replace the file at `path` as Lifeline replaces a report: one write to
/// a new temporary file beside it, no fsync, then a rename over the old one. The two sides then
/// pay the same for the file system, and the ratio is what formatting costs.
func replaceOnce(_ bytes: [UInt8], at path: String) -> Double {
    let start = Monotonic.nanoseconds()
    let temporary = path + ".\(getpid()).tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
    precondition(fd >= 0)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    precondition(close(fd) == 0 && written == bytes.count && rename(temporary, path) == 0)
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
    _ = replaceOnce(bytes, at: dir + "/bytes.json")  // so that each side's first round replaces a file too
    // Each round starts with the rounds before it written back (outside the time): otherwise a
    // side pays for the other's writeback, and the flush that replacing a file starts waits behind it.
    let m = interleaved(rounds: 5, [
        { sync(); return writeReport(recorder, to: dir + "/report.json") },
        { sync(); return replaceOnce(bytes, at: dir + "/bytes.json") },
    ])
    return Row(
        name: "report.write", unit: "MB/s", value: m[0],
        baseline: ("the same bytes, one write to a new file renamed over the old", m[1]), target: "≥ 0.8",
        met: m[0] / m[1] >= 0.8)
}

// MARK: scale.plugins

/// The plugin counts scale.plugins dispatches to.
let scaleCounts = [10, 100, 1_000, 10_000]

/// ns per handler at each size, Lifeline's and the bare C loop's over as many states, measured
/// once for the four rows, in alternating rounds: a state's memory is cold the same way on both
/// sides, so each ratio says what Lifeline adds at that size, not what the cache costs.
let scaleFigures: [Int: (lifeline: Double, bare: Double)] = {
    let hosts = scaleCounts.map { dispatchHost(plugins: $0) }
    defer { for (_, dir) in hosts { try? FileManager.default.removeItem(atPath: dir) } }
    var sides: [() -> Double] = []
    for (count, host) in zip(scaleCounts, hosts) {
        sides.append { dispatchPerHandler(host.0, plugins: count, handlers: 100_000) }
        sides.append { bareDispatch(states: count, rounds: max(1, 100_000 / count)) }
    }
    let m = interleaved(rounds: 7, sides)
    for (host, _) in hosts { host.checkClean() }
    return Dictionary(uniqueKeysWithValues: scaleCounts.enumerated().map { i, count in (count, (m[2 * i], m[2 * i + 1])) })
}()

func scalePluginsRow(_ count: Int) -> Row {
    let f = scaleFigures[count]!
    return Row(
        name: "scale.plugins." + (count >= 1000 ? "\(count / 1000)k" : "\(count)"), unit: "ns/handler", value: f.lifeline,
        baseline: ("C loop, \(count.formatted()) lua_States, lua_pcall", f.bare), target: "≤ 1.5",
        met: f.lifeline / f.bare <= 1.5)
}
