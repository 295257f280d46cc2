import Foundation
import GRDB
import Lifeline
import LifelineLua
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The Lua API surface, fuzzed persistently: one host per process, with its plugin folder, state
/// dir and database made once; each input is one launch of a fresh Lua state that makes
/// `lifeline.*` calls with awkward arguments, interleaved with lifecycle steps and advances of
/// virtual time. Between inputs the launch ends (a force-quit, which also cancels the transfers)
/// and what the state dir keeps is cleared, so every input starts from the same state: a crash
/// found after a million inputs replays from its file alone.
///
/// An input is a list of operations, one or more bytes each:
/// - a byte below `firstAction` is a call: the function (that byte), how many arguments (the
///   next), and each argument's choice (one byte each);
/// - a byte from `firstAction` up is a step or an advance of time, and the byte after it picks
///   the duration of an advance and how the next group of calls runs (directly, inside
///   `lifeline.background`, in a coroutine, or as a queue's operation).
///
/// The calls before the first step run while the plugin loads; each later group runs when the
/// plugin next hears of something (any lifecycle event, a fetch, a push, a transfer's event, a
/// scheduled task, or a timer that an earlier call set with `lifeline.after(x, step)`), so the
/// steps decide when the groups run, and what they find.
enum LuaAPI {
    /// The calls a statement picks from.
    static let functions = [
        "lifeline.on", "lifeline.after", "lifeline.beginBackgroundTask", "lifeline.endBackgroundTask",
        "lifeline.backgroundTimeRemaining", "lifeline.state", "lifeline.now", "lifeline.profile", "lifeline.background",
        "lifeline.sleep", "lifeline.store.get", "lifeline.store.set", "lifeline.store.delete", "lifeline.store.keys",
        "lifeline.store.transaction", "lifeline.json.encode", "lifeline.json.decode", "lifeline.log.info",
        "lifeline.log.error", "lifeline.log.debug", "lifeline.log.warning", "print", "lifeline.queue",
        "lifeline.transfers.download", "lifeline.transfers.upload", "lifeline.transfers.list",
        "lifeline.transfers.cancel", "lifeline.http.request", "lifeline.files.write", "lifeline.files.read",
        "lifeline.files.remove", "lifeline.files.list", "lifeline.files.size", "lifeline.tasks.register",
        "lifeline.tasks.submit", "lifeline.tasks.cancel", "lifeline.tasks.pending", "coroutine.resume",
        "coroutine.close", "coroutine.wrap", "coroutine.running", "coroutine.yield", "string.rep", "string.format",
        "tostring", "tonumber", "pairs", "ipairs", "setmetatable", "load", "require", "os.time", "os.date", "os.clock",
        "collectgarbage", "error", "select", "table.concat", "table.unpack", "utf8.char", "math.floor",
        // Methods of what earlier calls returned (handles, tasks, queues, operations, events).
        "M.cancel", "M.wait", "M.done", "M.add", "M.addSequential", "M.suspend", "M.resume", "M.cancelAll",
        "M.on", "M.count", "M.isSuspended", "M.finish", "M.isCancelled", "M.complete", "M.setTaskCompleted",
    ]

