// The figures issues 2 and 3 ask for, measured in one run, each beside its baseline:
//   1. one event dispatched to one Lua handler, next to a bare lua_pcall of the same function;
//   2. how late past its deadline a `while true do end` handler is stopped;
//   3. the wall time of simulate for a 3-hour scenario with 100 background/foreground cycles;
//   4. lifeline.background with an immediate return (begin, coroutine, end), next to the same
//      task begun and ended by hand, and to a bare coroutine.create + resume;
//   5. requests per second through lifeline.http.request against a loopback server, next to the
//      same requests made by curl (one process, one kept-alive connection);
//   6. 100,000 empty operations through a serial Lifeline queue from Swift, next to Foundation's
//      OperationQueue (maxConcurrentOperationCount = 1) and a serial DispatchQueue doing the same
//      work; and the cost per operation from Lua;
//   7. a 200 MB loopback download through lifeline.transfers.download, next to curl fetching
//      the same URL into a file (`figures transfer` runs only this one).
// Run it with scripts/bench (release build).
import CLuaShims
import Foundation
import Lifeline
import LifelineHTTP
import LifelineLua
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

LoggingSystem.bootstrap { label in
    var h = StreamLogHandler.standardError(label: label)
    h.logLevel = .critical
    return h
}

let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
func percentile(_ xs: [Double], _ p: Double) -> Double {
    let s = xs.sorted()
    return s[min(s.count - 1, Int((Double(s.count) * p).rounded(.up)) - 1)]
}

func tempPlugins(_ plugins: [String: String], manifest: String? = nil) -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-figures-\(UUID().uuidString)").path
    for (name, lua) in plugins {
        try! FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
        try! lua.write(toFile: dir + "/" + name + "/init.lua", atomically: true, encoding: .utf8)
        if let manifest { try! manifest.write(toFile: dir + "/" + name + "/plugin.toml", atomically: true, encoding: .utf8) }
    }
    return dir
}

// MARK: 1. dispatch

let handler = "function(e) local n = e.name end"

func bareLuaPcall(iterations: Int, states count: Int = 1) -> Double {
    let states = (0..<count).map { _ in luaL_newstate()! }
    defer { for L in states { lua_close(L) } }
    for L in states {
        luaL_openlibs(L)
        luaL_loadstring(L, "return " + handler)
        lua_callk(L, 0, 1, 0, nil)  // stack: f
    }
    let start = Monotonic.nanoseconds()
    for i in 0..<iterations {
        let L = states[i % count]
        lua_pushvalue(L, -1)  // stack: f, f
        lua_createtable(L, 0, 3)  // stack: f, f, event
        lua_pushstring(L, "didReceiveMemoryWarning")
        lua_setfield(L, -2, "name")
        lua_pushnumber(L, 1)
        lua_setfield(L, -2, "time")
        lua_pushstring(L, "active")
        lua_setfield(L, -2, "state")
        lua_pcallk(L, 1, 0, 0, 0, nil)  // stack: f
    }
    return Double(Monotonic.nanoseconds() - start) / Double(iterations)
}

func hostDispatch(iterations: Int, plugins count: Int = 1) -> Double {
    var sources: [String: String] = [:]
    for i in 0..<count { sources["p\(i)"] = "lifeline.on('didReceiveMemoryWarning', \(handler))" }
    let dir = tempPlugins(sources)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let executor = MainExecutor(clock: VirtualClock())
    let host = LifelineHost(
        configuration: HostConfiguration(), plugins: try! LuaPluginLoader.descriptors(in: dir), executor: executor)
    defer { host.shutdown() }
    try! host.perform(.launch)
    let start = Monotonic.nanoseconds()
    for _ in 0..<iterations { try! host.perform(.memoryWarning) }
    return Double(Monotonic.nanoseconds() - start) / Double(iterations * count)
}

// MARK: 2. watchdog latency

func watchdogLateness(runs: Int) -> [Double] {
    let dir = tempPlugins(["spin": "lifeline.on('didEnterBackground', function() while true do end end)"])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var profile = Profile.ios13
    profile.backgroundLimit = 0.02
    var late: [Double] = []
    for _ in 0..<runs {
        let executor = MainExecutor(clock: VirtualClock())
        let host = LifelineHost(
            configuration: HostConfiguration(profile: profile), plugins: try! LuaPluginLoader.descriptors(in: dir),
            executor: executor)
        try! host.perform(.launch)
        try! host.perform(.background)
        late.append(host.lastOverrunLateness ?? .nan)
        host.shutdown()
    }
    return late
}

