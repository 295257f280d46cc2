/// Stops an exchange that is under way. After `cancel()`, the transport may still call the
/// completion; the host ignores it.
public protocol HTTPCancellable: Sendable {
    func cancel()
}

/// One HTTP exchange on the wire: no redirects, no permissions, no timeout of its own beyond the
/// request's (the host applies all three). The core owns this interface; `lifeline run` plugs in
/// a real client (async-http-client), `lifeline simulate` the scenario's scripted network.
public protocol HTTPTransport: AnyObject, Sendable {
    /// Starts one exchange. Calls `completion` at most once, from any thread. It must stop reading
    /// the body past `request.maximumBodyBytes` and fail with `tooLarge`, and it must not follow
    /// redirects.
    func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable
}

/// A transport for hosts with no network: every request is refused.
public final class NoNetworkTransport: HTTPTransport {
    public init() {}
    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        completion(.failure(HTTPFailure(.connect, "this host has no network transport")))
        return NothingToCancel()
    }
}

/// A cancellable that has nothing to stop.
public struct NothingToCancel: HTTPCancellable {
    public init() {}
    public func cancel() {}
}
