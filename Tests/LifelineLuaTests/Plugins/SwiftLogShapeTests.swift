import Foundation
import Logging
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// What a program that embeds Lifeline prints through swift-log's own handler, as docs/swift-api.md
// shows it (its ```text swift-log blocks): the label, the metadata with the host's time `t`, then
// the module that logged, in brackets, then the message.

/// Collects what a StreamLogHandler writes.
private final class Lines: TextOutputStream, @unchecked Sendable {
    private let lock = NSLock()
    private var text = ""
    func write(_ string: String) { lock.withLock { text += string } }
    var all: [String] { lock.withLock { text.split(separator: "\n").map(String.init) } }
}

@Test func aLuaPluginsLine_throughSwiftLogsOwnHandler_carriesTheHostsTimeThenTheModule() throws {
    let lines = Lines()
    try withPluginFolder(["flush/init.lua": #"lifeline.on("didEnterBackground", function() print("flushed") end)"#]) { dir in
        var configuration = HostConfiguration(profile: .ios7)
        configuration.pluginLogger = { name in
            Logger(label: "plugin.\(name)") { label in StreamLogHandler(label: label, stream: lines, metadataProvider: nil) }
        }
        _ = try Simulation.run(
            scenario: try Scenario.parse("0s launch\n2s background\n1m terminate", fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir), configuration: configuration)
    }
    // The handler's timestamp first, which the docs trim.
    let shown = lines.all.map { $0.drop { $0 != " " }.dropFirst() }
    #expect(shown == ["info plugin.flush: t=2 [LifelineLua] flushed"])
}
