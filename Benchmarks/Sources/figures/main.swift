// The benchmarks, each beside its baseline measured in the same run.
//
//   figures [--json FILE] [--instructions] [NAME ...]
//                                       every row, or the named ones (e.g. `figures dispatch.lua`);
//                                       with --instructions, the CPU-bound ones also counted by callgrind
//   figures count NAME lifeline|baseline STEPS
//                                       one side of a counted row, for callgrind
//
// scripts/bench builds this in release and runs it. docs/benchmarks.md says what each row measures.
import BenchBaselines
import Foundation
import Logging

LoggingSystem.bootstrap { label in
    var h = StreamLogHandler.standardError(label: label)
    h.logLevel = .critical
    return h
}

let rows: [(name: String, run: () -> Row)] = [
    ("dispatch.lua", dispatchRow),
    ("task.lua", taskLuaRow),
    ("task.swift", taskSwiftRow),
    ("queue.swift", queueSwiftRow),
    ("background.lua", backgroundRow),
    ("watchdog.overhead", watchdogOverheadRow),
    ("watchdog.overhead.scraped", watchdogScrapedRow),
    ("watchdog.latency", watchdogLatencyRow),
    ("simulate.long", simulateLongRow),
    ("plugins.memory", pluginsMemoryRow),
    ("plugins.load", pluginsLoadRow),
    ("scale.plugins.10", { scalePluginsRow(10) }),
    ("scale.plugins.100", { scalePluginsRow(100) }),
    ("scale.plugins.1k", { scalePluginsRow(1_000) }),
    ("scale.plugins.10k", { scalePluginsRow(10_000) }),
    ("report.write", reportWriteRow),
    ("http.loopback", httpRow),
    ("transfer.loopback", transferRow),
    ("explore.runs", exploreRow),
]

/// The CPU-bound rows, as callgrind counts them: each side runs a number of steps of its work
/// (Counting.swift). A step is a few hundred to a thousand units, so that one step's instructions
/// dwarf callgrind's own rounding.
let countedRows: [CountedRow] = [
    CountedRow(
        name: "dispatch.lua", unitsPerStep: 100, steps: 20, lifeline: { _ = hostDispatch(plugins: 100, events: $0) },
        baseline: { _ = bareDispatch(states: 100, rounds: $0) }),
    CountedRow(
        name: "task.lua", unitsPerStep: 1000, steps: 4, lifeline: { _ = luaHandlerLoop(taskLuaBody, calls: 1000, events: $0) },
        baseline: { _ = plainLuaLoop("bench.empty(bench.empty('x'))", calls: 1000 * $0) }),
    CountedRow(
        name: "task.swift", unitsPerStep: 1000, steps: 4, lifeline: { _ = taskSwift(count: 1000, events: $0) },
        baseline: { _ = mutexDictionary(count: 1000 * $0) }),
    CountedRow(
        name: "queue.swift", unitsPerStep: 1000, steps: 4, lifeline: { _ = lifelineQueue(count: 1000 * $0) },
        baseline: { _ = dispatchQueue(count: 1000 * $0) }),
    CountedRow(
        name: "background.lua", unitsPerStep: 100, steps: 4, lifeline: { _ = backgroundLua(calls: 100, events: $0) },
        baseline: { _ = plainLuaLoop("coroutine.wrap(f)()", prelude: "local function f() end", calls: 100 * $0) }),
    CountedRow(
        name: "watchdog.overhead", unitsPerStep: 1, steps: 1, lifeline: { _ = fibUnderWatchdog(events: $0) },
        baseline: { _ = fibBare(calls: $0) }),
    CountedRow(
        name: "plugins.load", unitsPerStep: 100, steps: 2,
        lifeline: {
            let dir = pluginFolder(count: 100 * $0)
            _ = loadPlugins(dir, count: 100 * $0)
            removePlugins(dir)
            // glibc merges freed blocks later, in the first free of a large block after them: the
            // closed states' blocks would be merged in whatever call came next (here, the
            // folder's removal). Each side merges what it freed, so both pay for it alike.
            bench_malloc_trim()
        },
        baseline: {
            _ = sandboxedStates(count: 100 * $0)
            bench_malloc_trim()
        }),
    // Each size against the bare C loop over as many states: about 1,000 handler calls a step.
    scaleCounted("scale.plugins.10", plugins: 10, steps: 4),
    scaleCounted("scale.plugins.100", plugins: 100, steps: 4),
    scaleCounted("scale.plugins.1k", plugins: 1_000, steps: 4),
    scaleCounted("scale.plugins.10k", plugins: 10_000, steps: 1),
    // A step is one background cycle of the 1,000 plugins: 10,000 timer firings, against the
    // same plugin code run in plain Lua. Loading cancels out in the difference of two counts.
    CountedRow(
        name: "simulate.long", unitsPerStep: 10_000, steps: 1,
        lifeline: { cycles in
            let dir = tempPlugins(Dictionary(uniqueKeysWithValues: (0..<1000).map { ("p\($0)", longPlugin) }))
            defer { try? FileManager.default.removeItem(atPath: dir) }
            _ = simulateLong(dir, scenario: longScenario(cycles: cycles))
        },
        baseline: { cycles in _ = longPluginInPlainLua(cycles: 1000 * cycles) },
        judge: judgeHostShare),
]

