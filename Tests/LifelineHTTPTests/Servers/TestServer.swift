import Foundation
import Lifeline
import NIOCore
import NIOHTTP1
import NIOPosix

// A real HTTP/1.1 server on 127.0.0.1, in process, for the transport's tests. Every test starts its
// own, so the counters it keeps belong to that test alone.
//
// Routes:
//   /ok              200, a small JSON body
//   /echo            200, "METHOD\nX-Test header\nbody"
//   /fail            500
//   /slow?ms=N       200 after N ms (a timer on the event loop); 5000 ms by default
//   /stall           headers and part of the body, then nothing more; the connection stays open
//   /drop            Content-Length: 1000, 10 bytes of body, then the connection closes
//   /big?size=N      N bytes (64 KiB by default) with a Content-Length; &chunked=1: chunked, without
//   /endless         a body that never ends, written as fast as the client reads it, chunked;
//                    ?length=N: with Content-Length N
//   /loop            302 to /loop
//   /chain/N?ms=M    after M ms, 302 to /chain/N-1 (keeping the query); /chain/0 is 200
//   /away            302 to http://localhost:PORT/ok (another host name for the same server)
//   /hang            never answers; the connection stays open
//   /sequence        the first request: 200, a JSON body and an X-Note header with a comma and a #;
//                    the second: 503 "busy"; every later one: no answer, as /hang

/// A running test server.
final class TestServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let state: ServerState

    private init(channel: any Channel, port: Int, state: ServerState) {
        self.channel = channel
        self.port = port
        self.state = state
    }

    /// Starts a server on 127.0.0.1, on a port the system picks.
    static func start() async throws -> TestServer {
        let state = ServerState()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(ConnectionCounter(state: state))
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(RouteHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else {
            try? await channel.close()
            throw TestServerError("the server has no port")
        }
        state.setPort(port)
        return TestServer(channel: channel, port: port, state: state)
    }

    /// Stops listening. Open connections are left to their clients.
    func stop() async {
        try? await channel.close()
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// Connections open now.
    var openConnections: Int { state.snapshot.open }
    /// Connections accepted since the start.
    var acceptedConnections: Int { state.snapshot.accepted }
    /// Requests received for `path` (without its query), complete or not.
    func requests(_ path: String) -> Int { state.snapshot.requests[path, default: 0] }

    /// Polls the counters every 10 ms until `condition` holds or `seconds` of real time have passed.
    /// Returns whether it held. Every caller waits for something that must happen, so the limit
    /// costs nothing when it does, and is generous: under `.ci/run` on two cores a request once
    /// took more than 5 s to arrive (the CLI tests wait 30 s for the same reason).
    func wait(
        upTo seconds: Double = 30, until condition: @escaping @Sendable (TestServer) -> Bool
    ) async -> Bool {
        let clock = ContinuousClock()
        let end = clock.now + .milliseconds(Int(seconds * 1000))
        while !condition(self) {
            guard clock.now < end else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// A port on 127.0.0.1 where nothing listens: bound, noted, closed.
    static func closedPort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let port = channel.localAddress?.port
        try await channel.close()
        guard let port else { throw TestServerError("the listener had no port") }
        return port
    }
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What the server counts, shared by its connections' handlers.
final class ServerState: Sendable {
    struct Counts {
        var port = 0
        var open = 0
        var accepted = 0
        var requests: [String: Int] = [:]
    }

    private let counts = Lifeline.Locked(Counts())

    var snapshot: Counts { counts.withLock { $0 } }
    func setPort(_ port: Int) { counts.withLock { $0.port = port } }
    func opened() {
        counts.withLock {
            $0.open += 1
            $0.accepted += 1
        }
    }
    func closed() { counts.withLock { $0.open -= 1 } }
    func received(_ path: String) { counts.withLock { $0.requests[path, default: 0] += 1 } }
}

/// Counts connections as they open and close.
private final class ConnectionCounter: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    let state: ServerState

    init(state: ServerState) { self.state = state }

    func channelActive(context: ChannelHandlerContext) {
        state.opened()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.closed()
        context.fireChannelInactive()
    }
}

/// Answers the routes above.
private final class RouteHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let state: ServerState
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(state: ServerState) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            state.received(Self.split(head.uri).path)
        case .body(let buffer):
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            route(context: context, head: head)
        }
    }

    private static func split(_ uri: String) -> (path: String, query: [String: String]) {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if parts.count > 1 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                query[String(kv[0])] = kv.count > 1 ? String(kv[1]) : ""
            }
        }
        return (String(parts[0]), query)
    }

    private func route(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let (path, query) = Self.split(head.uri)
        let json = [("Content-Type", "application/json")]
        switch path {
        case "/ok":
            respond(context, .ok, headers: json, body: Array(#"{"ok":true}"#.utf8))
        case "/echo":
            let echoed = "\(head.method.rawValue)\n\(head.headers.first(name: "X-Test") ?? "")\n"
            respond(context, .ok, body: Array(echoed.utf8) + body)
        case "/fail":
            respond(context, .internalServerError, body: Array("boom".utf8))
        case "/slow":
            let ms = query["ms"].flatMap { Int64($0) } ?? 5000
            later(context, ms: ms) { handler, context in
                handler.respond(context, .ok, body: Array("slow".utf8))
            }
        case "/stall":
            // 10 of the 1000 bytes announced, then silence.
            writeHead(context, .ok, [("Content-Length", "1000")])
            writeBody(context, [UInt8](repeating: UInt8(ascii: "a"), count: 10))
            context.flush()
        case "/drop":
            // 10 of the 1000 bytes announced, then the connection closes.
            writeHead(context, .ok, [("Content-Length", "1000")])
            writeBody(context, [UInt8](repeating: UInt8(ascii: "a"), count: 10))
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))))
                .assumeIsolated()
                .whenComplete { _ in context.close(promise: nil) }
        case "/big":
            let size = query["size"].flatMap { Int($0) } ?? 64 * 1024
            let bytes = [UInt8](repeating: UInt8(ascii: "x"), count: size)
            if query["chunked"] == "1" {
                respondChunked(context, body: bytes)
            } else {
                respond(context, .ok, body: bytes)
            }
        case "/endless":
            if let length = query["length"] {
                writeHead(context, .ok, [("Content-Length", length)])
            } else {
                writeHead(context, .ok, [("Transfer-Encoding", "chunked")])
            }
            stream(context, sent: 0)
        case "/loop":
            respond(context, .found, headers: [("Location", "/loop")])
        case "/away":
            respond(context, .found, headers: [("Location", "http://localhost:\(state.snapshot.port)/ok")])
        case "/hang":
            break  // no answer, ever
        case "/sequence":
            switch state.snapshot.requests["/sequence", default: 0] {
            case 1: respond(context, .ok, headers: json + [("X-Note", "a, b # c")], body: Array(#"{"items":[1,2]}"#.utf8))
            case 2: respond(context, .serviceUnavailable, body: Array("busy".utf8))
            default: break
            }
        default:
            if path.hasPrefix("/chain/"), let n = Int(path.dropFirst("/chain/".count)) {
                let ms = query["ms"].flatMap { Int64($0) } ?? 0
                let rest = head.uri.firstIndex(of: "?").map { String(head.uri[$0...]) } ?? ""
                later(context, ms: ms) { handler, context in
                    if n <= 0 {
                        handler.respond(context, .ok, body: Array("end of chain".utf8))
                    } else {
                        handler.respond(context, .found, headers: [("Location", "/chain/\(n - 1)\(rest)")])
                    }
                }
            } else {
                respond(context, .notFound)
            }
        }
    }

    /// Writes 4 KiB chunks, each once the last one was taken by the socket, until the client closes
    /// the connection (or 256 MiB, should it read everything).
    private func stream(_ context: ChannelHandlerContext, sent: Int) {
        guard context.channel.isActive, sent < 256 * 1024 * 1024 else { return }
        let chunk = ByteBuffer(repeating: UInt8(ascii: "e"), count: 4096)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))))
            .assumeIsolated()
            .whenSuccess { self.stream(context, sent: sent + chunk.readableBytes) }
    }

    /// Runs `body` after `ms` milliseconds on the connection's event loop.
    private func later(
        _ context: ChannelHandlerContext, ms: Int64,
        _ body: @escaping (RouteHandler, ChannelHandlerContext) -> Void
    ) {
        guard ms > 0 else { return body(self, context) }
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(ms)) {
            guard context.channel.isActive else { return }
            body(self, context)
        }
    }

    private func respond(
        _ context: ChannelHandlerContext, _ status: HTTPResponseStatus, headers: [(String, String)] = [],
        body: [UInt8] = []
    ) {
        writeHead(context, status, headers + [("Content-Length", "\(body.count)")])
        if !body.isEmpty { writeBody(context, body) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// A body without a Content-Length, in chunks of 4 KiB.
    private func respondChunked(_ context: ChannelHandlerContext, body: [UInt8]) {
        writeHead(context, .ok, [("Transfer-Encoding", "chunked")])
        var start = 0
        while start < body.count {
            let end = min(start + 4096, body.count)
            writeBody(context, body[start..<end])
            start = end
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func writeHead(
        _ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ headers: [(String, String)]
    ) {
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    private func writeBody(_ context: ChannelHandlerContext, _ bytes: some Sequence<UInt8>) {
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes)))), promise: nil)
    }
}

