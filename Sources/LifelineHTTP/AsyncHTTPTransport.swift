import AsyncHTTPClient
import Lifeline
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// The real network for `lifeline run`: async-http-client behind the core's `HTTPTransport`.
///
/// One shared `HTTPClient` pools connections for every plugin. It makes single exchanges only:
/// redirects are not followed (the core follows them, checking permissions on every hop), bodies
/// are not decompressed, and a refused connection fails at once instead of being retried. The
/// request's `timeout` bounds the whole exchange, body included; the core applies its own timeout
/// on the host's clock on top, across redirects.
///
/// Threading: any thread. `completion` is called from an event loop, never from a Swift task, so a
/// busy cooperative thread pool cannot hold up a response.
public final class AsyncHTTPTransport: HTTPTransport {
    /// Seconds a new connection (TCP and TLS) may take before the exchange fails with `timeout`.
    public static let defaultConnectTimeout: Double = 10

    let client: HTTPClient
    let connectTimeout: Double
    /// Seconds a background transfer may receive nothing before it fails with `timeout`.
    let transferIdleTimeout: Double
    public static let defaultTransferIdleTimeout: Double = 60
    let isShutDown = Locked(false)

    /// Makes the transport and its client.
    ///
    /// - Parameters:
    ///   - eventLoopGroup: Where connections live; NIO's shared singleton by default. The transport
    ///     does not shut it down.
    ///   - connectTimeout: Seconds a new connection may take (TCP connect and TLS handshake).
    public init(
        eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
        connectTimeout: Double = AsyncHTTPTransport.defaultConnectTimeout,
        transferIdleTimeout: Double = AsyncHTTPTransport.defaultTransferIdleTimeout
    ) {
        self.transferIdleTimeout = transferIdleTimeout
        var pool = HTTPClient.Configuration.ConnectionPool()
        // A refused connection is an answer, as on iOS: fail with `connect` now rather than retry
        // with a backoff until the connect timeout.
        pool.retryConnectionEstablishment = false
        let configuration = HTTPClient.Configuration(
            tlsConfiguration: nil,  // the default: system trust roots, hostname checked
            redirectConfiguration: .disallow,
            timeout: HTTPClient.Configuration.Timeout(connect: AsyncHTTPTransport.amount(seconds: connectTimeout)),
            connectionPool: pool,
            decompression: .disabled)
        self.client = HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
        self.connectTimeout = connectTimeout
    }

    deinit {
        // `shutdown()` was not called: release the client without blocking, wherever this runs.
        if !isShutDown.withLock({ $0 }) { client.shutdown { _ in } }
    }

    /// Closes the pooled connections and releases the client; requests under way fail. Blocks until
    /// the connections are closed, unless called on an event loop. Safe to call more than once.
    public func shutdown() {
        let first = isShutDown.withLock { isShutDown in
            defer { isShutDown = true }
            return !isShutDown
        }
        guard first else { return }
        if MultiThreadedEventLoopGroup.currentEventLoop != nil {
            // Blocking on an event loop could deadlock: let the shutdown finish on its own.
            client.shutdown { _ in }
        } else {
            try? client.syncShutdown()
        }
    }