func scaleCounted(_ name: String, plugins: Int, steps: Int) -> CountedRow {
    let events = max(1, 1000 / plugins)
    return CountedRow(
        name: name, unitsPerStep: events * plugins, steps: steps,
        lifeline: { _ = hostDispatch(plugins: plugins, events: events * $0) },
        baseline: { _ = bareDispatch(states: plugins, rounds: events * $0) })
}

/// Rows whose sides are measured in a child process of their own (`figures fresh NAME`): each
/// prints its sides' figures, in order.
let freshRows: [String: () -> [Double]] = [
    "transfer.loopback": transferSides,
]

/// The figures of row `name`'s sides, measured in a fresh child process.
func freshSides(_ name: String) -> [Double] {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["fresh", name]
    let out = Pipe()
    child.standardOutput = out
    do { try child.run() } catch { fail("cannot run figures fresh \(name): \(error)") }
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    let figures = text.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
    guard child.terminationStatus == 0, !figures.isEmpty else { fail("figures fresh \(name) failed: \(text)") }
    return figures
}

/// Lifeline's side of a row alone, once, for a profiler: `valgrind --tool=callgrind figures profile NAME`.
let profiles: [String: () -> Void] = [
    "dispatch.lua": { _ = hostDispatch(plugins: 100, events: 500) },
    "dispatch.lua.baseline": { _ = bareDispatch(states: 100, rounds: 500) },
    "task.lua": { _ = luaHandlerLoop(taskLuaBody, calls: 10_000, events: 5) },
    "task.swift": { _ = taskSwift(count: 50_000) },
    "queue.swift": { _ = lifelineQueue(count: 50_000) },
    "background.lua": { _ = backgroundLua(calls: 500, events: 20) },
    "simulate.long": {
        let dir = tempPlugins(Dictionary(uniqueKeysWithValues: (0..<1000).map { ("p\($0)", longPlugin) }))
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = simulateLong(dir, scenario: longScenario(cycles: 20))
    },
    "report.write": {
        let recorder = bigRecorder(events: 1_000_000)
        for _ in 0..<3 { print(writeReport(recorder, to: "/tmp/lifeline-profile-report.json"), "MB/s") }
    },
    // The report's text alone, with no file: what formatting costs.
    "report.format": {
        let recorder = bigRecorder(events: 1_000_000)
        for _ in 0..<3 {
            var bytes = 0
            let ns = nanoseconds(per: 1_000_000) { try! recorder.writeReport { bytes += $0.count } }
            print("\(ns) ns/event, \(bytes) bytes")
        }
    },
    // The C loop of dispatch.lua's baseline at scale.plugins' sizes: what the cache costs bare.
    "scale.c": {
        for count in scaleCounts {
            let ns = interleaved(rounds: 5, [{ bareDispatch(states: count, rounds: max(1, 100_000 / count)) }])[0]
            print("\(count) lua_States: \(ns) ns/handler")
        }
    },
    "explore.runs": {
        profileExplore()
    },
    // Why transfer.loopback measured less in full runs than alone: its sides after the rows
    // named in FIGURES_BEFORE (default report.write), in this process and then in a fresh one,
    // each with the page faults and context switches the process took meanwhile (getrusage).
    "transfer.after": {
        let before = ProcessInfo.processInfo.environment["FIGURES_BEFORE"] ?? "report.write"
        for name in before.split(separator: ",") {
            guard let row = rows.first(where: { $0.name == name }) else { fail("no row \(name)") }
            print(table([row.run()]))
        }
        sync()
        func usage(_ who: __rusage_who) -> rusage { var u = rusage(); getrusage(__rusage_who_t(who.rawValue), &u); return u }
        func show(_ label: String, _ m: [Double], _ a: rusage, _ b: rusage) {
            print(label, String(format: "lifeline %.0f MB/s, curl %.0f MB/s, ratio %.2f;", m[0], m[1], m[0] / m[1]),
                "minor faults \(b.ru_minflt - a.ru_minflt), major \(b.ru_majflt - a.ru_majflt),",
                "voluntary switches \(b.ru_nvcsw - a.ru_nvcsw), involuntary \(b.ru_nivcsw - a.ru_nivcsw)")
        }
        let start = usage(RUSAGE_SELF)
        let inProcess = transferSides()
        show("in this process:", inProcess, start, usage(RUSAGE_SELF))
        let children = usage(RUSAGE_CHILDREN)
        let fresh = freshSides("transfer.loopback")
        show("in a fresh one: ", fresh, children, usage(RUSAGE_CHILDREN))
    },
    "http.loopback": {
        let server = LoopbackServer { OKHandler() }
        _ = lifelineRequests(port: server.port, count: 2_000)
    },
]

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "profile", arguments.count == 2, let profile = profiles[arguments[1]] {
    profile()
    exit(0)
}
if arguments.first == "count" {
    if runCountedSide(arguments) { exit(0) }
    fail("usage: figures count \(countedRows.map(\.name).joined(separator: "|")) lifeline|baseline STEPS")
}
if arguments.first == "fresh", arguments.count == 2, let sides = freshRows[arguments[1]] {
    print(sides().map { String($0) }.joined(separator: " "))
    exit(0)
}
if arguments.first == "probe-memory", arguments.count == 3, let count = Int(arguments[2]) {
    print(probeMemory(kind: arguments[1], count: count))
    exit(0)
}
var jsonPath: String?
if let i = arguments.firstIndex(of: "--json") {
    guard i + 1 < arguments.count else {
        FileHandle.standardError.write(Data("figures: --json needs a file name\n".utf8))
        exit(64)
    }
    jsonPath = arguments[i + 1]
    arguments.removeSubrange(i...(i + 1))
}
let countsInstructions = arguments.contains("--instructions")
arguments.removeAll { $0 == "--instructions" }
/// Whether the command line names `row`: by its name, or by a group's (`scale.plugins` names
/// `scale.plugins.10` and its sizes) when no row has that name.
@MainActor func named(_ row: String) -> Bool {
    arguments.isEmpty || arguments.contains(row)
        || arguments.contains { arg in !rows.contains { $0.name == arg } && row.hasPrefix(arg + ".") }
}
let unknown = arguments.filter { arg in !rows.contains { $0.name == arg || $0.name.hasPrefix(arg + ".") } }
if !unknown.isEmpty {
    FileHandle.standardError.write(Data(
        "figures: no benchmark named \(unknown.joined(separator: ", ")); the names are: \(rows.map(\.name).joined(separator: ", "))\n".utf8))
    exit(64)
}

var results: [Row] = []
for (name, run) in rows where named(name) {
    FileHandle.standardError.write(Data("measuring \(name)…\n".utf8))
    // Each row starts with nothing of an earlier row left to write back: report.write leaves
    // hundreds of megabytes of dirty pages, and transfer.loopback, run after it, measured 0.6
    // where it measured 1.0 alone, its place in the run weighing more than its code.
    sync()
    var row = run()
    if countsInstructions, let counted = countedRows.first(where: { $0.name == name }) {
        FileHandle.standardError.write(Data("counting \(name) under callgrind…\n".utf8))
        let figures = countInstructions(counted)
        row.instructions = figures
        counted.judge?(&row, figures)
    }
    results.append(row)
}
print(table(results))
if let jsonPath {
    do {
        try json(results).write(toFile: jsonPath, atomically: true, encoding: .utf8)
    } catch {
        FileHandle.standardError.write(Data("figures: could not write \(jsonPath): \(error)\n".utf8))
        exit(73)
    }
}
