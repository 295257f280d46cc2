import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

/// Answers every request with `response`, and keeps what was sent.
private final class AnsweringTransport: HTTPTransport, @unchecked Sendable {
    let response: HTTPResponse
    let sent = Shared<[HTTPRequest]>([])
    init(_ response: HTTPResponse) { self.response = response }
    func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        sent.append(request)
        completion(.success(response))
        return NothingToCancel()
    }
}

/// Runs plugin "p" (`source`, with `markPrelude`) against `transport` until it marks "done".
private func run(_ source: String, _ transport: AnsweringTransport) throws -> [String] {
    let files = [
        "p/init.lua": markPrelude + source,
        "p/plugin.toml": "[permissions]\nnetwork = [\"a.test:*\"]\n",
    ]
    return try withPluginFolder(files) { dir in
        var configuration = HostConfiguration(logger: quietLogger())
        configuration.transport = transport
        let executor = MainExecutor(clock: VirtualClock())
        let host = LifelineHost(
            configuration: configuration, plugins: try LuaPluginLoader.descriptors(in: dir), executor: executor)
        defer { host.shutdown() }
        try host.perform(.launch)
        executor.run(shouldStop: { marks(host.recorder).last == "done" }, afterJob: host.afterJob)
        return marks(host.recorder)
    }
}

@Test func requestHeaders_goOutInNameOrderWithTheirCaseAndValuesAsWritten() throws {
    let transport = AnsweringTransport(HTTPResponse(status: 204))
    _ = try run(
        """
        lifeline.background(nil, function()
          lifeline.http.request{url = 'http://a.test/', headers = {['x-a'] = '1', ['X-B'] = ' 2\\t', Accept = 'a\\1b'}}
          mark('done')
        end)
        """, transport)
    let sent = try #require(transport.sent.value.first)
    #expect(sent.headers.map(\.name.rawName) == ["Accept", "X-B", "x-a"])
    #expect(sent.headers.map(\.value) == ["a\u{1}b", " 2\t", "1"])
}

@Test func responseHeaders_reachLuaLowercasedWithRepeatsJoinedInOrder() throws {
    var headers: HTTPFields = [:]
    headers.append(HTTPField(name: HTTPField.Name("Set-Cookie")!, value: "a=1"))
    headers.append(HTTPField(name: HTTPField.Name("content-TYPE")!, value: "text/plain"))
    headers.append(HTTPField(name: HTTPField.Name("set-cookie")!, value: "b=2"))
    headers.append(HTTPField(name: HTTPField.Name("Cookie")!, value: "c=3"))
    headers.append(HTTPField(name: HTTPField.Name("cookie")!, value: "d=4"))
    let result = try run(
        """
        lifeline.background(nil, function()
          local r = lifeline.http.request{url = 'http://a.test/'}
          local names = {}
          for name in pairs(r.headers) do names[#names + 1] = name end
          table.sort(names)
          for _, name in ipairs(names) do mark(name .. '=' .. r.headers[name]) end
          mark('done')
        end)
        """, AnsweringTransport(HTTPResponse(status: 200, headers: headers)))
    #expect(result == ["content-type=text/plain", "cookie=c=3, d=4", "set-cookie=a=1, b=2", "done"])
}
