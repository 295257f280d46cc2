import Foundation
import Lifeline
import NIOCore
import NIOHTTP1
import NIOPosix

// A real HTTP/1.1 file server on 127.0.0.1 for the transfer tests: byte ranges with If-Range, an
// ETag that a test can change, and faults it can inject. Every test starts its own.
//
//   GET  /file/NAME   the file NAME (see `setFile`), with ETag and Last-Modified; Range: bytes=N-
//                     is answered with 206 when If-Range names the current ETag (or there is none)
//   PUT  /upload/NAME and POST: keeps the body as the file NAME, answers 201
//
// Faults, taken by the next requests in order (`inject`): a status with headers (503 with
// Retry-After, 404), or dropping the connection after N body bytes. `bytesPerTick` slows every
// body down to that many bytes each 10 ms.

final class RangeServer: Sendable {
    enum Fault: Sendable {
        case status(Int, headers: [(String, String)])
        case dropAfter(Int)
    }

    /// What one request asked for.
    struct Request: Sendable, Equatable {
        var method: String
        var path: String
        var range: String?
        var ifRange: String?
    }

    struct State {
        var files: [String: (bytes: [UInt8], etag: String)] = [:]
        var faults: [Fault] = []
        var requests: [Request] = []
        var bodyBytesSent = 0
        var inFlight = 0
        var maxInFlight = 0
        var bytesPerTick: Int?
    }

    let port: Int
    private let channel: any Channel
    // Lifeline.Locked, not Synchronization.Mutex: ThreadSanitizer cannot see a Mutex wait on Linux.
    let state: Lifeline.Locked<State>

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
        self.state = Lifeline.Locked(State())
    }

    static func start() async throws -> RangeServer {
        let box = StateBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                    try pipeline.addHandler(FileHandler(server: box))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else { throw TestServerError("the server has no port") }
        let server = RangeServer(channel: channel, port: port)
        box.server.withLock { $0 = server }
        return server
    }

    func stop() async { try? await channel.close() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func setFile(_ name: String, _ bytes: [UInt8], etag: String = "\"v1\"") {
        state.withLock { $0.files[name] = (bytes, etag) }
    }

    func file(_ name: String) -> [UInt8]? { state.withLock { $0.files[name]?.bytes } }
    func inject(_ faults: Fault...) { state.withLock { $0.faults += faults } }
    func throttle(bytesPerTick: Int?) { state.withLock { $0.bytesPerTick = bytesPerTick } }
    var requests: [Request] { state.withLock { $0.requests } }
    var bodyBytesSent: Int { state.withLock { $0.bodyBytesSent } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
}

/// Lets the handlers reach the server made after the bootstrap.
private final class StateBox: Sendable {
    let server = Lifeline.Locked<RangeServer?>(nil)
}

/// Deterministic test bytes: not all zeros, so a splice of the wrong bytes shows.
func testBytes(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    var x = UInt32(seed) &* 2_654_435_761 | 1
    for i in 0..<count {
        x ^= x << 13
        x ^= x >> 17
        x ^= x << 5
        out[i] = UInt8(truncatingIfNeeded: x)
    }
    return out
}

private final class FileHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let box: StateBox
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(server: StateBox) { self.box = server }

    private var server: RangeServer { box.server.withLock { $0! } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard let head else { return }
            self.head = nil
            answer(context, head)
        }
    }

    private func answer(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let request = RangeServer.Request(
            method: head.method.rawValue, path: head.uri, range: head.headers.first(name: "Range"),
            ifRange: head.headers.first(name: "If-Range"))
        let (fault, file, tick) = server.state.withLock { state in
            state.requests.append(request)
            let fault = state.faults.isEmpty ? nil : state.faults.removeFirst()
            let name = String(head.uri.split(separator: "/").last ?? "")
            return (fault, state.files[name], state.bytesPerTick)
        }
        if head.method == .PUT || head.method == .POST {
            let name = String(head.uri.split(separator: "/").last ?? "")
            server.setFile(name, body)
            return respond(context, .created, [], [])
        }
        var dropAfter: Int?
        switch fault {
        case .status(let code, let headers)?:
            return respond(context, HTTPResponseStatus(statusCode: code), headers, Array("fault".utf8))
        case .dropAfter(let n)?:
            dropAfter = n
        case nil:
            break
        }
        guard let file else { return respond(context, .notFound, [], Array("no such file".utf8)) }
        var start = 0
        var status = HTTPResponseStatus.ok
        var headers = [("ETag", file.etag), ("Last-Modified", "Mon, 23 Nov 2026 00:00:00 GMT")]
        if let range = request.range, range.hasPrefix("bytes="),
            let from = Int(range.dropFirst(6).prefix { $0 != "-" }), from < file.bytes.count,
            request.ifRange == nil || request.ifRange == file.etag
        {
            start = from
            status = .partialContent
            headers.append(("Content-Range", "bytes \(from)-\(file.bytes.count - 1)/\(file.bytes.count)"))
        }
        headers.append(("Content-Length", "\(file.bytes.count - start)"))
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(headers)))),
            promise: nil)
        server.state.withLock {
            $0.inFlight += 1
            $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
        }
        send(context, file.bytes, from: start, dropAt: dropAfter.map { start + $0 }, tick: tick)
    }

    /// Writes the body in chunks, each once the last was taken (and, throttled, once a tick).
    private func send(_ context: ChannelHandlerContext, _ bytes: [UInt8], from: Int, dropAt: Int?, tick: Int?) {
        let server = self.server
        guard context.channel.isActive else {
            server.state.withLock { $0.inFlight -= 1 }
            return
        }
        var end = min(bytes.count, from + (tick ?? 256 * 1024))
        if let dropAt { end = min(end, dropAt) }
        if from == end {
            server.state.withLock { $0.inFlight -= 1 }
            if dropAt != nil && from < bytes.count {
                context.close(promise: nil)
            } else {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: end - from)
        buffer.writeBytes(bytes[from..<end])
        server.state.withLock { $0.bodyBytesSent += end - from }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))))
            .assumeIsolated()
            .whenComplete { _ in
                if let tick, tick > 0 {
                    context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(10)) {
                        self.send(context, bytes, from: end, dropAt: dropAt, tick: tick)
                    }
                } else {
                    self.send(context, bytes, from: end, dropAt: dropAt, tick: tick)
                }
            }
    }

    private func respond(
        _ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ headers: [(String, String)], _ body: [UInt8]
    ) {
        let all = headers + [("Content-Length", "\(body.count)")]
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: HTTPHeaders(all)))),
            promise: nil)
        if !body.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