    /// Starts one exchange in a Swift task. `completion` is called exactly once: with the response,
    /// or with why it failed (`cancelled` once the returned value's `cancel()` was called).
    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        guard !isShutDown.withLock({ $0 }) else {
            completion(.failure(HTTPFailure(.connect, "cannot reach \(request.url): the HTTP client was shut down")))
            return NothingToCancel()
        }
        let timeout = request.timeout.isFinite && request.timeout > 0 ? request.timeout : HTTPRequest.defaultTimeout
        let deadline = NIODeadline.now() + AsyncHTTPTransport.amount(seconds: timeout)
        let context = FailureContext(url: request.url, timeout: timeout, connectTimeout: connectTimeout)
        let outgoing: HTTPClient.Request
        do {
            let headers = HTTPHeaders(request.headers)
            let hasBody = !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(request.method)
            outgoing = try HTTPClient.Request(
                url: request.url, method: HTTPMethod(rawValue: request.method), headers: headers,
                body: hasBody ? .bytes(request.body) : nil)
        } catch {
            completion(.failure(AsyncHTTPTransport.failure(for: error, context)))
            return NothingToCancel()
        }
        let exchange = Exchange(completion)
        // The delegate API runs the whole exchange on an event loop: no Swift task, so a busy
        // cooperative thread pool cannot delay a response or its timeout.
        let collector = Collector(url: request.url, method: request.method, limit: max(0, request.maximumBodyBytes))
        let task = client.execute(request: outgoing, delegate: collector, deadline: deadline)
        task.futureResult.whenComplete { result in
            exchange.finish(result.mapError { AsyncHTTPTransport.failure(for: $0, context) })
        }
        // Also covers a body that stalls after the head.
        let timer = task.eventLoop.scheduleTask(deadline: deadline) {
            exchange.finish(.failure(context.timedOut))
            task.cancel()
        }
        exchange.attach(task: task, timer: timer)
        return Cancellation(exchange: exchange, url: request.url)
    }

    // MARK: - Errors

    /// What an error message needs to know about the exchange.
    struct FailureContext: Sendable {
        var url: String
        var timeout: Double
        var connectTimeout: Double

        var timedOut: HTTPFailure {
            HTTPFailure(.timeout, "no complete response from \(url) within \(AsyncHTTPTransport.seconds(timeout)) s")
        }
    }

    /// Maps what async-http-client and NIO throw to the core's failure kinds, with a message naming
    /// the URL.
    static func failure(for error: any Error, _ context: FailureContext) -> HTTPFailure {
        let url = context.url
        switch error {
        case let failure as HTTPFailure:
            return failure
        case is CancellationError:
            return HTTPFailure(.cancelled, "the request to \(url) was cancelled")
        case is NIOTooManyBytesError:
            return HTTPFailure(.tooLarge, "the response from \(url) is longer than the cap")
        case let error as HTTPClientError:
            return failure(for: error, context)
        case let error as NIOConnectionError:
            if let dnsError = error.dnsAError ?? error.dnsAAAAError {
                return HTTPFailure(.connect, "cannot reach \(url): could not resolve '\(error.host)' (\(dnsError))")
            }
            let reasons = error.connectionErrors.map { describe($0.error) }
            let reason = reasons.isEmpty ? "no address to connect to" : reasons.joined(separator: "; ")
            return HTTPFailure(.connect, "cannot connect to \(url): \(reason)")
        case let error as IOError where [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode):
            return HTTPFailure(.connect, "cannot connect to \(url): \(describe(error))")
        case let error as IOError:
            return HTTPFailure(.connect, "the connection to \(url) failed: \(describe(error))")
        case ChannelError.connectTimeout:
            return HTTPFailure(
                .timeout, "cannot connect to \(url): no connection within \(seconds(context.connectTimeout)) s")
        case ChannelError.eof, ChannelError.ioOnClosedChannel, ChannelError.outputClosed,
            ChannelError.alreadyClosed, HTTPParserError.invalidEOFState:
            return closedEarly(url)
        case let error as HTTPParserError:
            return HTTPFailure(.connect, "the response from \(url) is not valid HTTP: \(error)")
        default:
            break
        }
        let type = String(reflecting: Swift.type(of: error))
        // NIOSSL's errors (NIOSSLError, NIOSSLExtraError, BoringSSLError), recognised by their module
        // so this target need not depend on swift-nio-ssl.
        if type.hasPrefix("NIOSSL.") {
            return HTTPFailure(.tls, "TLS with \(url) failed: \(error)")
        }
        return HTTPFailure(.connect, "the request to \(url) failed: \(error)")
    }

    private static func failure(for error: HTTPClientError, _ context: FailureContext) -> HTTPFailure {
        let url = context.url
        switch error {
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            return context.timedOut
        case .connectTimeout, .getConnectionFromPoolTimeout:
            return HTTPFailure(
                .timeout, "cannot connect to \(url): no connection within \(seconds(context.connectTimeout)) s")
        case .tlsHandshakeTimeout:
            return HTTPFailure(
                .timeout, "TLS with \(url) failed: no handshake within \(seconds(context.connectTimeout)) s")
        case .remoteConnectionClosed, .uncleanShutdown:
            return closedEarly(url)
        case .cancelled:
            return HTTPFailure(.cancelled, "the request to \(url) was cancelled")
        case .invalidURL, .emptyHost, .emptyScheme:
            return HTTPFailure(.connect, "'\(url)' is not a valid http:// or https:// URL")
        case .alreadyShutdown:
            return HTTPFailure(.connect, "cannot reach \(url): the HTTP client was shut down")
        default:
            return HTTPFailure(.connect, "the request to \(url) failed: \(error)")
        }
    }

    private static func closedEarly(_ url: String) -> HTTPFailure {
        HTTPFailure(.connect, "the connection to \(url) closed before the response was complete")
    }

    /// "connection refused" rather than NIO's "connection reset (error set): Connection refused (errno: 111)".
    private static func describe(_ error: any Error) -> String {
        guard let error = error as? IOError else { return "\(error)" }
        switch error.errnoCode {
        case ECONNREFUSED: return "connection refused"
        case ECONNRESET: return "connection reset"
        case ETIMEDOUT: return "connection timed out"
        case EHOSTUNREACH: return "host unreachable"
        case ENETUNREACH: return "network unreachable"
        default: return "\(error)"
        }
    }

    // MARK: - Helpers

    /// Seconds as a `TimeAmount`, clamped to a range NIO can add to `now` without overflowing.
    static func amount(seconds: Double) -> TimeAmount {
        let clamped = seconds.isFinite ? min(max(seconds, 0), 1e8) : 1e8
        return .nanoseconds(Int64(clamped * 1e9))
    }

    /// Seconds for a message, as the report writes them: "0.5", "60".
    private static func seconds(_ value: Double) -> String { ReportNumber.seconds(value) }
}