// MARK: 3. long simulation

func longSimulation() -> (seconds: Double, events: Int) {
    var lines = ["0s launch"]
    for cycle in 0..<100 {
        let base = Double(cycle) * 108  // 100 cycles in 3 hours
        lines.append("\(Int(base + 1))s background")
        lines.append("\(Int(base + 60))s foreground")
    }
    lines.append("3h terminate")
    let scenario = try! Scenario.parse(lines.joined(separator: "\n"), fileName: "long.scenario")
    let plugins = try! LuaPluginLoader.descriptors(in: root + "/plugins")
    let start = Monotonic.nanoseconds()
    let recorder = try! Simulation.run(scenario: scenario, plugins: plugins, configuration: HostConfiguration())
    return (Double(Monotonic.nanoseconds() - start) / 1e9, recorder.timeline.count)
}

// MARK: 4. lifeline.background

/// ns per call of `body` (Lua, run `calls` times inside one memory-warning handler, `events` times;
/// `calls` stays under the task limit of 1000),
/// including the jobs it leaves on the executor.
func backgroundCalls(_ body: String, calls: Int, events: Int) -> Double {
    let source = """
        local function f(task) end
        -- A chain: each fn starts the next, so about one task is active at a time.
        local function chained(task, n) if n > 1 then lifeline.background(nil, chained, n - 1) end end
        lifeline.on('didReceiveMemoryWarning', function()
          for i = 1, \(calls) do \(body) end
        end)
        """
    let dir = tempPlugins(["p": source])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let executor = MainExecutor(clock: VirtualClock())
    let host = LifelineHost(
        configuration: HostConfiguration(), plugins: try! LuaPluginLoader.descriptors(in: dir), executor: executor)
    defer { host.shutdown() }
    try! host.perform(.launch)
    executor.run(shouldStop: { false }, afterJob: host.afterJob)
    let start = Monotonic.nanoseconds()
    for _ in 0..<events {
        try! host.perform(.memoryWarning)
        executor.run(shouldStop: { false }, afterJob: host.afterJob)
    }
    precondition(host.activeTasks.isEmpty && host.recorder.pluginErrorCount == 0)
    return Double(Monotonic.nanoseconds() - start) / Double(calls * events)
}

func bareCoroutines(iterations: Int) -> Double {
    let L = luaL_newstate()!
    defer { lua_close(L) }
    luaL_openlibs(L)
    luaL_loadstring(L, "local f = function() end; for i = 1, \(iterations) do coroutine.resume(coroutine.create(f)) end")
    let start = Monotonic.nanoseconds()
    lua_callk(L, 0, 0, 0, nil)
    return Double(Monotonic.nanoseconds() - start) / Double(iterations)
}

// MARK: 5. HTTP requests per second

/// A loopback HTTP/1.1 server that answers every request with 200 "ok", keeping connections alive.
final class OKHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: "2")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: "ok")))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

func startServer(group: EventLoopGroup) -> (Channel, Int) {
    let channel = try! ServerBootstrap(group: group)
        .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(OKHandler()) }
        }
        .bind(host: "127.0.0.1", port: 0).wait()
    return (channel, channel.localAddress!.port!)
}

/// Requests per second: `count` sequential requests from one lifeline.background task in `run`'s
/// setting (monotonic clock, async-http-client).
func lifelineRequests(port: Int, count: Int) -> Double {
    let source = """
        lifeline.background('bench', function()
          for i = 1, \(count) do
            local r, err = lifeline.http.request{url = 'http://127.0.0.1:\(port)/ok'}
            assert(r and r.status == 200, err and err.message)
          end
        end)
        """
    let seconds = liveRun(source, stateDir: nil) { host in host.activeTasks.isEmpty } check: { host, _ in
        precondition(host.recorder.pluginErrorCount == 0, "the benchmark plugin failed")
    }
    return Double(count) / seconds
}

