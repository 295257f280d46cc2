import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The store as Swift plugins and the core see it.

@Test func pluginStore_roundTripsJSONValues_andReopens() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let value = JSONValue.object([("n", .int(-7)), ("x", .number("2.5")), ("s", .string("a\"b\\\u{1}é")),
        ("list", .array([.bool(true), .null]))])
    do {
        let store = PluginStore(plugin: "p", quota: 1 << 20, database: try StateDatabase.open(stateDirectory: dir))
        try store.set("k", value)
    }
    let reopened = PluginStore(plugin: "p", quota: 1 << 20, database: try StateDatabase.open(stateDirectory: dir))
    let back = try #require(try reopened.get("k"))
    // Case by case, and as text written here by hand: `==` alone would compare the store's own
    // serialization with itself.
    #expect(sameStructure(back, value))
    #expect(back.serialized() == #"{"n":-7,"x":2.5,"s":"a\"b\\\u0001é","list":[true,null]}"#)
    #expect(try reopened.keys() == ["k"])
}

@Test func pluginStore_numbersOutsideJSON_areRefused() throws {
    try withDatabase { database in
        let store = PluginStore(plugin: "p", quota: 1 << 20, database: database)
        for text in ["0x10", "nan", "inf", "1e999", ""] {
            #expect(throws: StoreError.self, "\(text)") { try store.set("n", .number(text)) }
        }
        try store.set("n", .number("-1.5e3"))
        #expect(try store.get("n") == .number("-1.5e3"))
    }
}

@Test func pluginStore_transaction_throwing_writesNothing() throws {
    try withDatabase { database in
        let store = PluginStore(plugin: "p", quota: 1 << 20, database: database)
        struct Boom: Error {}
        func failing() throws {
            try store.set("a", .int(1))
            throw Boom()
        }
        var caught: (any Error)?
        do { try store.transaction(failing) } catch { caught = error }
        #expect(caught is Boom)
        #expect(try store.get("a") == nil)
        #expect(!store.isInTransaction)
        try store.transaction { try store.set("a", .int(2)) }
        #expect(try store.get("a") == .int(2))
    }
}

@Test func pluginStore_quota_countsKeysAndValues_acrossReopen() throws {
    try withDatabase { database in
        let store = PluginStore(plugin: "p", quota: 100, database: database)
        try store.set("k", .string(String(repeating: "x", count: 80)))  // 1 + 82 bytes
        // A fresh view of the same rows counts what is already there.
        let again = PluginStore(plugin: "p", quota: 100, database: database)
        #expect(throws: StoreError.self) { try again.set("j", .string(String(repeating: "y", count: 20))) }
        try again.set("j", .string("y"))
        // Another plugin's quota is its own.
        let other = PluginStore(plugin: "q", quota: 100, database: database)
        try other.set("k", .string(String(repeating: "z", count: 80)))
    }
}

final class StoringPlugin: SwiftPlugin {
    static let name = "storing"
    nonisolated(unsafe) static var seen: [JSONValue?] = []
    init() {}
    func load(_ context: PluginContext) throws {
        let store = try context.store()
        StoringPlugin.seen.append(try store.get("count"))
        if case .int(let n)? = try store.get("count") {
            try store.set("count", .int(n + 1))
        } else {
            try store.set("count", .int(1))
        }
    }
}

@Test func swiftPlugin_store_persistsAcrossLaunches() throws {
    try withDatabase { database in
        StoringPlugin.seen = []
        var configuration = HostConfiguration()
        configuration.database = database
        let recorder = try Simulation.run(
            scenario: try Scenario.parse("0s launch\n1s kill\n2s launch", fileName: "t"),
            plugins: [StoringPlugin.descriptor], configuration: configuration)
        #expect(recorder.pluginErrorCount == 0)
        #expect(StoringPlugin.seen == [nil, .int(1)])
    }
}

@Test(arguments: [
    ("{\"a\":[1,2.5e3,-0.5,true,false,null],\"b\":\"\\u00e9\\ud83d\\ude00\\n\"}", true),
    ("[1,2", false), ("{\"a\" 1}", false), ("tru", false), ("\"open", false), ("1 2", false),
])
func jsonParse_acceptsJSON_andRejectsTheRest(_ text: String, _ valid: Bool) throws {
    let parsed = try? JSONValue.parse(text)
    #expect((parsed != nil) == valid)
    // Foundation's parser is the independent judge of what the text holds.
    let foundation = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    #expect((foundation != nil) == valid, "Foundation agrees on what is JSON")
    guard valid, let parsed, let foundation = foundation as? NSDictionary else { return }
    let expected = JSONValue.object([
        ("a", .array([.int(1), .number("2.5e3"), .number("-0.5"), .bool(true), .bool(false), .null])),
        ("b", .string("é😀\n")),
    ])
    #expect(sameStructure(parsed, expected))
    let written = parsed.serialized()
    #expect(written == #"{"a":[1,2.5e3,-0.5,true,false,null],"b":"é😀\n"}"#)
    let reread = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? NSDictionary
    #expect(reread == foundation, "what the parser read and the writer wrote is what Foundation reads")
}
