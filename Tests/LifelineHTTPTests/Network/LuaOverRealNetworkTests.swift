import Foundation
import Lifeline
import LifelineHTTP
import LifelineLua
import Testing

// A Lua plugin's lifeline.http.request over the real transport, on a virtual clock: the request
// goes to a real server on 127.0.0.1, while the host's time (the budget, the expiration) stays
// virtual, so no test waits for a budget in real time.

/// Holds the LuaPlugin a descriptor made. Only touched on the test's task.
private final class Box: @unchecked Sendable { var plugin: LuaPlugin? }

private func luaPlugin(_ source: String, box: Box) throws -> (PluginDescriptor, cleanup: () -> Void) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-http-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    try source.write(toFile: dir + "/init.lua", atomically: true, encoding: .utf8)
    let descriptor = PluginDescriptor(name: "p", kind: .lua, network: try NetworkPermissions(["127.0.0.1:*"])) {
        () throws(LifelineError) -> any PluginInstance in
        let plugin = try LuaPlugin(name: "p", directory: dir, memoryLimit: PluginManifest.defaultMemoryLimit)
        box.plugin = plugin
        return plugin
    }
    return (descriptor, { try? FileManager.default.removeItem(atPath: dir) })
}

@Suite("Lua requests over the real transport")
struct LuaOverRealNetworkTests {
    @Test func expirationDuringARequest_leavesNoTaskCoroutineWaitOrConnection() async throws {
        try await withTestServer { server in
            let source = """
                lifeline.on('didEnterBackground', function()
                  lifeline.background('hang', function()
                    local ok, err = pcall(lifeline.http.request, {url = '\(server.url("/hang"))'})
                    lifeline.log.info('ended: ' .. tostring(ok) .. ' ' .. err.kind)
                  end)
                end)
                """
            let box = Box()
            let (descriptor, cleanup) = try luaPlugin(source, box: box)
            defer { cleanup() }
            let transport = AsyncHTTPTransport()
            defer { transport.shutdown() }
            var configuration = HostConfiguration()
            configuration.logger.logLevel = .critical
            configuration.transport = transport
            let executor = MainExecutor(clock: VirtualClock())
            let host = LifelineHost(configuration: configuration, plugins: [descriptor], executor: executor)
            defer { host.shutdown() }
            try host.perform(.launch)
            try host.perform(.background)
            // Run what is due now: the coroutine starts and sends the request.
            executor.run(until: executor.now, shouldStop: { false }, afterJob: host.afterJob)
            #expect(await server.wait { $0.requests("/hang") == 1 && $0.openConnections == 1 })
            #expect(host.pendingWaits == 1)
            #expect(box.plugin?.liveBackgroundWorks == 1)
            // Then let virtual time run: the task expires at 25 s, the request is cancelled.
            executor.run(shouldStop: { false }, afterJob: host.afterJob)
            #expect(host.state == .suspended)
            #expect(host.activeTasks.isEmpty)
            #expect(host.pendingWaits == 0)
            #expect(box.plugin?.liveBackgroundWorks == 0)
            let lines = host.recorder.timeline.filter { ["httpResponse", "taskEnded"].contains($0.event) }
            #expect(lines.map(\.event) == ["httpResponse", "taskEnded"])
            #expect(lines.first?["error"] == .string("expired"))
            #expect(lines.last?["expired"] == .bool(true))
            // The connection the request had open is closed.
            #expect(await server.wait { $0.openConnections == 0 })
        }
    }

    @Test func successOverTheRealTransport_reachesLua() async throws {
        try await withTestServer { server in
            let source = """
                lifeline.background('get', function()
                  local r, err = lifeline.http.request{url = '\(server.url("/ok"))'}
                  local body = lifeline.json.decode(r.body)
                  lifeline.beginBackgroundTask('got:' .. r.status .. ':' .. r.headers['content-type'])
                end)
                """
            let box = Box()
            let (descriptor, cleanup) = try luaPlugin(source, box: box)
            defer { cleanup() }
            let transport = AsyncHTTPTransport()
            defer { transport.shutdown() }
            var configuration = HostConfiguration()
            configuration.logger.logLevel = .critical
            configuration.transport = transport
            let executor = MainExecutor(clock: MonotonicClock())
            let host = LifelineHost(configuration: configuration, plugins: [descriptor], executor: executor)
            defer { host.shutdown() }
            try host.perform(.launch)
            executor.run(
                until: executor.now.adding(seconds: 20),
                shouldStop: { host.activeTasks.contains { $0.name?.hasPrefix("got:") == true } },
                afterJob: host.afterJob)
            let names = host.activeTasks.compactMap(\.name)
            #expect(names == ["got:200:application/json"], "\(host.recorder.timeline.map(\.event))")
            #expect(host.recorder.pluginErrorCount == 0)
        }
    }
}
