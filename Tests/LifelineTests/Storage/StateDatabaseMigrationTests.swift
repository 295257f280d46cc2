import Foundation
import GRDB
import Testing

@testable import Lifeline
@testable import LifelineRules

/// A state dir written before the transfers' unused validator columns were dropped: the same
/// schema and migration records an older host left, with one unfinished transfer in it.
private func makeOldStateDatabase(at path: String) throws {
    let queue = try DatabaseQueue(path: path)
    try queue.write { db in
        try db.execute(
            sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('store'), ('transfers'), ('transfer-tags');
                CREATE TABLE store (
                    plugin TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (plugin, key)
                ) WITHOUT ROWID;
                CREATE TABLE transfers (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, plugin TEXT NOT NULL, kind TEXT NOT NULL,
                    method TEXT NOT NULL, url TEXT NOT NULL, file TEXT NOT NULL, sha256 TEXT,
                    state TEXT NOT NULL, received INTEGER NOT NULL DEFAULT 0, total INTEGER, etag TEXT,
                    last_modified TEXT, attempts INTEGER NOT NULL DEFAULT 0, reason TEXT
                );
                CREATE TABLE transfer_events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, plugin TEXT NOT NULL, transfer INTEGER NOT NULL,
                    name TEXT NOT NULL, reason TEXT
                );
                ALTER TABLE transfers ADD COLUMN tag TEXT;
                INSERT INTO transfers (plugin, kind, method, url, file, state, received, total, attempts, tag)
                VALUES ('sync', 'download', 'GET', 'http://127.0.0.1:9/a', 'a.bin', 'running', 500, 1000, 2, 'nightly');
                INSERT INTO store VALUES ('sync', 'cursor', '"41"');
                """)
    }
}

@Test func anOlderStateDatabase_losesTheUnusedColumns_andKeepsItsTransfersAndStore() throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-migration-\(UUID())").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let path = folder + "/state.sqlite"
    try makeOldStateDatabase(at: path)

    let database = try StateDatabase(path: path)
    let columns = try database.read { db in try Row.fetchAll(db, sql: "PRAGMA table_info(transfers)").map { $0["name"] as String } }
    #expect(!columns.contains("etag") && !columns.contains("last_modified"), "\(columns)")
    #expect(columns.contains("tag") && columns.contains("received"))

    let unfinished = try TransferLedger(database: database).unfinished()
    #expect(unfinished.count == 1)
    #expect(unfinished.first?.received == 500 && unfinished.first?.total == 1000 && unfinished.first?.attempts == 2)
    #expect(unfinished.first?.publicID == "nightly")
    let cursor = try database.read { db in try String.fetchOne(db, sql: "SELECT value FROM store WHERE key = 'cursor'") }
    #expect(cursor == "\"41\"")
}