    /// The arguments a statement picks from. `R[n]` are earlier results, `E` what the handler that
    /// runs the group was given (an event, a task), `step` the function that runs the next group.
    static let arguments = [
        "nil", "true", "false", "0", "-1", "1", "0.5", "1e308", "-1e308", "0/0", "math.huge", "-math.huge",
        "math.mininteger", "math.maxinteger", "2^53", "2^63", "-2^63", "-0.0", "1e-320", "30", "31", "600",
        "''", "'a\\0b'", "'\\xff\\xfe'", "'\\u{7FFFFFFF}'", "string.rep('x', 5000)", "string.rep('\\0', 300)",
        "'didEnterBackground'", "'willTerminate'", "'transferDidFinish'", "'performFetch'",
        "'didReceiveRemoteNotification'", "'http://127.0.0.1:9/x'", "'http://127.0.0.1:9/big'",
        "'http://127.0.0.1:9/hang'", "'http://10.0.0.1/'", "'f.bin'", "'dir/'", "'a/b/c.txt'", "'../../etc/passwd'",
        "'/abs'", "'q'", "'lib.mod'", "'fz.refresh'", "'fz.processing'", "'fz.unknown'", "'newData'", "'noData'",
        "'failed'", "'%s%d%q'", "{}", "{1, 2, {3}}", "{n = 0/0}", "{[1.5] = 1, [true] = 2}",
        "{url = 'http://127.0.0.1:9/x', to = 'f'}", "{url = 'http://127.0.0.1:9/big', to = 'b/big', sha256 = 'ab'}",
        "{url = 'http://127.0.0.1:9/x', from = 'f', id = 'a\\0b'}", "{url = 'http://127.0.0.1:9/flaky', to = 'g', id = 'same'}",
        "{run = function() end, name = 'op', unique = 'drop'}", "{run = function(op) lifeline.sleep(1) end, timeout = 0.5}",
        "{url = 'http://127.0.0.1:9/', headers = {['x-a'] = 'v\\r\\n'}}", "{url = 'http://127.0.0.1:9/x', method = 'POST', body = 'b', timeout = 1e9}",
        "{identifier = 'fz.refresh', kind = 'refresh', earliestBegin = 1}",
        "{identifier = 'fz.processing', kind = 'processing', requiresNetwork = true, requiresPower = true}",
        "{identifier = 'fz.refresh', kind = 'refresh', earliestBegin = 1e300}", "{a = {b = {c = {}}}, [1] = 2}",
        "setmetatable({}, {__index = function() error('idx') end})", "setmetatable({}, {__tostring = function() return {} end})",
        "function() end", "function() error('boom') end", "function() error('a\\0b') end", "function(t) lifeline.sleep(1) end",
        "function() return coroutine.yield() end", "function() error(setmetatable({}, {__tostring = function() error('x') end})) end",
        "function(e) if type(e) == 'table' and e.complete then e.complete('newData') end end",
        "function(t) if type(t) == 'table' and t.setTaskCompleted then t:setTaskCompleted(true) end end",
        "lifeline.json.null", "lifeline.queue.background", "step", "E", "R[1]", "R[2]", "R[3]", "R[#R]", "R", "lifeline",
        "coroutine.running()", "coroutine.create(step)",
    ]

    /// Bytes from this one up are steps.
    static let firstAction: UInt8 = 0xE0

    /// What an action byte does.
    enum Action {
        case step(Step)
        case advance
    }