/// One exchange's outcome: the first of the response, the deadline and `cancel()` wins, and the
/// completion is called once.
private final class Exchange: Sendable {
    private struct State {
        var completion: (@Sendable (Result<HTTPResponse, HTTPFailure>) -> Void)?
        var task: HTTPClient.Task<HTTPResponse>?
        var timer: Scheduled<Void>?
    }

    private let state: Locked<State>

    init(_ completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void) {
        state = Locked(State(completion: completion))
    }

    /// Hands over the task and the deadline's timer; stops the timer if the exchange is already over.
    func attach(task: HTTPClient.Task<HTTPResponse>, timer: Scheduled<Void>) {
        let finished = state.withLock { state in
            state.task = task
            state.timer = timer
            return state.completion == nil
        }
        if finished { timer.cancel() }
    }

    /// Calls the completion, unless it was called already.
    func finish(_ result: Result<HTTPResponse, HTTPFailure>) {
        let (completion, timer) = state.withLock { state in
            defer {
                state.completion = nil
                state.timer = nil
            }
            return (state.completion, state.timer)
        }
        timer?.cancel()
        completion?(result)
    }

    /// Cancels the request: async-http-client then closes the connection.
    func cancelTask() {
        state.withLock { $0.task }?.cancel()
    }
}

/// What `send` returns: reports `cancelled`, then stops the exchange.
private struct Cancellation: HTTPCancellable {
    let exchange: Exchange
    let url: String

    func cancel() {
        exchange.finish(.failure(HTTPFailure(.cancelled, "the request to \(url) was cancelled")))
        exchange.cancelTask()
    }
}

/// Reads one response on its event loop, stopping past the body cap.
private final class Collector: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = HTTPResponse
    let url: String
    let method: String
    let limit: Int
    // Touched on the request's event loop only.
    private var status = 0
    private var headers = HTTPFields()
    private var body: [UInt8] = []

    init(url: String, method: String, limit: Int) {
        self.url = url
        self.method = method
        self.limit = limit
    }

    func didReceiveHead(task: HTTPClient.Task<HTTPResponse>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        status = Int(head.status.code)
        headers = HTTPFields(head.headers)
        // A HEAD response, and 1xx, 204 and 304 responses, carry no body whatever the header says.
        let hasBody = method != "HEAD" && status >= 200 && status != 204 && status != 304
        if hasBody, let length = head.headers.first(name: "content-length").flatMap({ Int($0) }) {
            guard length <= limit else {
                return task.eventLoop.makeFailedFuture(
                    HTTPFailure(
                        .tooLarge,
                        "the response from \(url) is \(length) bytes (Content-Length), more than the cap of "
                            + "\(limit) bytes"))
            }
            body.reserveCapacity(length)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<HTTPResponse>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard body.count + buffer.readableBytes <= limit else {
            // A failed future ends the request; the client closes the connection.
            return task.eventLoop.makeFailedFuture(
                HTTPFailure(.tooLarge, "the response from \(url) is longer than the cap of \(limit) bytes"))
        }
        body.append(contentsOf: buffer.readableBytesView)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<HTTPResponse>) throws -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: body)
    }
}