/// Seconds from launch until `done`, for one Lua plugin "p" (allowed 127.0.0.1) in `run`'s
/// setting: monotonic clock, async-http-client for requests and transfers, and a state dir on
/// disk when `stateDir` is given. `check` runs before the host is shut down.
func liveRun(
    _ source: String, stateDir: String?, until done: (LifelineHost) -> Bool,
    check: (LifelineHost, String?) -> Void
) -> Double {
    let dir = tempPlugins(["p": source], manifest: "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let transport = AsyncHTTPTransport()
    defer { transport.shutdown() }
    var configuration = HostConfiguration()
    configuration.transport = transport
    configuration.transferTransport = transport
    if let stateDir { configuration.database = try! StateDatabase.open(stateDirectory: stateDir) }
    let executor = MainExecutor(clock: MonotonicClock())
    let host = LifelineHost(
        configuration: configuration, plugins: try! LuaPluginLoader.descriptors(in: dir), executor: executor)
    defer { host.shutdown() }
    let start = Monotonic.nanoseconds()
    try! host.perform(.launch)
    executor.run(shouldStop: { done(host) }, afterJob: host.afterJob)
    let seconds = Double(Monotonic.nanoseconds() - start) / 1e9
    check(host, stateDir)
    return seconds
}

/// Requests per second: the same requests from one curl process (it keeps the connection alive).
func curlRequests(port: Int, count: Int) -> Double {
    let config = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)").path
    let lines = (0..<count).map { _ in "url = \"http://127.0.0.1:\(port)/ok\"\noutput = \"/dev/null\"" }
    try! lines.joined(separator: "\n").write(toFile: config, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(atPath: config) }
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    curl.arguments = ["curl", "--silent", "--fail", "--config", config]
    let start = Monotonic.nanoseconds()
    try! curl.run()
    curl.waitUntilExit()
    precondition(curl.terminationStatus == 0, "curl failed")
    return Double(count) / (Double(Monotonic.nanoseconds() - start) / 1e9)
}

// MARK: 7. background transfer throughput

/// Serves `/big`: `size` bytes, with a Content-Length, written in 1 MiB chunks as the socket takes them.
final class BigHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let size: Int
    let chunk: ByteBuffer
    init(size: Int) {
        self.size = size
        chunk = ByteBuffer(repeating: 0x5A, count: 1 << 20)
    }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: String(size))
        headers.add(name: "ETag", value: "\"big\"")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        send(context, left: size)
    }
    private func send(_ context: ChannelHandlerContext, left: Int) {
        guard left > 0 else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let n = min(left, chunk.readableBytes)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk.getSlice(at: 0, length: n)!))))
            .whenSuccess { self.send(context, left: left - n) }
    }
}

/// Seconds for one download of `/big` through lifeline.transfers.download in `run`'s setting
/// (monotonic clock, async-http-client, a state dir on disk), from the call to transferEnded.
func lifelineTransfer(port: Int, size: Int) -> Double {
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-state-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: state) }
    return liveRun(
        "lifeline.transfers.download{url = 'http://127.0.0.1:\(port)/big', to = 'big.bin'}", stateDir: state
    ) { host in
        host.recorder.timeline.contains { $0.event == "transferEnded" }
    } check: { host, state in
        let ended = host.recorder.timeline.first { $0.event == "transferEnded" }
        precondition(ended?["state"] == .string("finished"), "the transfer did not finish: \(String(describing: ended))")
        let got = (try? FileManager.default.attributesOfItem(atPath: state! + "/files/p/big.bin"))?[.size] as? Int
        precondition(got == size, "the file has \(String(describing: got)) bytes")
    }
}

/// Seconds for curl to fetch the same URL into a file.
func curlTransfer(port: Int) -> Double {
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("curl-big-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: out) }
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    curl.arguments = ["curl", "--silent", "--fail", "-o", out, "http://127.0.0.1:\(port)/big"]
    let start = Monotonic.nanoseconds()
    try! curl.run()
    curl.waitUntilExit()
    precondition(curl.terminationStatus == 0, "curl failed")
    return Double(Monotonic.nanoseconds() - start) / 1e9
}

func transferFigure() {
    let size = 200_000_000
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    defer { try? group.syncShutdownGracefully() }
    let server = try! ServerBootstrap(group: group)
        .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(BigHandler(size: size)) }
        }
        .bind(host: "127.0.0.1", port: 0).wait()
    defer { try? server.close().wait() }
    let port = server.localAddress!.port!
    var lifeline: [Double] = [], curl: [Double] = []
    for _ in 0..<5 {
        lifeline.append(Double(size) / 1e6 / lifelineTransfer(port: port, size: size))
        curl.append(Double(size) / 1e6 / curlTransfer(port: port))
    }
    let l = median(lifeline), c = median(curl)
    print(String(format: "transfer.loopback %.0f MB/s through lifeline.transfers.download   curl %.0f MB/s   ratio %.2f  (200 MB to a file, median of 5)",
                 l, c, l / c))
}

