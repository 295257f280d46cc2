import Foundation
import Lifeline
import LifelineLua
import Logging

// One libFuzzer binary, four targets; LIFELINE_FUZZ_TARGET names the one to run (scripts/fuzz
// sets it). A target must never crash or trip AddressSanitizer, whatever the bytes: bad input
// gets an error, and that is all.

/// The target this process runs, read once.
nonisolated(unsafe) private var target: (UnsafeRawBufferPointer) -> Void = {
    switch ProcessInfo.processInfo.environment["LIFELINE_FUZZ_TARGET"] {
    case "scenario": return fuzzScenario
    case "toml": return fuzzTOML
    case "json": return fuzzJSON
    case "lua": return LuaAPI.fuzz
    default:
        FileHandle.standardError.write(Data("LIFELINE_FUZZ_TARGET must be scenario, toml, json or lua\n".utf8))
        exit(64)
    }
}()

/// What libFuzzer calls with each input.
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    target(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

private func text(_ bytes: UnsafeRawBufferPointer) -> String { String(decoding: bytes, as: UTF8.self) }

/// A scenario file: parsed, or refused with file:line; what parses has its expect lines checked
/// against a small report, near misses and all.
private func fuzzScenario(_ bytes: UnsafeRawBufferPointer) {
    guard let scenario = try? Scenario.parse(text(bytes), fileName: "f.scenario") else { return }
    _ = Expectation.check(scenario.expectations, report: sampleReport, fileName: "f.scenario")
}

private let sampleReport: JSONValue = {
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

/// The Lua API surface: the bytes become a program of `lifeline.*` calls with arbitrary
/// arguments, run at load, in a handler and inside `lifeline.background`, in a sandboxed plugin
/// with a small memory cap, through a simulated lifecycle.
enum LuaAPI {
    /// The calls a statement picks from.
    static let functions = [
        "lifeline.on", "lifeline.after", "lifeline.beginBackgroundTask", "lifeline.endBackgroundTask",
        "lifeline.backgroundTimeRemaining", "lifeline.state", "lifeline.now", "lifeline.background",
        "lifeline.sleep", "lifeline.store.get", "lifeline.store.set", "lifeline.store.delete", "lifeline.store.keys",
        "lifeline.store.transaction", "lifeline.json.encode", "lifeline.json.decode", "lifeline.log.info",
        "lifeline.log.error", "print", "lifeline.queue", "lifeline.transfers.download", "lifeline.transfers.upload",
        "lifeline.transfers.list", "lifeline.transfers.cancel", "lifeline.http.request", "coroutine.resume",
        "coroutine.close", "coroutine.wrap", "coroutine.running", "string.rep", "tostring", "pairs",
        "setmetatable", "load", "require", "os.time", "os.date",
        // Methods of what earlier calls returned (handles, tasks, queues, operations).
        "M.cancel", "M.wait", "M.done", "M.add", "M.addSequential", "M.suspend", "M.resume", "M.cancelAll",
        "M.on", "M.count", "M.finish", "M.isCancelled",
    ]

    /// The arguments a statement picks from; `R[n]` are earlier results.
    static let arguments = [
        "nil", "true", "false", "0", "-1", "1", "0.5", "1e308", "-1e308", "0/0", "math.huge", "-math.huge",
        "math.mininteger", "math.maxinteger", "2^53", "''", "'a\\0b'", "'\\xff\\xfe'", "string.rep('x', 5000)",
        "'didEnterBackground'", "'willTerminate'", "'transferDidFinish'", "'http://127.0.0.1:9/x'", "'f.bin'",
        "'../../etc/passwd'", "'q'", "'lib.mod'", "{}", "{1, 2, {3}}", "{url = 'http://127.0.0.1:9/x', to = 'f'}",
        "{url = 'http://127.0.0.1:9/x', from = 'f', id = 'a\\0b'}", "{run = function() end, name = 'op', unique = 'drop'}",
        "{url = 'http://127.0.0.1:9/', headers = {['x-a'] = 'v\\r\\n'}}", "{a = {b = {c = {}}}, [1] = 2}",
        "function() end", "function() error('boom') end", "function(t) lifeline.sleep(1) end",
        "function() return coroutine.yield() end", "function() error(setmetatable({}, {__tostring = function() error('x') end})) end",
        "lifeline.json.null", "R[1]", "R[2]", "R[3]", "R[#R]", "R", "lifeline", "coroutine.running()",
    ]

    /// One statement per 3 bytes: the function, how many arguments, and each argument's choice.
    static func program(_ bytes: UnsafeRawBufferPointer) -> String {
        var lines: [String] = []
        var i = 0
        while i + 1 < bytes.count, lines.count < 24 {
            let function = functions[Int(bytes[i]) % functions.count]
            let argc = Int(bytes[i + 1]) % 4
            i += 2
            var args: [String] = []
            for _ in 0..<argc where i < bytes.count {
                args.append(arguments[Int(bytes[i]) % arguments.count])
                i += 1
            }
            if function.hasPrefix("M.") {
                let method = function.dropFirst(2)
                let receiver = args.first ?? "R[#R]"
                let rest = args.dropFirst().joined(separator: ", ")
                lines.append("keep(pcall(function() local o = \(receiver); return o:\(method)(\(rest)) end))")
            } else {
                lines.append("keep(pcall(\(function)\(args.isEmpty ? "" : ", ")\(args.joined(separator: ", "))))")
            }
        }
        return lines.joined(separator: "\n")
    }

    /// A state dir shared by every run: stores and transfers persist across inputs, as in `run`.
    static let database: StateDatabase = {
        let dir = NSTemporaryDirectory() + "lifeline-fuzz-\(getpid())"
        return try! StateDatabase.open(stateDirectory: dir)
    }()

    static let folder: String = {
        let dir = NSTemporaryDirectory() + "lifeline-fuzz-plugin-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir + "/p/lib", withIntermediateDirectories: true)
        try? "return 'module'".write(toFile: dir + "/p/lib/mod.lua", atomically: false, encoding: .utf8)
        return dir
    }()

    static let scenario = try! Scenario.parse(
        "0s launch\n1s background\n3s foreground\n4s memory-warning\n5s background\n40s kill\n41s launch\n42s terminate",
        fileName: "fuzz.scenario")

    static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        let body = program(bytes)
        let source = """
            local R = {}
            local function keep(ok, ...) R[#R + 1] = select(1, ...) end
            \(body)
            lifeline.on('didEnterBackground', function()
            \(body)
            end)
            lifeline.background('fuzz', function(task)
            \(body)
            end)
            """
        try? source.write(toFile: folder + "/p/init.lua", atomically: false, encoding: .utf8)
        let plugin = PluginDescriptor(name: "p", kind: .lua, network: (try? NetworkPermissions(["127.0.0.1:*"])) ?? .none) {
            () throws(LifelineError) -> any PluginInstance in
            try LuaPlugin(name: "p", directory: folder + "/p", memoryLimit: 256 * 1024)
        }
        var configuration = HostConfiguration(watchdogScale: 1)
        configuration.database = database
        configuration.logger = .init(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
        configuration.pluginLogger = { .init(label: $0) { _ in SwiftLogNoOpLogHandler() } }
        _ = try? Simulation.run(scenario: scenario, plugins: [plugin], configuration: configuration)
    }
}
