// The rows that talk HTTP on loopback: http.loopback and transfer.loopback, each beside curl.
import Foundation
import Lifeline
import LifelineHTTP
import LifelineLua
import NIOCore
import NIOHTTP1
import NIOPosix

/// Answers every request with 200 "ok", keeping connections alive.
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

/// Serves `size` bytes, with a Content-Length and an ETag, in 1 MiB chunks as the socket takes them.
final class BigHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let size: Int
    let chunk = ByteBuffer(repeating: 0x5A, count: 1 << 20)
    init(size: Int) { self.size = size }
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

/// A loopback HTTP/1.1 server on its own event loop, each connection handled by `handler()`.
final class LoopbackServer {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let channel: Channel
    var port: Int { channel.localAddress!.port! }

    init(_ handler: @escaping @Sendable () -> any ChannelHandler & Sendable) {
        channel = try! ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(handler()) }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    deinit {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// Seconds from launch until `done`, for one Lua plugin "p" (allowed 127.0.0.1) in `run`'s
/// setting: monotonic clock, async-http-client for requests and transfers, and a state dir on
/// disk when `stateDir` is given. `check` runs before the host is shut down.
func liveRun(
    _ source: String, stateDir: String?, until done: (LifelineHost) -> Bool, check: (LifelineHost) -> Void
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
    check(host)
    return seconds
}

/// Runs curl with `arguments`; seconds it took.
func curl(_ arguments: [String]) -> Double {
    let curl = Process()
    curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    curl.arguments = ["curl", "--silent", "--fail"] + arguments
    let start = Monotonic.nanoseconds()
    try! curl.run()
    curl.waitUntilExit()
    precondition(curl.terminationStatus == 0, "curl failed")
    return Double(Monotonic.nanoseconds() - start) / 1e9
}

// MARK: http.loopback

/// Requests per second: `count` sequential requests from one lifeline.background task.
func lifelineRequests(port: Int, count: Int) -> Double {
    let source = """
        lifeline.background('bench', function()
          for i = 1, \(count) do
            local r, err = lifeline.http.request{url = 'http://127.0.0.1:\(port)/ok'}
            assert(r and r.status == 200, err and err.message)
          end
        end)
        """
    let seconds = liveRun(source, stateDir: nil) { $0.activeTaskCount == 0 } check: { host in
        precondition(host.recorder.pluginErrorCount == 0, "the benchmark plugin failed")
    }
    return Double(count) / seconds
}

/// Requests per second: the same requests from one curl process, on one kept-alive connection.
func curlRequests(port: Int, count: Int) -> Double {
    let config = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)").path
    let lines = (0..<count).map { _ in "url = \"http://127.0.0.1:\(port)/ok\"\noutput = \"/dev/null\"" }
    try! lines.joined(separator: "\n").write(toFile: config, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(atPath: config) }
    return Double(count) / curl(["--config", config])
}

func httpRow() -> Row {
    let server = LoopbackServer { OKHandler() }
    _ = lifelineRequests(port: server.port, count: 200)  // warm up
    let m = interleaved(rounds: 5, [
        { lifelineRequests(port: server.port, count: 2_000) }, { curlRequests(port: server.port, count: 2_000) },
    ])
    return Row(
        name: "http.loopback", unit: "req/s", value: m[0], baseline: ("curl, one kept-alive connection", m[1]),
        target: "≥ 0.8", met: m[0] / m[1] >= 0.8)
}

// MARK: transfer.loopback

/// Seconds for one download of `size` bytes through lifeline.transfers.download in `run`'s
/// setting, from launch to transferEnded, the file checked.
func lifelineTransfer(port: Int, size: Int) -> Double {
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-state-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: state) }
    return liveRun(
        "lifeline.transfers.download{url = 'http://127.0.0.1:\(port)/big', to = 'big.bin'}", stateDir: state
    ) { host in
        host.recorder.timeline.contains { $0.event == "transferEnded" }
    } check: { host in
        let ended = host.recorder.timeline.first { $0.event == "transferEnded" }
        precondition(ended?["state"] == .string("finished"), "the transfer did not finish: \(String(describing: ended))")
        let got = (try? FileManager.default.attributesOfItem(atPath: state + "/files/p/big.bin"))?[.size] as? Int
        precondition(got == size, "the file has \(String(describing: got)) bytes")
    }
}

func curlTransfer(port: Int) -> Double {
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("curl-big-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: out) }
    return curl(["-o", out, "http://127.0.0.1:\(port)/big"])
}

/// transfer.loopback's two sides, measured in this process: MB/s of Lifeline's download and of
/// curl's, each the median of five alternating rounds.
func transferSides() -> [Double] {
    let size = 200_000_000
    let server = LoopbackServer { BigHandler(size: size) }
    return interleaved(rounds: 5, [
        { Double(size) / 1e6 / lifelineTransfer(port: server.port, size: size) },
        { Double(size) / 1e6 / curlTransfer(port: server.port) },
    ])
}

/// The row's sides run in a fresh process (`figures fresh transfer.loopback`), as `lifeline run`
/// starts fresh: after the rows before it, this process's heap holds what they freed, which the
/// download's buffers then pass through, while each curl starts clean (docs/benchmarks.md).
func transferRow() -> Row {
    let m = freshSides("transfer.loopback")
    return Row(
        name: "transfer.loopback", unit: "MB/s", value: m[0], baseline: ("curl -o FILE", m[1]), target: "≥ 0.8",
        met: m[0] / m[1] >= 0.8)
}
