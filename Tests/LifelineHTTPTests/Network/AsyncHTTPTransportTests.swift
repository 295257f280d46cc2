import Lifeline
import LifelineHTTP
import Testing

// The transport on its own, against a real server: one exchange each, no core above it.

/// Starts a server and a transport, runs `body`, then stops both.
private func withServer(_ body: (TestServer, AsyncHTTPTransport) async throws -> Void) async throws {
    try await withTestServer { server in
        let transport = AsyncHTTPTransport()
        defer { transport.shutdown() }
        try await body(server, transport)
    }
}

@Suite("AsyncHTTPTransport")
struct AsyncHTTPTransportTests {
    @Test func successCarriesStatusHeadersAndBody() async throws {
        try await withServer { server, transport in
            let response = try await transport.exchange(HTTPRequest(url: server.url("/ok"))).get()
            #expect(response.status == 200)
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("CONTENT-LENGTH") == "11")
            #expect(response.text == #"{"ok":true}"#)
        }
    }

    /// The pool keeps a finished exchange's connection open for the next one (which is why the
    /// tests that expect a connection to close wait for it).
    @Test func connectionIsReusedForTheNextRequest() async throws {
        try await withServer { server, transport in
            for _ in 0..<3 {
                let response = try await transport.exchange(HTTPRequest(url: server.url("/ok"))).get()
                #expect(response.status == 200)
            }
            #expect(server.acceptedConnections == 1)
            #expect(server.openConnections == 1)
        }
    }

    @Test func requestCarriesMethodHeadersAndBody() async throws {
        try await withServer { server, transport in
            let request = HTTPRequest(
                method: "put", url: server.url("/echo"), headers: [HTTPField.Name("X-Test")!: "yes"],
                body: Array("hello".utf8))
            let response = try await transport.exchange(request).get()
            #expect(response.status == 200)
            #expect(response.text == "PUT\nyes\nhello")
        }
    }

    @Test func serverErrorIsAResponseNotAFailure() async throws {
        try await withServer { server, transport in
            let response = try await transport.exchange(HTTPRequest(url: server.url("/fail"))).get()
            #expect(response.status == 500)
            #expect(response.text == "boom")
        }
    }

    @Test func slowAnswerWithinTheTimeoutArrives() async throws {
        try await withServer { server, transport in
            let request = HTTPRequest(url: server.url("/slow?ms=200"), timeout: 10)
            let response = try await transport.exchange(request).get()
            #expect(response.status == 200)
            #expect(response.text == "slow")
        }
    }

    @Test func slowAnswerPastTheTimeoutFailsWithTimeout() async throws {
        try await withServer { server, transport in
            let url = server.url("/slow?ms=5000")
            let result = await transport.exchange(HTTPRequest(url: url, timeout: 0.3))
            #expect(result.failureKind == .timeout)
            #expect(result.failureMessage.contains(url))
        }
    }

    /// async-http-client's own deadline stops at the response head; the transport's covers the body.
    @Test func bodyStalledPastTheTimeoutFailsWithTimeout() async throws {
        try await withServer { server, transport in
            // 1 s, not less: on a loaded machine (CI under a sanitizer) the head alone can take 0.3 s.
            let result = await transport.exchange(HTTPRequest(url: server.url("/stall"), timeout: 1))
            #expect(result.failureKind == .timeout)
            #expect(server.requests("/stall") == 1)
        }
    }

    @Test func refusedConnectionFailsWithConnect() async throws {
        let port = try await TestServer.closedPort()
        let transport = AsyncHTTPTransport()
        defer { transport.shutdown() }
        let url = "http://127.0.0.1:\(port)/ok"
        let result = await transport.exchange(HTTPRequest(url: url, timeout: 5))
        #expect(result.failureKind == .connect)
        #expect(result.failureMessage.contains(url))
        #expect(result.failureMessage.contains("refused"))
    }

    /// The server speaks plain HTTP: its answer to the TLS ClientHello is not a TLS record.
    @Test func tlsThatCannotBeSetUpFailsWithTLS() async throws {
        try await withServer { server, transport in
            let url = "https://127.0.0.1:\(server.port)/ok"
            let result = await transport.exchange(HTTPRequest(url: url, timeout: 5))
            #expect(result.failureKind == .tls)
            #expect(result.failureMessage.contains(url))
        }
    }

    @Test func connectionDroppedMidBodyFailsWithConnect() async throws {
        try await withServer { server, transport in
            let url = server.url("/drop")
            let result = await transport.exchange(HTTPRequest(url: url, timeout: 5))
            #expect(result.failureKind == .connect)
            #expect(result.failureMessage.contains(url))
            #expect(result.failureMessage.contains("closed before the response was complete"))
        }
    }

    @Test func bodyOverTheCapFailsWithTooLarge() async throws {
        try await withServer { server, transport in
            let url = server.url("/big")
            let result = await transport.exchange(HTTPRequest(url: url, maximumBodyBytes: 1024))
            #expect(result.failureKind == .tooLarge)
            #expect(result.failureMessage.contains(url))
            #expect(result.failureMessage.contains("Content-Length"))
        }
    }

    /// Without a Content-Length the cap is found while reading.
    @Test func chunkedBodyOverTheCapFailsWithTooLarge() async throws {
        try await withServer { server, transport in
            let url = server.url("/big?chunked=1")
            let result = await transport.exchange(HTTPRequest(url: url, maximumBodyBytes: 1024))
            #expect(result.failureKind == .tooLarge)
            #expect(result.failureMessage.contains(url))
        }
    }

    /// The body never ends: the transport must stop reading at the cap, and the connection, left in
    /// the middle of a response, must close.
    @Test func endlessBodyStopsAtTheCapAndClosesTheConnection() async throws {
        try await withServer { server, transport in
            for query in ["", "?length=1000000000"] {
                let url = server.url("/endless\(query)")
                let result = await transport.exchange(HTTPRequest(url: url, timeout: 10, maximumBodyBytes: 1024))
                #expect(result.failureKind == .tooLarge, "\(query)")
                let closed = await server.wait { $0.openConnections == 0 }
                #expect(closed, "the connection is still open (\(query))")
            }
            #expect(server.acceptedConnections == 2)
        }
    }

    @Test func bodyExactlyAtTheCapArrives() async throws {
        try await withServer { server, transport in
            for query in ["size=1024", "size=1024&chunked=1"] {
                let request = HTTPRequest(url: server.url("/big?\(query)"), maximumBodyBytes: 1024)
                let response = try await transport.exchange(request).get()
                #expect(response.body.count == 1024, "\(query)")
            }
        }
    }

    @Test func redirectIsNotFollowed() async throws {
        try await withServer { server, transport in
            let response = try await transport.exchange(HTTPRequest(url: server.url("/loop"))).get()
            #expect(response.status == 302)
            #expect(response.header("Location") == "/loop")
            #expect(server.requests("/loop") == 1)
        }
    }

    @Test func cancelReportsCancelledAndClosesTheConnection() async throws {
        try await withServer { server, transport in
            let results = Locked<[Result<HTTPResponse, HTTPFailure>]>([])
            let request = HTTPRequest(url: server.url("/hang"), timeout: 30)
            let exchange = transport.send(request) { result in results.mutate { $0.append(result) } }
            // Cancel once the request is on the wire, with its connection open.
            // (At least one: under load the pool may have a second connection on its way.)
            let arrived = await server.wait { $0.requests("/hang") == 1 && $0.openConnections >= 1 }
            try #require(arrived, "the request never arrived: \(server.openConnections) open")
            exchange.cancel()
            let closed = await server.wait { $0.openConnections == 0 }
            #expect(closed, "the connection is still open after the cancel")
            // The server can see the close before the client's callback has run: wait for it too.
            let answered = await server.wait { _ in !results.value.isEmpty }
            #expect(answered, "the exchange never completed")
            #expect(results.value.map(\.failureKind) == [.cancelled])
        }
    }

    @Test func shutdownTwiceIsHarmlessAndLaterRequestsFail() async throws {
        let transport = AsyncHTTPTransport()
        transport.shutdown()
        transport.shutdown()
        let result = await transport.exchange(HTTPRequest(url: "http://127.0.0.1:1/ok"))
        #expect(result.failureKind == .connect)
        #expect(result.failureMessage.contains("shut down"))
    }
}