// MARK: run

let only = CommandLine.arguments.dropFirst().first  // e.g. `figures dispatch`, for profiling one figure
if only == "dispatch" {
    print(String(format: "dispatch.lua      host %.0f ns/event", hostDispatch(iterations: 2_000_000)))
    exit(0)
}
if only == "transfer" {
    transferFigure()
    exit(0)
}

func backgroundFigure() {
    var bg: [Double] = [], manual: [Double] = [], bare: [Double] = [], chain: [Double] = []
    for _ in 0..<7 {
        bg.append(backgroundCalls("lifeline.background(nil, f)", calls: 500, events: 100))
        manual.append(backgroundCalls("lifeline.endBackgroundTask(lifeline.beginBackgroundTask())", calls: 500, events: 100))
        chain.append(backgroundCalls("if i == 1 then lifeline.background(nil, chained, \(500)) end", calls: 500, events: 100))
        bare.append(bareCoroutines(iterations: 50_000))
    }
    let g = median(bg), m = median(manual), c = median(bare), ch = median(chain)
    print(String(format: "background.lua    %.0f ns/call (begin, coroutine, end; 500 at once)   by hand begin+end %.0f ns   bare coroutine %.0f ns   ratios %.2f / %.2f",
                 g, m, c, g / m, g / c))
    print(String(format: "background.chain  %.0f ns/call (one after another)   ratios %.2f / %.2f", ch, ch / m, ch / c))
}

func httpFigure() {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    defer { try? group.syncShutdownGracefully() }
    let (server, port) = startServer(group: group)
    defer { try? server.close().wait() }
    _ = lifelineRequests(port: port, count: 200)  // warm up
    var lifeline: [Double] = [], curl: [Double] = []
    for _ in 0..<5 {
        lifeline.append(lifelineRequests(port: port, count: 2_000))
        curl.append(curlRequests(port: port, count: 2_000))
    }
    let l = median(lifeline), c = median(curl)
    print(String(format: "http.request      %.0f req/s through lifeline.http.request   curl %.0f req/s   ratio %.2f  (2000 sequential, loopback)",
                 l, c, l / c))
}

// MARK: 6. operation queues

/// Adds `count` empty operations to a serial queue in one memory-warning handler.
final class QueueBench: SwiftPlugin {
    nonisolated(unsafe) static var count = 0
    nonisolated(unsafe) static var async = false
    static let name = "queue-bench"
    init() {}
    func load(_ context: PluginContext) throws {
        context.on(.didReceiveMemoryWarning) { _ in
            let q = try context.queue("bench")
            if QueueBench.async {
                for _ in 0..<QueueBench.count { q.add { _ in } }
            } else {
                for _ in 0..<QueueBench.count { q.addOperation { _ in } }
            }
        }
    }
}

/// ns per operation, from the handler that adds them until the queue has drained and its task ended.
func lifelineQueue(_ descriptors: [PluginDescriptor], count: Int, keepTimeline: Bool) -> Double {
    let executor = MainExecutor(clock: VirtualClock())
    let recorder = Recorder(profileName: "ios13", keepsTimeline: keepTimeline)
    let host = LifelineHost(configuration: HostConfiguration(), plugins: descriptors, executor: executor, recorder: recorder)
    defer { host.shutdown() }
    try! host.perform(.launch)
    executor.run(shouldStop: { false }, afterJob: host.afterJob)
    let start = Monotonic.nanoseconds()
    try! host.perform(.memoryWarning)
    executor.run(shouldStop: { false }, afterJob: host.afterJob)
    let ns = Double(Monotonic.nanoseconds() - start) / Double(count)
    precondition(host.activeTasks.isEmpty && host.recorder.pluginErrorCount == 0)
    return ns
}

func swiftQueue(count: Int, async: Bool, keepTimeline: Bool) -> Double {
    QueueBench.count = count
    QueueBench.async = async
    return lifelineQueue([QueueBench.descriptor], count: count, keepTimeline: keepTimeline)
}