    static let actions: [Action] = [
        .step(.background), .step(.foreground), .step(.memoryWarning), .step(.resign), .step(.activate),
        .step(.fetch), .step(.push(payload: Step.defaultPushPayload)), .step(.push(payload: #"{"a":[1,{"b":null}]}"#)),
        .step(.runTasks(.all)), .step(.network(false)), .step(.network(true)), .step(.charging(true)),
        .step(.charging(false)), .step(.terminate), .advance, .advance, .advance, .advance,
    ]

    /// The advances of virtual time an action picks from, in seconds: around the profile's limits
    /// (the 30 s budget and its expiration lead, the 180 s of a processing task).
    static let durations: [Double] = [0, 0.001, 0.5, 1, 2, 4.9, 5, 10, 25, 29, 30, 31, 60, 179, 181, 600, 1800, 3600]

    /// At most this many calls and steps per input, so one input stays well under a millisecond.
    static let maxCalls = 48
    static let maxSteps = 12

    /// One input, decoded: `groups[0]` runs at load, `groups[k]` at the plugin's k-th handler call;
    /// `steps[k]` comes before `groups[k + 1]` (nil: an advance of that many seconds).
    struct Program {
        var groups: [(mode: Int, lines: [String])] = [(0, [])]
        var steps: [(step: Step?, seconds: Double)] = []
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) -> Program {
        var program = Program()
        var calls = 0
        var i = 0
        while i < bytes.count, calls < maxCalls {
            let byte = bytes[i]
            i += 1
            if byte >= firstAction {
                guard program.steps.count < maxSteps else { break }
                let argument = i < bytes.count ? Int(bytes[i]) : 0
                i += 1
                switch actions[Int(byte - firstAction) % actions.count] {
                case .step(let step): program.steps.append((step, 0))
                case .advance: program.steps.append((nil, durations[argument % durations.count]))
                }
                program.groups.append((argument / durations.count % 4, []))
                continue
            }
            calls += 1
            let function = functions[Int(byte) % functions.count]
            let argc = i < bytes.count ? Int(bytes[i]) % 4 : 0
            i += 1
            var args: [String] = []
            for _ in 0..<argc where i < bytes.count {
                args.append(arguments[Int(bytes[i]) % arguments.count])
                i += 1
            }
            let line: String
            if function == "pairs" {
                // The iterator is used up here, never kept: the sandbox's sorted iterator called
                // with something other than its table crashes the host (reported; until it is
                // fixed, an input that hands it to a callback would stop every run at once).
                let rest = args.isEmpty ? "" : ", " + args.joined(separator: ", ")
                line = "keep(pcall(function(t, ...) local n = 0; for _ in pairs(t, ...) do n = n + 1 end; return n end\(rest)))"
            } else if function.hasPrefix("M.") {
                let method = function.dropFirst(2)
                let receiver = args.first ?? "R[#R]"
                let rest = args.dropFirst().joined(separator: ", ")
                line = "keep(pcall(function() local o = \(receiver); return o:\(method)(\(rest)) end))"
            } else {
                line = "keep(pcall(\(function)\(args.isEmpty ? "" : ", ")\(args.joined(separator: ", "))))"
            }
            program.groups[program.groups.count - 1].lines.append(line)
        }
        return program
    }

    /// The events every group may be run by.
    static let events = [
        "didBecomeActive", "willResignActive", "didEnterBackground", "willEnterForeground", "willTerminate",
        "didReceiveMemoryWarning", "transferDidFinish", "transferDidFail", "didFinishTransferEvents", "performFetch",
        "didReceiveRemoteNotification",
    ]

    /// The plugin's init.lua: a runner that stays loaded across inputs. A silent push whose
    /// payload holds `fuzz` starts an input: what the last input left is undone (its handles
    /// cancelled, its tasks ended, its task requests cancelled; with `clean`, also its store keys,
    /// transfers and files, after an input that wrote to the database), then the input's chunk
    /// (the payload's `fuzz`) is run. Every other event runs the input's next group.
    static let runner = """
        local R, S, k = {}, {}, 0
        local function keep(ok, ...) R[#R + 1] = (...) end
        local function step(...) k = k + 1; local f = S[k]; if f then return f(...) end end
        local function undo(o)
          if type(o) == 'table' or type(o) == 'userdata' then
            pcall(function() o:cancel() end)
            pcall(function() o:cancelAll() end)
          elseif math.type(o) == 'integer' then
            pcall(lifeline.endBackgroundTask, o)
          end
        end
        local function clean()
          for _, key in ipairs(lifeline.store.keys()) do lifeline.store.delete(key) end
          for _, t in ipairs(lifeline.transfers.list()) do lifeline.transfers.cancel(t.id) end
          for _, f in ipairs(lifeline.files.list()) do lifeline.files.remove(f) end
        end
        local function start(e)
          for i = 1, #R do undo(R[i]) end
          R, S, k = {}, {}, 0
          pcall(function()
            for _, r in ipairs(lifeline.tasks.pending()) do lifeline.tasks.cancel(r.identifier) end
          end)
          if e.payload.clean then pcall(clean) end
          e.complete('noData')
          local chunk = load(e.payload.fuzz, '=input', 't')
          keep(pcall(chunk, keep, step, R, S))
        end
        for _, name in ipairs{\(events.filter { $0 != "didReceiveRemoteNotification" }.map { "'\($0)'" }.joined(separator: ", "))} do
          lifeline.on(name, step)
        end
        lifeline.on('didReceiveRemoteNotification', function(e, ...)
          if type(e) == 'table' and type(e.payload) == 'table' and e.payload.fuzz then return start(e) end
          return step(e, ...)
        end)
        lifeline.tasks.register('fz.refresh', step)
        lifeline.tasks.register('fz.processing', step)

        """

    /// The input's chunk: the groups are defined, then the first runs. What the groups share
    /// (the results, the dispatcher) comes from the runner, fresh for each input.
    static func source(_ program: Program) -> String {
        var text = "local keep, step, R, S = ...\nlocal E\n"
        for (index, group) in program.groups.enumerated().dropFirst() {
            let body = group.lines.joined(separator: "\n")
            let wrapped: String
            switch group.mode {
            case 1: wrapped = "keep(pcall(lifeline.background, 'g\(index)', function(task)\n\(body)\nend))"
            case 2: wrapped = "keep(pcall(coroutine.wrap(function()\n\(body)\nend)))"
            case 3:
                wrapped = "keep(pcall(function() return lifeline.queue.background:add{name = 'g\(index)', run = function(op)\n\(body)\nend} end))"
            default: wrapped = body
            }
            text += "S[\(index)] = function(...)\nE = ...\n\(wrapped)\nend\n"
        }
        text += program.groups[0].lines.joined(separator: "\n")
        return text + "\n"
    }

    /// Where the process keeps its plugin and state dir: memory, when the machine has it, so a
    /// store's commit costs no disk.
    static let root: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm/" : NSTemporaryDirectory()
        let dir = base + "lifeline-fuzz-lua-\(getpid())"
        try? FileManager.default.removeItem(atPath: dir)
        try! FileManager.default.createDirectory(atPath: dir + "/p/lib", withIntermediateDirectories: true)
        try! "return 'module'".write(toFile: dir + "/p/lib/mod.lua", atomically: false, encoding: .utf8)
        // The folder goes with the process, however it ends (a crash leaves it for a look).
        atexit { try? FileManager.default.removeItem(atPath: LuaAPI.root) }
        return dir
    }()

    nonisolated(unsafe) static let harness = LuaHarness(root: root)

    /// LIFELINE_FUZZ_PRINT=1 prints each input as its chunk and steps, for reading a crash.
    static let prints = ProcessInfo.processInfo.environment["LIFELINE_FUZZ_PRINT"] != nil

    static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        let program = decode(bytes)
        if prints {
            let steps = program.steps.map { $0.step?.description ?? "advance \($0.seconds)s" }
            FileHandle.standardError.write(Data("-- chunk:\n\(source(program))-- steps: \(steps.joined(separator: ", "))\n".utf8))
        }
        harness.run(program)
    }
}

