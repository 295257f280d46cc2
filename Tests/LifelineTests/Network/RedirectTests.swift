import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The host follows redirects itself (the transport never does). The scripted network cannot
// answer with a Location header, so this transport stands in for a server that redirects; the
// real-server path is in LifelineHTTPTests.

/// Answers each request at once from `route` (keyed by URL), and records what was sent.
private final class RoutingTransport: HTTPTransport, @unchecked Sendable {
    let route: [String: HTTPResponse]
    let sent = Shared<[HTTPRequest]>([])
    init(_ route: [String: HTTPResponse]) { self.route = route }
    func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        sent.append(request)
        completion(route[request.url].map { .success($0) } ?? .failure(HTTPFailure(.connect, "no route")))
        return NothingToCancel()
    }
}

private func redirect(_ status: Int, to location: String) -> HTTPResponse {
    HTTPResponse(status: status, headers: [.location: location])
}

private func follow(_ request: HTTPRequest, _ transport: RoutingTransport) throws -> Result<HTTPResponse, HTTPFailure>? {
    let result = Shared<Result<HTTPResponse, HTTPFailure>?>(nil)
    var plugin = swiftPlugin("p") { context in
        _ = context.http(request) { result.value = $0 }
    }
    plugin.network = try NetworkPermissions(["a.test:*", "b.test:*"])
    var configuration = HostConfiguration(logger: quietLogger())
    configuration.transport = transport
    let executor = MainExecutor(clock: VirtualClock())
    let host = LifelineHost(configuration: configuration, plugins: [plugin], executor: executor)
    defer { host.shutdown() }
    try host.perform(.launch)
    executor.run(shouldStop: { result.value != nil }, afterJob: host.afterJob)
    return result.value
}

@Test func redirect_303AfterPost_continuesAsGetWithoutBodyOrBodyHeaders() throws {
    let transport = RoutingTransport([
        "http://a.test/submit": redirect(303, to: "/done"),
        "http://a.test/done": HTTPResponse(status: 200, body: Array("ok".utf8)),
    ])
    let request = HTTPRequest(
        method: "POST", url: "http://a.test/submit",
        headers: [.contentType: "application/json", HTTPField.Name("X-Trace")!: "1"], body: Array("{}".utf8))
    let result = try follow(request, transport)
    #expect(try result?.get().status == 200)
    let last = try #require(transport.sent.value.last)
    #expect(last.url == "http://a.test/done")
    #expect(last.method == "GET")
    #expect(last.body.isEmpty)
    #expect(last.headers == [HTTPField.Name("X-Trace")!: "1"])
}

@Test func redirect_307_keepsMethodAndBody() throws {
    let transport = RoutingTransport([
        "http://a.test/old": redirect(307, to: "http://a.test/new"),
        "http://a.test/new": HTTPResponse(status: 201),
    ])
    let result = try follow(HTTPRequest(method: "PUT", url: "http://a.test/old", body: [1, 2]), transport)
    #expect(try result?.get().status == 201)
    #expect(transport.sent.value.map(\.method) == ["PUT", "PUT"])
    #expect(transport.sent.value.last?.body == [1, 2])
}

@Test func redirect_toAnotherOrigin_dropsCredentials() throws {
    let transport = RoutingTransport([
        "http://a.test/x": redirect(302, to: "http://b.test/y"),
        "http://b.test/y": HTTPResponse(status: 200),
    ])
    let request = HTTPRequest(
        url: "http://a.test/x",
        headers: [.authorization: "Bearer t", .cookie: "s=1", .accept: "*/*"])
    _ = try follow(request, transport)
    #expect(transport.sent.value.first?.headers.count == 3)
    #expect(transport.sent.value.last?.headers == [.accept: "*/*"])
}

@Test func redirect_withinTheOrigin_keepsCredentials() throws {
    let transport = RoutingTransport([
        "http://a.test/x": redirect(301, to: "/y"),
        "http://a.test/y": HTTPResponse(status: 200),
    ])
    _ = try follow(HTTPRequest(url: "http://a.test/x", headers: [.authorization: "Bearer t"]), transport)
    #expect(transport.sent.value.last?.headers == [.authorization: "Bearer t"])
}

@Test func redirect_sixthHop_failsWithRedirect() throws {
    var route: [String: HTTPResponse] = [:]
    for i in 0..<10 { route["http://a.test/\(i)"] = redirect(302, to: "/\(i + 1)") }
    let transport = RoutingTransport(route)
    let result = try follow(HTTPRequest(url: "http://a.test/0"), transport)
    guard case .failure(let failure)? = result else { Issue.record("expected a failure"); return }
    #expect(failure.kind == .redirect)
    #expect(transport.sent.value.count == 6)  // the request and 5 redirects
}

@Test func redirect_toAHostNotPermitted_isNotPermitted() throws {
    let transport = RoutingTransport(["http://a.test/x": redirect(302, to: "http://evil.test/")])
    let result = try follow(HTTPRequest(url: "http://a.test/x"), transport)
    guard case .failure(let failure)? = result else { Issue.record("expected a failure"); return }
    #expect(failure.kind == .notPermitted)
    #expect(failure.message.contains("evil.test:80"))
    #expect(transport.sent.value.count == 1)
}
