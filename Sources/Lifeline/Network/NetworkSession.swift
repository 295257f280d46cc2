/// Plugins' HTTP requests, on the main executor. The transport makes single exchanges; this layer
/// adds what must not depend on the transport: permissions on every hop, redirects (at most
/// `HTTPRequest.maximumRedirects`), the timeout on the host's clock, and the report's `httpRequest`
/// and `httpResponse` events. simulate and run share it; only the transport differs.
///
/// Threading: main executor only. Transports call back from any thread; their results are posted
/// to the executor.
final class NetworkSession {
    typealias Completion = (Result<HTTPResponse, HTTPFailure>) -> Void
    typealias Record = (_ event: ReportEventName, _ fields: [(String, JSONValue)]) -> Void

    private let transport: any HTTPTransport
    private let executor: MainExecutor
    private let record: Record
    private var exchanges: [Int: Exchange] = [:]
    private var nextID = 1

    private final class Exchange {
        let plugin: String
        let permissions: NetworkPermissions
        let method: String
        let url: String
        var request: HTTPRequest
        var redirects = 0
        /// Counts hops, so a late answer to an earlier hop is ignored.
        var hop = 0
        var wire: (any HTTPCancellable)?
        var timeoutJob: MainExecutor.JobID?
        let completion: Completion

        init(plugin: String, permissions: NetworkPermissions, request: HTTPRequest, completion: @escaping Completion) {
            self.plugin = plugin
            self.permissions = permissions
            self.method = request.method
            self.url = request.url
            self.request = request
            self.completion = completion
        }
    }

    /// Whether the device has no network now (a `network off` step): a request then fails at
    /// once, as one made in airplane mode does.
    var isOffline: () -> Bool = { false }

    init(transport: any HTTPTransport, executor: MainExecutor, record: @escaping Record) {
        self.transport = transport
        self.executor = executor
        self.record = record
    }

    /// Requests in flight.
    var count: Int { exchanges.count }

    /// Starts a request. `completion` is called once, on a later turn of the executor, unless
    /// `cancel` comes first. Returns the request's id.
    func start(
        plugin: String, permissions: NetworkPermissions, request: HTTPRequest, completion: @escaping Completion
    ) -> Int {
        let id = nextID
        nextID += 1
        let exchange = Exchange(plugin: plugin, permissions: permissions, request: request, completion: completion)
        exchanges[id] = exchange
        record(
            .httpRequest,
            [("plugin", .string(plugin)), ("method", .string(request.method)), ("url", .string(request.url))])
        let timeout = request.timeout.isFinite && request.timeout > 0 ? request.timeout : HTTPRequest.defaultTimeout
        exchange.timeoutJob = executor.schedule(at: executor.now.adding(seconds: timeout)) { [unowned self] in
            exchanges[id]?.timeoutJob = nil
            finish(
                id,
                .failure(
                    HTTPFailure(
                        .timeout,
                        "no complete response from \(request.url) within \(ReportNumber.seconds(timeout)) s")))
        }
        // Even a failure found at once is delivered on a later turn, as every other outcome is.
        executor.schedule(at: executor.now) { [unowned self] in send(id) }
        return id
    }

    /// Stops a request; its completion is not called. `failure`, when given, is what the report
    /// records as its outcome (`expired`, `cancelled`).
    func cancel(_ id: Int, recording failure: HTTPFailure.Kind? = nil) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        exchange.wire?.cancel()
        if let job = exchange.timeoutJob { executor.cancel(job) }
        if let failure { recordResponse(exchange, .failure(HTTPFailure(failure, ""))) }
    }

    private func send(_ id: Int) {
        guard let exchange = exchanges[id] else { return }
        let request = exchange.request
        guard let url = HTTPURL(request.url) else {
            return finish(id, .failure(HTTPFailure(.connect, "'\(request.url)' is not an http:// or https:// URL")))
        }
        guard exchange.permissions.allows(host: url.host, port: url.port) else {
            let denial = NetworkPermissions.denial(plugin: exchange.plugin, host: url.host, port: url.port)
            return finish(id, .failure(HTTPFailure(.notPermitted, denial)))
        }
        if isOffline() { return finish(id, .failure(HTTPFailure(.connect, "the device has no network"))) }
        exchange.hop += 1
        let hop = exchange.hop
        let session = UncheckedSendable(self)
        let executor = UncheckedSendable(self.executor)
        exchange.wire = transport.send(request) { result in
            executor.value.post { session.value.arrived(id, hop: hop, result) }
        }
    }

    private func arrived(_ id: Int, hop: Int, _ result: Result<HTTPResponse, HTTPFailure>) {
        guard let exchange = exchanges[id], exchange.hop == hop else { return }
        exchange.wire = nil
        guard case .success(let response) = result, [301, 302, 303, 307, 308].contains(response.status),
            let location = response.headers[values: .location].first
        else { return finish(id, result) }
        exchange.redirects += 1
        guard exchange.redirects <= HTTPRequest.maximumRedirects else {
            return finish(
                id,
                .failure(
                    HTTPFailure(
                        .redirect,
                        "more than \(HTTPRequest.maximumRedirects) redirects (the last one to \(location))")))
        }
        guard let next = HTTPURL.resolve(location, against: exchange.request.url), HTTPURL(next) != nil else {
            return finish(id, .failure(HTTPFailure(.redirect, "a redirect to '\(location)', which is not an http URL")))
        }
        let from = HTTPURL(exchange.request.url)
        exchange.request.url = next
        // As browsers and URLSession do: 303, and 301/302 after a POST, continue with a GET.
        if response.status == 303 || (exchange.request.method == "POST" && [301, 302].contains(response.status)) {
            exchange.request.method = "GET"
            exchange.request.body = []
            exchange.request.headers.removeAll { NetworkSession.bodyHeaders.contains($0.name) }
        }
        // Credentials stay with the origin they were meant for (as Fetch does on a cross-origin hop).
        if let from, let to = HTTPURL(next), (from.scheme, from.host, from.port) != (to.scheme, to.host, to.port) {
            exchange.request.headers.removeAll { NetworkSession.credentialHeaders.contains($0.name) }
        }
        send(id)
    }

    static let bodyHeaders: Set<HTTPField.Name> = [.contentType, .contentLength, .contentEncoding, .transferEncoding]
    static let credentialHeaders: Set<HTTPField.Name> = [.authorization, .cookie, .proxyAuthorization]

    private func finish(_ id: Int, _ result: Result<HTTPResponse, HTTPFailure>) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        exchange.wire?.cancel()
        if let job = exchange.timeoutJob { executor.cancel(job) }
        recordResponse(exchange, result)
        exchange.completion(result)
    }

    private func recordResponse(_ exchange: Exchange, _ result: Result<HTTPResponse, HTTPFailure>) {
        var fields: [(String, JSONValue)] = [
            ("plugin", .string(exchange.plugin)), ("method", .string(exchange.method)), ("url", .string(exchange.url)),
        ]
        switch result {
        case .success(let response): fields.append(("status", .int(Int64(response.status))))
        case .failure(let failure): fields.append(("error", .string(failure.kind.rawValue)))
        }
        record(.httpResponse, fields)
    }
}

/// Carries a main-executor-only value through a `@Sendable` closure that hands it back to the main
/// executor. Only for that round trip.
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