/// The host that every input of the `lua` target runs in, and what it needs; made once. The app
/// stays launched across inputs (a launch, with its Lua state, costs more than most inputs); it
/// is launched again only when an input ended it, and the host is made again only when a rule
/// terminated the app (a host then stays stopped) or every `relaunchEvery` inputs, which bounds
/// what one input can leave behind for the next.
final class LuaHarness {
    let pluginDirectory: String
    let database: StateDatabase
    /// A second connection, for clearing the transfers the inputs left.
    let sweeper: DatabaseQueue
    let filesRoot: String
    let descriptor: PluginDescriptor
    let configuration: HostConfiguration
    /// The host's network: a few scripted answers, among them one that never comes and one
    /// that streams for minutes, so waits and transfers outlive steps.
    static let rules = try! Scenario.parse(
        """
        0s http GET 127.0.0.1:9/x -> 200 {"a": [1, 2]} in 1s
        0s http * 127.0.0.1:9/big -> 200 size=300KB rate=10KB/s
        0s http * 127.0.0.1:9/hang -> hang
        0s http * 127.0.0.1:9/flaky -> 503 in 2s
        0s http * * -> refuse in 500ms
        """, fileName: "fuzz.scenario"
    ).network
    static let relaunchEvery = 1000

    private(set) var host: LifelineHost!
    private(set) var executor: MainExecutor!
    private(set) var hostsMade = 0
    private(set) var launches = 0
    private(set) var inputs = 0
    private var inputsSinceHost = 0

    init(root: String) {
        pluginDirectory = root + "/p"
        database = try! StateDatabase.open(stateDirectory: root + "/state")
        sweeper = try! DatabaseQueue(path: database.path)
        filesRoot = root + "/state/files/p"
        let directory = pluginDirectory
        try! LuaAPI.runner.write(toFile: directory + "/init.lua", atomically: false, encoding: .utf8)
        var descriptor = PluginDescriptor(
            name: "p", kind: .lua, network: (try? NetworkPermissions(["127.0.0.1:*"])) ?? .none, storeQuota: 64 * 1024,
            filesQuota: 256 * 1024
        ) { () throws(LifelineError) -> any PluginInstance in
            try LuaPlugin(name: "p", directory: directory, memoryLimit: 256 * 1024)
        }
        descriptor.taskIdentifiers = ["fz.refresh", "fz.processing"]
        self.descriptor = descriptor
        var configuration = HostConfiguration(watchdogScale: 1)
        configuration.database = database
        configuration.logger = .init(label: "fuzz") { _ in SwiftLogNoOpLogHandler() }
        configuration.pluginLogger = { .init(label: $0) { _ in SwiftLogNoOpLogHandler() } }
        configuration.epochAtStart = Simulation.fixedEpoch
        configuration.transferJitterSeed = 0
        self.configuration = configuration
        try? FileManager.default.createDirectory(atPath: filesRoot, withIntermediateDirectories: true)
        if ProcessInfo.processInfo.environment["LIFELINE_FUZZ_STATS"] != nil {
            atexit { LuaAPI.harness.printStats() }
        }
    }

