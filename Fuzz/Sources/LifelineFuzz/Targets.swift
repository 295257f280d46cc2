import Foundation
import Lifeline
import LifelineLua
import Logging

// One libFuzzer binary, several targets; LIFELINE_FUZZ_TARGET names the one to run (scripts/fuzz
// sets it). A target must never crash or trip AddressSanitizer, whatever the bytes: bad input
// gets an error, and that is all.

/// The targets by name.
nonisolated(unsafe) let targets: [String: (UnsafeRawBufferPointer) -> Void] = [
    "scenario": fuzzScenario, "toml": fuzzTOML, "json": fuzzJSON, "lua": LuaAPI.fuzz, "ctl": ControlLine.fuzz,
    "expect": ExpectLines.fuzz, "statedb": StateDatabaseDamage.fuzz,
]

/// The target this process runs, read once.
nonisolated(unsafe) private var target: (UnsafeRawBufferPointer) -> Void = {
    // The host's own warnings (a damaged row skipped, a refused step) are expected here by the
    // million; written out, they would be most of the time spent.
    LoggingSystem.bootstrap { _ in SwiftLogNoOpLogHandler() }
    let name = ProcessInfo.processInfo.environment["LIFELINE_FUZZ_TARGET"] ?? ""
    guard let target = targets[name] else {
        let names = targets.keys.sorted().joined(separator: ", ")
        FileHandle.standardError.write(Data("LIFELINE_FUZZ_TARGET must be one of \(names)\n".utf8))
        exit(64)
    }
    return target
}()

/// What libFuzzer calls with each input.
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

func text(_ bytes: UnsafeRawBufferPointer) -> String { String(decoding: bytes, as: UTF8.self) }

/// A scenario file: parsed, or refused with file:line; what parses has its expect lines checked
/// against a small report, near misses and all.
private func fuzzScenario(_ bytes: UnsafeRawBufferPointer) {
    guard let scenario = try? Scenario.parse(text(bytes), fileName: "f.scenario") else { return }
    _ = Expectation.check(scenario.expectations, report: sampleReport, fileName: "f.scenario")
}

let sampleReport: JSONValue = {
    func event(_ t: String, _ name: String, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        .object([("t", .number(t)), ("event", .string(name))] + fields)
    }
    let task: [(String, JSONValue)] = [("plugin", .string("p")), ("task", .int(1)), ("name", .string("save"))]
    return .object([
        ("lifeline", .int(2)), ("outcome", .string("terminated")),
        (
            "termination",
            .object([("kind", .string("watchdog")), ("plugin", .string("p")), ("t", .number("2"))])
        ),
        (
            "timeline",
            .array([
                event("0", "didFinishLaunching"), event("1", "taskBegan", task),
                event("1.5", "log", [("plugin", .string("p")), ("level", .string("info")), ("message", .string("a # b"))]),
                event("2", "taskEnded", task + [("expired", .bool(true))]),
                event("2", "pluginError", [("plugin", .string("p")), ("message", .string("boom")), ("traceback", .null)]),
                event("2", "terminated", [("kind", .string("watchdog"))]),
            ])
        ),
    ])
}()

/// plugin.toml: the TOML reader, then the manifest's checks on what it read.
private func fuzzTOML(_ bytes: UnsafeRawBufferPointer) {
    _ = try? TOML.parse(text(bytes), fileName: "plugin.toml")
    _ = try? PluginManifest.parse(text(bytes), fileName: "plugin.toml")
}

/// The host's JSON parser. What it accepts must read back the same from its own serialization.
private func fuzzJSON(_ bytes: UnsafeRawBufferPointer) {
    guard let value = try? JSONValue.parse(text(bytes)) else { return }
    let again = try? JSONValue.parse(value.serialized())
    guard again == value else {
        fatalError("JSON round trip changed \(value.serialized()) into \(String(describing: again?.serialized()))")
    }
}
