import Foundation
import GRDB
import LifelineTesting
import Testing

@testable import Lifeline
@testable import LifelineRules

/// A real state database, damaged with SQL as someone with the file could: each table's reader
/// skips the rows it cannot read whole, naming each in a warning, and never traps.
@Suite struct StateDatabaseDamageTests {
    /// A migrated database in a fresh folder, with `sql` run on it by a connection of its own,
    /// then opened again as the host opens it; the warnings it gives are collected.
    private static func damaged(
        _ sql: String, _ body: (StateDatabase, @escaping () -> [String]) throws -> Void
    ) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-damage-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try StateDatabase.open(stateDirectory: folder)
        let queue = try DatabaseQueue(path: folder + "/" + StateDatabase.fileName)
        try queue.write { db in try db.execute(sql: sql) }
        try queue.close()
        let database = try StateDatabase.open(stateDirectory: folder)
        let warnings = Locked<[String]>([])
        database.onWarning { message in warnings.withLock { $0.append(message) } }
        try body(database) { warnings.withLock { $0 } }
    }

    private static let task = """
        INSERT INTO system_tasks VALUES ('p', 'good', 'refresh', 1767229200, 0, 1, 1);
        INSERT INTO system_tasks VALUES ('p', 'bad', 'refresh', 1767229200, 0, 0, 2);
        """

    @Test(arguments: [
        ("UPDATE system_tasks SET earliest = 'soon' WHERE identifier = 'bad'", "earliest is text instead of a number"),
        ("UPDATE system_tasks SET earliest = 1e300 WHERE identifier = 'bad'", "earliest is 1e+300, outside 0.0...100000000000.0"),
        ("UPDATE system_tasks SET earliest = 1e999 WHERE identifier = 'bad'", "earliest is inf, outside"),
        ("UPDATE system_tasks SET earliest = -1 WHERE identifier = 'bad'", "earliest is -1.0, outside"),
        ("UPDATE system_tasks SET earliest = x'00' WHERE identifier = 'bad'", "earliest is a blob instead of a number"),
        ("UPDATE system_tasks SET requires_network = 'maybe' WHERE identifier = 'bad'", "requires_network is 'maybe' instead of 0 or 1"),
        ("UPDATE system_tasks SET requires_power = 2 WHERE identifier = 'bad'", "requires_power is 2 instead of 0 or 1"),
        ("UPDATE system_tasks SET kind = x'00' WHERE identifier = 'bad'", "kind is a blob instead of text"),
    ])
    func systemTasks_aDamagedRowIsSkipped_theOthersRead(_ sql: String, _ why: String) throws {
        try Self.damaged(Self.task + sql) { database, warnings throws in
            let all = try SystemTaskLedger(database: database).all()
            #expect(all.map(\.request.identifier) == ["good"])
            #expect(all.first?.request.requiresPower == true && all.first?.earliest == 1767229200)
            #expect(warnings().count == 1, "\(warnings())")
            #expect(warnings().first?.contains("skipped system_tasks row (plugin 'p', identifier 'bad'): \(why)") == true, "\(warnings())")
        }
    }

    @Test func systemTasks_textThatIsNotWhole_isSkipped() throws {
        try Self.damaged(
            Self.task + """
                UPDATE system_tasks SET plugin = CAST(x'ff' AS TEXT) WHERE identifier = 'bad';
                INSERT INTO system_tasks VALUES ('p', CAST(x'6100' AS TEXT), 'refresh', 0, 0, 0, 3);
                INSERT INTO system_tasks VALUES ('p', CAST(x'c3' AS TEXT), 'refresh', 0, 0, 0, 4);
                """
        ) { database, warnings throws in
            #expect(try SystemTaskLedger(database: database).all().map(\.request.identifier) == ["good"])
            let text = warnings().joined(separator: "\n")
            #expect(text.contains("(plugin x'ff', identifier 'bad'): plugin is not valid UTF-8"), "\(text)")
            #expect(text.contains("(plugin 'p', identifier x'6100'): identifier holds a NUL byte"), "\(text)")
            #expect(text.contains("(plugin 'p', identifier x'c3'): identifier is not valid UTF-8"), "\(text)")
        }
    }

    private static let transfer = """
        INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts, tag)
        VALUES ('p', 'download', 'GET', 'http://127.0.0.1:9/a', 'a.bin', 'running', 5, 10, 1, 'good');
        INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts)
        VALUES ('p', 'download', 'GET', 'http://127.0.0.1:9/b', 'b.bin', 'running', 0, NULL, 0);
        """

    @Test(arguments: [
        ("UPDATE transfers SET received = -5 WHERE id = 2", "received is -5, outside 0...9007199254740992"),
        ("UPDATE transfers SET received = 'lots' WHERE id = 2", "received is text instead of an integer"),
        ("UPDATE transfers SET received = 2.5 WHERE id = 2", "received is a real number instead of an integer"),
        ("UPDATE transfers SET total = 4611686018427387904 WHERE id = 2", "total is 4611686018427387904, outside 0...9007199254740992"),
        ("UPDATE transfers SET attempts = -1 WHERE id = 2", "attempts is -1, outside 0...1000000"),
        ("UPDATE transfers SET attempts = 9223372036854775807 WHERE id = 2", "attempts is 9223372036854775807, outside 0...1000000"),
        ("UPDATE transfers SET kind = 'sideways' WHERE id = 2", "kind is 'sideways', a name this Lifeline does not know"),
        ("UPDATE transfers SET state = 'paused' WHERE id = 2", "state is 'paused', a name this Lifeline does not know"),
        ("UPDATE transfers SET file = CAST(x'622e62696e00' AS TEXT) WHERE id = 2", "file holds a NUL byte"),
        ("UPDATE transfers SET plugin = x'70' WHERE id = 2", "plugin is a blob instead of text"),
        ("UPDATE transfers SET url = x'75' WHERE id = 2", "url is a blob instead of text"),
    ])
    func transfers_aDamagedRowIsSkipped(_ sql: String, _ why: String) throws {
        try Self.damaged(Self.transfer + sql) { database, warnings throws in
            let ledger = TransferLedger(database: database)
            #expect(try ledger.transfers().map(\.id) == [1])
            #expect(try ledger.unfinished().map(\.publicID) == ["good"])
            #expect(try ledger.transfers(plugin: "p").map(\.id) == [1])
            // Read three times, warned once.
            #expect(warnings() == ["state database '\(database.path)': skipped transfers row id 2: \(why)"], "\(warnings())")
        }
    }

    @Test func transferEvents_aDamagedRowIsSkipped_andItsPluginToo() throws {
        try Self.damaged(
            Self.transfer + """
                INSERT INTO transfer_events (plugin, transfer, name) VALUES ('p', 1, 'transferDidFinish');
                INSERT INTO transfer_events (plugin, transfer, name) VALUES ('p', 1, 'transferDidExplode');
                INSERT INTO transfer_events (plugin, transfer, name) VALUES (CAST(x'ff' AS TEXT), 1, 'transferDidFail');
                INSERT INTO transfer_events (plugin, transfer, name) VALUES ('p', 2, 'transferDidFail');
                UPDATE transfers SET tag = CAST(x'7400' AS TEXT) WHERE id = 2;
                """
        ) { database, warnings throws in
            let ledger = TransferLedger(database: database)
            #expect(try ledger.pendingEvents(plugin: "p").map(\.seq) == [1])
            #expect(try ledger.pluginsWithPendingEvents() == ["p"])
            #expect(try ledger.pendingEventCount() == 4)
            let text = warnings().joined(separator: "\n")
            #expect(text.contains("skipped transfer_events row seq 2: name is 'transferDidExplode'"), "\(text)")
            #expect(text.contains("skipped transfer_events row seq 4: transfer_id holds a NUL byte"), "\(text)")
            #expect(text.contains("skipped transfer_events row seq 3: plugin is not valid UTF-8"), "\(text)")
        }
    }

    @Test func store_aDamagedValueReadsAsNone_andSetReplacesIt_withinTheQuota() throws {
        try Self.damaged(
            """
            INSERT INTO store VALUES ('p', 'nul', CAST(x'5b315d0078' AS TEXT));
            INSERT INTO store VALUES ('p', 'notjson', '{oops');
            INSERT INTO store VALUES ('p', 'blob', x'5b315d');
            INSERT INTO store VALUES ('p', 'latin', CAST(x'22e922' AS TEXT));
            INSERT INTO store VALUES ('p', CAST(x'757365720061' AS TEXT), '1');
            INSERT INTO store VALUES ('p', CAST(x'ff' AS TEXT), '2');
            INSERT INTO store VALUES ('p', x'6b', '3');
            """
        ) { database, warnings throws in
            let store = PluginStore(plugin: "p", quota: 100, database: database)
            for key in ["nul", "notjson", "blob", "latin"] { #expect(try store.get(key) == nil, "\(key)") }
            // A key with a NUL is legitimate: set through the API, it reads back whole.
            #expect(try store.get("user\0a") == .int(1))
            #expect(try store.keys() == ["blob", "latin", "notjson", "nul", "user\0a"])
            let text = warnings().joined(separator: "\n")
            #expect(text.contains("skipped store row (plugin 'p', key 'nul'): value holds a NUL byte"), "\(text)")
            #expect(text.contains("skipped store row (plugin 'p', key 'notjson'): value is not JSON"), "\(text)")
            #expect(text.contains("skipped store row (plugin 'p', key 'latin'): value is not valid UTF-8"), "\(text)")
            #expect(text.contains("skipped store row (plugin 'p', key x'ff'): key is not valid UTF-8"), "\(text)")
            #expect(text.contains("skipped store row (plugin 'p', key x'6b'): key is a blob instead of text"), "\(text)")
            // Replacing a damaged value counts its old bytes out: usage stays what SQLite counts.
            #expect(try store.delete("notjson"))
            try store.set("nul", .int(7))
            #expect(try store.get("nul") == .int(7))
            let counted = try database.read { db in
                try Int.fetchOne(
                    db, sql: "SELECT SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))) FROM store WHERE plugin = 'p'")
            }
            try store.set("fill", .string(String(repeating: "x", count: 100 - (counted ?? 0) - 4 - 2)))
            #expect(throws: StoreError.self) { try store.set("more", .int(1)) }
        }
    }

    @Test func readAll_readsEveryTable_ofADamagedDatabase() throws {
        try Self.damaged(
            Self.task + Self.transfer + """
                UPDATE system_tasks SET earliest = 'soon' WHERE identifier = 'bad';
                UPDATE transfers SET received = -1 WHERE id = 2;
                INSERT INTO transfer_events (plugin, transfer, name) VALUES ('p', 1, 'transferDidFinish');
                INSERT INTO transfer_events (plugin, transfer, name) VALUES ('p', 1, 7);
                INSERT INTO store VALUES ('p', 'k', '[1]');
                INSERT INTO store VALUES (CAST(x'ff' AS TEXT), 'k', '[1]');
                """
        ) { database, _ throws in
            let contents = try database.readAll()
            #expect(contents.storeRows == 1)
            #expect(contents.transfers.map(\.id) == [1])
            #expect(contents.transferEvents.map(\.seq) == [1])
            #expect(contents.pluginsWithEvents == ["p"])
            #expect(contents.taskRequests.map(\.identifier) == ["good"])
            #expect(contents.warnings.count == 4, "\(contents.warnings)")
        }
    }

    @Test(arguments: [
        ("INSERT INTO grdb_migrations VALUES ('from-the-future')", "it records the migration 'from-the-future'"),
        ("INSERT INTO grdb_migrations VALUES (CAST(x'ff' AS TEXT))", "identifier is not valid UTF-8"),
        ("INSERT INTO grdb_migrations VALUES (CAST(x'73746f726500' AS TEXT))", "identifier holds a NUL byte"),
        ("DROP TABLE grdb_migrations; CREATE TABLE grdb_migrations (identifier); INSERT INTO grdb_migrations VALUES (NULL)",
         "identifier is NULL instead of text"),
        ("DROP TABLE grdb_migrations; CREATE TABLE grdb_migrations (name TEXT)", "grdb_migrations has the columns [\"name\"]"),
        ("DROP TABLE grdb_migrations", "table store already exists"),
        ("DROP TABLE store; CREATE TABLE store (plugin, key)", "its table store has the columns [\"plugin\", \"key\"]"),
        ("DROP TABLE transfer_events", "it has no table transfer_events"),
    ])
    func aDatabaseTheHostCannotUse_isRefusedAsBadInput(_ sql: String, _ message: String) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-damage-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try StateDatabase.open(stateDirectory: folder)
        let queue = try DatabaseQueue(path: folder + "/" + StateDatabase.fileName)
        try queue.write { db in try db.execute(sql: sql) }
        try queue.close()
        do {
            _ = try StateDatabase.open(stateDirectory: folder)
            Issue.record("opened")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    @Test func notADatabase_isRefusedAsBadInput() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-damage-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(
            to: URL(fileURLWithPath: folder + "/" + StateDatabase.fileName))
        #expect(throws: LifelineError.self) { _ = try StateDatabase.open(stateDirectory: folder) }
        do {
            _ = try StateDatabase.open(stateDirectory: folder).readAll()
        } catch {
            #expect(error.exitCode == 65 && error.message.contains("not a database"), "\(error.message)")
        }
    }

    @Test func aStateDirALiveRunHolds_isRefusedToASecondRun_andFreedAfter() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-claim-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let claim = try StateDatabase.claimForRun(stateDirectory: folder)
        do {
            _ = try StateDatabase.claimForRun(stateDirectory: folder)
            Issue.record("claimed twice")
        } catch {
            #expect(error.exitCode == 65)
            #expect(error.message.contains("another lifeline run is listening on \(folder)/control.sock"), "\(error.message)")
        }
        // A reader opens the database beside the run.
        #expect(try StateDatabase.open(stateDirectory: folder).readAll().transfers.isEmpty)
        claim.release()
        try StateDatabase.claimForRun(stateDirectory: folder).release()
    }
}