    func printStats() {
        FileHandle.standardError.write(
            Data("lua: \(inputs) inputs, \(launches) launches, \(hostsMade) hosts made\n".utf8))
    }

    /// A new host, with an executor of its own (jobs of a stopped host must never reach a new
    /// one), on a state dir emptied of what the last one left.
    private func makeHost() {
        if let host { host.shutdown() }
        sweep("DELETE FROM store; DELETE FROM system_tasks; DELETE FROM transfers; DELETE FROM transfer_events")
        removeFiles()
        let executor = MainExecutor(clock: VirtualClock())
        var configuration = configuration
        let network = ScriptedNetwork(rules: Self.rules, executor: executor, fileName: "fuzz.scenario")
        configuration.transport = network
        configuration.transferTransport = network
        // Events are not kept: the host lives for many inputs, and a report that grew with each
        // would be all the memory it measures.
        host = LifelineHost(
            configuration: configuration, plugins: [descriptor], executor: executor,
            recorder: Recorder(profile: configuration.profile, keepsTimeline: false))
        self.executor = executor
        hostsMade += 1
        inputsSinceHost = 0
        dirty = false
    }

    /// Runs the jobs due until `time`, moving the clock there.
    private func run(until time: HostTime) {
        let host = host!
        executor.run(until: time, shouldStop: { host.isStopped }, afterJob: host.afterJob)
    }

    private var isRunning: Bool { !host.isStopped && host.state != .notRunning && host.state != .ended }

    /// Whether the last input wrote to the database (its write-ahead log changed), so the next
    /// one starts by clearing the store, the transfers and the files.
    private var dirty = false
    /// Whether the input took the network away or changed the power: both are put back.
    private var deviceChanged = false

    func run(_ program: LuaAPI.Program) {
        inputs += 1
        inputsSinceHost += 1
        if host == nil || host.isStopped || inputsSinceHost > Self.relaunchEvery { makeHost() }
        if !isRunning {
            try? host.perform(.launch)
            run(until: host.now)
            launches += 1
            guard isRunning else { return makeHost() }
        }
        let chunk = JSONValue.string(LuaAPI.source(program)).serialized()
        try? host.perform(.push(payload: dirty ? #"{"clean":true,"fuzz":"# + chunk + "}" : #"{"fuzz":"# + chunk + "}"))
        dirty = false
        run(until: host.now)
        for (step, seconds) in program.steps {
            guard isRunning else { break }
            if let step {
                if case .network = step { deviceChanged = true }
                if case .charging = step { deviceChanged = true }
                try? host.perform(step)
                run(until: host.now)
            } else {
                run(until: host.now.adding(seconds: seconds))
            }
        }
        end()
    }

    /// Puts the app back in the foreground, the device as it was, and clears the finished
    /// transfers' rows when the input wrote to the database.
    private func end() {
        guard !host.isStopped else { return }
        if deviceChanged {
            deviceChanged = false
            try? host.perform(.network(true))
            try? host.perform(.charging(false))
        }
        switch host.state {
        case .background, .suspended: try? host.perform(.foreground)
        case .inactive: try? host.perform(.activate)
        default: break
        }
        run(until: host.now)
        // Files need no database: any file marks the state dir too.
        let files = (try? FileManager.default.contentsOfDirectory(atPath: filesRoot))?.count ?? 0
        if databaseChanged() || files > 0 {
            dirty = true
            sweep("DELETE FROM transfers WHERE state IN ('finished', 'failed', 'cancelled'); DELETE FROM transfer_events")
        }
    }

    private func sweep(_ sql: String) {
        try! sweeper.write { db in try db.execute(sql: sql) }
        _ = databaseChanged()
    }

    private func removeFiles() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: filesRoot)) ?? [] {
            try? FileManager.default.removeItem(atPath: filesRoot + "/" + name)
        }
    }

    /// The write-ahead log's size and time when last looked at: every write goes through it.
    private var lastLog: (Int, Int, Int) = (0, 0, 0)

    /// Whether the database was written since the last call: its log changed.
    private func databaseChanged() -> Bool {
        var info = stat()
        let log = stat(database.path + "-wal", &info) == 0 ? (Int(info.st_size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec) : (0, 0, 0)
        defer { lastLog = log }
        return log != lastLog
    }
}
