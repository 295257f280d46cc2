// The benchmarks of issue 6, each beside its baseline measured in the same run.
//
//   figures [--json FILE] [NAME ...]    every row, or the named ones (e.g. `figures dispatch.lua`)
//
// scripts/bench builds this in release and runs it. docs/benchmarks.md says what each row measures.
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
    ("watchdog.latency", watchdogLatencyRow),
    ("simulate.long", simulateLongRow),
    ("plugins.memory", pluginsMemoryRow),
    ("http.loopback", httpRow),
    ("transfer.loopback", transferRow),
]

/// Lifeline's side of a row alone, once, for a profiler: `valgrind --tool=callgrind figures profile NAME`.
let profiles: [String: () -> Void] = [
    "dispatch.lua": { _ = hostDispatch(plugins: 100, events: 500) },
    "dispatch.lua.baseline": { _ = bareDispatch(states: 100, rounds: 500) },
    "task.lua": { _ = luaHandlerLoop("lifeline.endBackgroundTask(lifeline.beginBackgroundTask('x'))", calls: 10_000, events: 5) },
    "task.swift": { _ = taskSwift(count: 50_000) },
    "queue.swift": { _ = lifelineQueue(count: 50_000) },
    "background.lua": { _ = backgroundLua(calls: 500, events: 20) },
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
let unknown = arguments.filter { name in !rows.contains { $0.name == name } }
if !unknown.isEmpty {
    FileHandle.standardError.write(Data(
        "figures: no benchmark named \(unknown.joined(separator: ", ")); the names are: \(rows.map(\.name).joined(separator: ", "))\n".utf8))
    exit(64)
}

var results: [Row] = []
for (name, run) in rows where arguments.isEmpty || arguments.contains(name) {
    FileHandle.standardError.write(Data("measuring \(name)…\n".utf8))
    results.append(run())
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
