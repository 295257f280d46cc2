import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The transfer calls from a Swift plugin, on simulate's scripted network.

private final class Fetcher: SwiftPlugin {
    static let name = "fetcher"
    nonisolated(unsafe) static var heard: [String] = []
    init() {}
    func load(_ context: PluginContext) throws {
        context.on(.transferDidFinish) { event in Fetcher.heard.append("finish \(event.transfer?.id ?? "?")") }
        context.on(.transferDidFail) { event in
            Fetcher.heard.append("fail \(event.transfer?.id ?? "?") \(event.transfer?.reason ?? "?")")
        }
        context.on(.didFinishLaunching) { _ in
            let id = try context.download(url: "http://example.org/a.bin", to: "a.bin", id: "a")
            let up = try context.upload(url: "http://example.org/up", from: "a.bin", method: "POST")
            Fetcher.heard.append("started \(id) \(up)")
            Fetcher.heard.append("listed " + (try context.transfers().map { "\($0.publicID):\($0.state.rawValue)" }
                .joined(separator: ",")))
            Fetcher.heard.append("cancel \(try context.cancelTransfer(up)) \(try context.cancelTransfer("nope"))")
            do {
                _ = try context.download(url: "http://example.org/a.bin", to: "../escape")
            } catch let error as TransferError {
                Fetcher.heard.append("refused: \(error.message)")
            }
        }
    }
}

@Test func swiftPlugin_downloadsListsCancels_andHearsTheEvents() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swift-transfer-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    // The upload's file must exist when it is started.
    try FileManager.default.createDirectory(atPath: dir + "/files/fetcher", withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: dir + "/files/fetcher/a.bin", contents: Data("old".utf8))
    var descriptor = Fetcher.descriptor
    descriptor.network = try NetworkPermissions(["example.org:*"])
    var configuration = HostConfiguration()
    configuration.database = try StateDatabase.open(stateDirectory: dir)
    Fetcher.heard = []
    let recorder = try Simulation.run(
        scenario: try Scenario.parse(
            "0s http GET example.org/a.bin -> 200 size=1MB rate=1MB/s\n0s launch", fileName: "t.scenario"),
        plugins: [descriptor], configuration: configuration)
    #expect(recorder.pluginErrorCount == 0)
    // The download writes its own partial file, so the upload's "a.bin" is read as it was.
    #expect(
        Fetcher.heard == [
            "started a 2", "listed a:running,2:running", "cancel true false",
            "refused: '../escape' leaves the plugin's files folder ('..' is not allowed)",
            "fail 2 cancelled", "finish a",
        ])
    #expect((try? FileManager.default.attributesOfItem(atPath: dir + "/files/fetcher/a.bin"))?[.size] as? Int == 1_000_000)
}
