import Foundation
import Lifeline
import LifelineHTTP
import Testing

// The full path of `lifeline run`: a plugin's `context.http` through the core's network layer
// (permissions, redirects, the timeout on the host's clock) to the real transport and server.

/// A plugin whose load makes one request and keeps its result.
private final class RequestPlugin: PluginInstance {
    let name = "fetcher"
    let kind = PluginKind.swift
    var preemptor: (any Preemptible)? { nil }
    private let request: HTTPRequest
    private let result: Locked<Result<HTTPResponse, HTTPFailure>?>

    init(request: HTTPRequest, result: Locked<Result<HTTPResponse, HTTPFailure>?>) {
        self.request = request
        self.result = result
    }

    func start(_ context: PluginContext) -> CallOutcome {
        let result = self.result
        _ = context.http(request) { outcome in result.value = outcome }
        return .returned
    }

    func resetPreemption() {}
    func close() {}
}

/// What one run of the host produced.
private struct HostRun: Sendable {
    /// The plugin's result; nil if none came within the real-time limit.
    var result: Result<HTTPResponse, HTTPFailure>?
    /// The report's `httpResponse` events' `error` fields ("" for a response).
    var recordedErrors: [String]
}

/// Launches a host with one plugin that makes `request` under `permissions`, on the real clock and
/// the real transport, and runs its main executor until the result is in (at most `limit` real
/// seconds). The executor runs on a thread of its own.
private func runHost(
    _ request: HTTPRequest, permissions: [String], limit: Double = 20
) async throws -> HostRun {
    let network = try NetworkPermissions(permissions)
    let transport = AsyncHTTPTransport()
    defer { transport.shutdown() }
    return await onOwnThread {
        let result = Locked<Result<HTTPResponse, HTTPFailure>?>(nil)
        let plugin = PluginDescriptor(name: "fetcher", kind: .swift, network: network) {
            RequestPlugin(request: request, result: result)
        }
        var configuration = HostConfiguration()
        configuration.logger.logLevel = .critical
        configuration.transport = transport
        let executor = MainExecutor(clock: MonotonicClock())
        let host = LifelineHost(configuration: configuration, plugins: [plugin], executor: executor)
        executor.schedule(at: executor.now) { try? host.perform(.launch) }
        executor.run(
            until: executor.now.adding(seconds: limit), shouldStop: { result.value != nil }, afterJob: host.afterJob)
        host.shutdown()
        let errors = host.recorder.timeline.filter { $0.event == "httpResponse" }.map { event -> String in
            if case .string(let kind)? = event["error"] { return kind }
            return ""
        }
        return HostRun(result: result.value, recordedErrors: errors)
    }
}

@Suite("The host's network path over AsyncHTTPTransport")
struct HostNetworkTests {
    @Test func hostFollowsRedirectsOverTheTransport() async throws {
        try await withTestServer { server in
            let run = try await runHost(HTTPRequest(url: server.url("/chain/3")), permissions: ["127.0.0.1:*"])
            let response = try #require(try run.result?.get())
            #expect(response.status == 200)
            #expect(response.text == "end of chain")
            #expect((0...3).map { server.requests("/chain/\($0)") } == [1, 1, 1, 1])
        }
    }

    @Test func redirectLoopEndsWithRedirectAfterFiveHops() async throws {
        try await withTestServer { server in
            let run = try await runHost(HTTPRequest(url: server.url("/loop")), permissions: ["127.0.0.1:*"])
            let result = try #require(run.result)
            #expect(result.failureKind == .redirect)
            // The first request and the 5 redirects followed; the 6th redirect is refused.
            #expect(server.requests("/loop") == 1 + HTTPRequest.maximumRedirects)
            #expect(run.recordedErrors == ["redirect"])
        }
    }

    @Test func hostNotPermittedFailsWithoutAConnection() async throws {
        try await withTestServer { server in
            // Only another port of the same address is allowed.
            let other = server.port == 1 ? 2 : 1
            let run = try await runHost(HTTPRequest(url: server.url("/ok")), permissions: ["127.0.0.1:\(other)"])
            let result = try #require(run.result)
            #expect(result.failureKind == .notPermitted)
            #expect(server.acceptedConnections == 0)
        }
    }

    @Test func redirectToAHostNotPermittedStopsAtThatHop() async throws {
        try await withTestServer { server in
            // /away redirects to localhost, the same server under a name the plugin may not reach.
            let run = try await runHost(HTTPRequest(url: server.url("/away")), permissions: ["127.0.0.1:*"])
            let result = try #require(run.result)
            #expect(result.failureKind == .notPermitted)
            #expect(result.failureMessage.contains("localhost"))
            #expect(server.requests("/away") == 1)
            #expect(server.requests("/ok") == 0)
        }
    }

    /// Each hop answers well within the timeout, so the transport alone would never time out; the
    /// chain as a whole takes longer, and the host's clock stops it.
    @Test func hostClockTimesOutTheWholeExchangeAcrossRedirects() async throws {
        try await withTestServer { server in
            let request = HTTPRequest(url: server.url("/chain/4?ms=300"), timeout: 0.8)
            let run = try await runHost(request, permissions: ["127.0.0.1:*"])
            let result = try #require(run.result)
            #expect(result.failureKind == .timeout)
            // The core's message, not the transport's.
            #expect(
                result.failureMessage == "no complete response from \(server.url("/chain/4?ms=300")) within 0.8 s")
            #expect(server.requests("/chain/0") == 0)
            #expect(run.recordedErrors == ["timeout"])
        }
    }
}