// MARK: - Helpers for the tests

/// Starts a server, runs `body` with it, and stops it, whether `body` throws or not.
func withTestServer<T>(_ body: (TestServer) async throws -> T) async throws -> T {
    let server = try await TestServer.start()
    do {
        let value = try await body(server)
        await server.stop()
        return value
    } catch {
        await server.stop()
        throw error
    }
}

/// A value shared between a test and the callbacks it drives (transport completions, plugin code).
/// Behind Lifeline's pthread mutex, not Synchronization.Mutex, whose wait on Linux ThreadSanitizer
/// cannot see: a contended lock would read as a race.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Lifeline.Locked<Value>
    init(_ value: Value) { mutex = Lifeline.Locked(value) }
    var value: Value {
        get { mutex.withLock { $0 } }
        set { mutex.withLock { $0 = newValue } }
    }
    func mutate<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}

extension HTTPTransport {
    /// One exchange, awaited. The checked continuation also checks that `completion` comes once.
    func exchange(_ request: HTTPRequest) async -> Result<HTTPResponse, HTTPFailure> {
        await withCheckedContinuation { continuation in
            _ = send(request) { result in continuation.resume(returning: result) }
        }
    }
}

extension Result where Failure == HTTPFailure {
    /// The failure's kind, or nil on success.
    var failureKind: HTTPFailure.Kind? {
        if case .failure(let failure) = self { return failure.kind }
        return nil
    }

    /// The failure's message, or "" on success.
    var failureMessage: String {
        if case .failure(let failure) = self { return failure.message }
        return ""
    }
}

/// Runs `body` on a thread of its own and returns what it returns: for code that blocks (the host's
/// main executor), so it does not hold one of the few threads Swift's concurrency runs on.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}
