import Dispatch
import Lifeline
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// Serves `HostMetrics.page()` as `GET /metrics` over HTTP/1.1, on a NIO event loop of its own:
/// a scrape never runs on the main executor. Before each page it asks for a fresh reading of the
/// host (`refresh`) and waits for it at most `refreshTimeout`; a host that does not answer in time
/// (a handler still running, a wedged host) gets the last reading served, so a scrape never hangs.
/// Other paths answer 404, other methods 405.
///
/// ```swift
/// let metrics = HostMetrics()
/// let live = LiveRun(setup: setup) { metrics.observe($0) }
/// let server = try MetricsServer(address: MetricsAddress(parsing: "127.0.0.1:9464"), metrics: metrics,
///                                refresh: MetricsServer.reading(live, into: metrics))
/// defer { server.close() }
/// ```
public final class MetricsServer: Sendable {
    /// Asks for a fresh reading, and calls its argument once it is taken, from any thread.
    public typealias Refresh = @Sendable (_ taken: @escaping @Sendable () -> Void) -> Void

    /// The address served, with the port the system gave when 0 was asked for.
    public let address: MetricsAddress
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// The refresh of a live run: the host is read on its main executor, between two jobs, and
    /// the reading goes on the page on another thread, so the main executor spends on a scrape
    /// only the time it takes to copy a few numbers a plugin.
    public static func reading(_ run: LiveRun, into metrics: HostMetrics) -> Refresh {
        // Serial, so readings land in the order the main executor took them: two scrapes at once
        // (two Prometheus servers) must not leave the older reading on the page, nor bring back
        // the gauges of a plugin a reload removed in between.
        let applier = DispatchQueue(label: "lifeline.metrics.readings")
        return { taken in
            run.onMainExecutor { host in
                let reading = HostMetrics.reading(of: host)
                applier.async {
                    metrics.apply(reading)
                    taken()
                }
            }
        }
    }

    /// Binds `address` and starts serving. Throws `LifelineError.unavailable` (exit 69) when the
    /// address cannot be bound (in use, not this machine's, a port that needs privileges), with
    /// the address in the message.
    public init(
        address: MetricsAddress, metrics: HostMetrics, refreshTimeout: Double = 0.25, refresh: Refresh? = nil
    ) throws(LifelineError) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let wait = TimeAmount.nanoseconds(Int64(max(0, refreshTimeout) * 1e9))
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMap {
                    channel.pipeline.addHandler(MetricsHandler(metrics: metrics, refresh: refresh, wait: wait))
                }
            }
        do {
            channel = try bootstrap.bind(host: address.host, port: address.port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw .unavailable("cannot serve metrics on \(address): \(Self.why(error))")
        }
        self.group = group
        var bound = address
        if let port = channel.localAddress?.port { bound.port = port }
        self.address = bound
    }

    /// Stops listening and closes every connection.
    public func close() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    private static func why(_ error: any Error) -> String {
        if let io = error as? IOError {
            switch io.errnoCode {
            case EADDRINUSE: return "the address is in use"
            case EADDRNOTAVAIL: return "the address is not one of this machine's"
            case EACCES: return "the port needs privileges"
            default: return String(cString: strerror(io.errnoCode))
            }
        }
        return "\(error)"
    }
}

/// One connection's requests, answered in turn.
private final class MetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: HostMetrics
    private let refresh: MetricsServer.Refresh?
    private let wait: TimeAmount
    private var head: HTTPRequestHead?

    init(metrics: HostMetrics, refresh: MetricsServer.Refresh?, wait: TimeAmount) {
        self.metrics = metrics
        self.refresh = refresh
        self.wait = wait
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: return
        case .end:
            guard let head else { return }
            self.head = nil
            answer(head, context: context)
        }
    }

    private func answer(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard path == "/metrics" else {
            return respond(head, .notFound, Array("not found: the page is /metrics\n".utf8), context: context)
        }
        guard head.method == .GET || head.method == .HEAD else {
            // A 405 says which methods are allowed (RFC 9110, 15.5.6).
            return respond(head, .methodNotAllowed, Array("GET /metrics\n".utf8), allow: "GET, HEAD", context: context)
        }
        guard let refresh else {
            return respond(head, .ok, metrics.page(), context: context)
        }
        // Whichever comes first, the reading or the wait's end, serves the page.
        let promise = context.eventLoop.makePromise(of: Void.self)
        let once = Once()
        let settle: @Sendable () -> Void = { if once.first() { promise.succeed(()) } }
        let timeout = context.eventLoop.scheduleTask(in: wait, settle)
        refresh(settle)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        promise.futureResult.whenSuccess {
            timeout.cancel()
            let (handler, context) = bound.value
            handler.respond(head, .ok, handler.metrics.page(), context: context)
        }
    }

    private func respond(
        _ request: HTTPRequestHead, _ status: HTTPResponseStatus, _ body: [UInt8], allow: String? = nil,
        context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders()
        if let allow { headers.add(name: "Allow", value: allow) }
        headers.add(
            name: "Content-Type",
            value: status == .ok ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(body.count)")
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: request.version, status: status, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if request.method != .HEAD {
            let bytes = context.channel.allocator.buffer(bytes: body)
            context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil)
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        if !keepAlive {
            let channel = context.channel
            done.futureResult.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

/// True the first time only, from any thread.
private final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func first() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }
}