func luaQueue(count: Int) -> Double {
    let dir = tempPlugins(["p": """
        local q = lifeline.queue('bench')
        local f = function() end
        lifeline.on('didReceiveMemoryWarning', function() for i = 1, \(count) do q:add(f) end end)
        """])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return lifelineQueue(try! LuaPluginLoader.descriptors(in: dir), count: count, keepTimeline: false)
}

func foundationQueue(count: Int) -> Double {
    let q = OperationQueue()
    q.maxConcurrentOperationCount = 1
    let start = Monotonic.nanoseconds()
    for _ in 0..<count { q.addOperation {} }
    q.waitUntilAllOperationsAreFinished()
    return Double(Monotonic.nanoseconds() - start) / Double(count)
}

func dispatchQueue(count: Int) -> Double {
    let q = DispatchQueue(label: "figures.serial")
    let group = DispatchGroup()
    let start = Monotonic.nanoseconds()
    for _ in 0..<count { q.async(group: group) {} }
    group.wait()
    return Double(Monotonic.nanoseconds() - start) / Double(count)
}

func queueFigure() {
    let n = 100_000
    var sync: [Double] = [], syncKept: [Double] = [], async: [Double] = [], op: [Double] = [], dq: [Double] = []
    var lua: [Double] = []
    for _ in 0..<5 {
        sync.append(swiftQueue(count: n, async: false, keepTimeline: false))
        syncKept.append(swiftQueue(count: n, async: false, keepTimeline: true))
        async.append(swiftQueue(count: n, async: true, keepTimeline: false))
        op.append(foundationQueue(count: n))
        dq.append(dispatchQueue(count: n))
        lua.append(luaQueue(count: 20_000))
    }
    let s = median(sync), k = median(syncKept), a = median(async), o = median(op), d = median(dq), l = median(lua)
    print(String(format: "queue.swift       %.0f ns/op (addOperation, serial, 100k)   with the timeline kept %.0f ns   async add %.0f ns",
                 s, k, a))
    print(String(format: "queue.baselines   OperationQueue %.0f ns/op   serial DispatchQueue %.0f ns/op   ratios %.2f / %.2f (addOperation to each)",
                 o, d, s / o, s / d))
    print(String(format: "queue.lua         %.0f ns/op (q:add(f), serial, 20k)   ratio to DispatchQueue %.2f", l, l / d))
}

if only == "background" { backgroundFigure(); exit(0) }
if only == "queue" { queueFigure(); exit(0) }
if only == "queue.swift" {  // for a profiler: the Swift serial queue alone
    print(String(format: "queue.swift %.0f ns/op", swiftQueue(count: 100_000, async: false, keepTimeline: true)))
    exit(0)
}
if only == "http" { httpFigure(); exit(0) }

var hostNs: [Double] = [], bareNs: [Double] = []
for _ in 0..<7 {
    bareNs.append(bareLuaPcall(iterations: 200_000))
    hostNs.append(hostDispatch(iterations: 200_000))
}
let h = median(hostNs), b = median(bareNs)
print(String(format: "dispatch.lua      host %.0f ns/event   bare lua_pcall %.0f ns   ratio %.2f", h, b, h / b))
var host100: [Double] = [], bare100: [Double] = []
for _ in 0..<7 {
    bare100.append(bareLuaPcall(iterations: 500_000, states: 100))
    host100.append(hostDispatch(iterations: 5_000, plugins: 100))
}
let h100 = median(host100), b100 = median(bare100)
print(String(format: "dispatch.lua×100  host %.0f ns/handler (one event, 100 plugins)   bare %.0f ns (100 states)   ratio %.2f",
             h100, b100, h100 / b100))

let late = watchdogLateness(runs: 100)
print(String(format: "watchdog.latency  p50 %.3f ms   p99 %.3f ms   max %.3f ms  (100 runs, 20 ms limit)",
             median(late), percentile(late, 0.99), late.max()!))

var sims: [Double] = []
var eventCount = 0
for _ in 0..<5 {
    let r = longSimulation()
    sims.append(r.seconds)
    eventCount = r.events
}
print(String(format: "simulate.3h       %.1f ms wall for a 3-hour scenario, 100 cycles, %d timeline events (median of 5)",
             median(sims) * 1000, eventCount))

backgroundFigure()
httpFigure()
queueFigure()
transferFigure()
