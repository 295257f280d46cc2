import Foundation
import GRDB

/// The host's durable state: one SQLite file, `lifeline.sqlite`, in the state dir, in WAL mode.
/// It holds each plugin's store and outlives every launch of the app, and the host.
///
/// A write returns once SQLite has committed it to the write-ahead log. With `synchronous =
/// NORMAL`, a committed write survives the host being killed (SIGKILL); only a power cut can lose
/// the last few.
///
/// Threading: main executor only (GRDB's queue serializes, but the host never shares it).
public final class StateDatabase: Sendable {
    /// The file's path; `:memory:` never, a temporary folder stands in for simulate.
    public let path: String
    /// The connection, once made: at once for a state dir that is given, on first use for a
    /// temporary one (most simulations never touch a store).
    private let connection = Locked<DatabaseQueue?>(nil)

    /// The file's name inside a state dir.
    public static let fileName = "lifeline.sqlite"

    /// Opens (and creates, or migrates) the database at `path`.
    public init(path: String) throws(LifelineError) {
        self.path = path
        _ = try connect()
    }

    private init(lazyAt path: String) { self.path = path }

    /// The connection, made (and the file created or migrated) on the first call.
    private func connect() throws(LifelineError) -> DatabaseQueue {
        if let queue = connection.withLock({ $0 }) { return queue }
        var config = Configuration()
        config.journalMode = .wal
        // Another process (`lifeline transfers`) may read while the host writes.
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            try StateDatabase.migrator.migrate(queue)
            connection.withLock { $0 = queue }
            return queue
        } catch {
            throw .badInput("cannot open the state database '\(path)': \(error)")
        }
    }

    /// Whether the database may hold anything: false for a temporary one never used yet.
    public var mayHoldData: Bool {
        connection.withLock { $0 != nil } || FileManager.default.fileExists(atPath: path)
    }

    /// The state dir that holds the file.
    public var directory: String { (path as NSString).deletingLastPathComponent }

    /// Runs `body` with a database in a new temporary state dir, removed afterwards, also when the
    /// process exits meanwhile (see `TemporaryDirectory`): simulate's and check's stores when no
    /// `--state-dir` is given.
    public static func withTemporary<T>(_ body: (StateDatabase) throws(LifelineError) -> T) throws(LifelineError) -> T {
        let directory = try TemporaryDirectory(prefix: "lifeline-state-")
        defer { directory.remove() }
        return try body(lazy(inExistingDirectory: directory.path))
    }

    /// A database in `directory`, a folder that exists and that the caller removes; the file is
    /// made on first use (most checks and simulations never touch a store).
    public static func lazy(inExistingDirectory directory: String) -> StateDatabase {
        StateDatabase(lazyAt: (directory as NSString).appendingPathComponent(fileName))
    }

    /// Opens the database of a state dir, creating the folder.
    public static func open(stateDirectory: String) throws(LifelineError) -> StateDatabase {
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        } catch {
            throw .badInput("cannot create the state dir '\(stateDirectory)': \(error.localizedDescription)")
        }
        return try StateDatabase(path: (stateDirectory as NSString).appendingPathComponent(fileName))
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("store") { db in
            try db.execute(
                sql: """
                    CREATE TABLE store (
                        plugin TEXT NOT NULL,
                        key TEXT NOT NULL,
                        value TEXT NOT NULL,
                        PRIMARY KEY (plugin, key)
                    ) WITHOUT ROWID
                    """)
        }
        m.registerMigration("transfers") { db in
            // AUTOINCREMENT: a transfer id is never reused, even after its row is gone.
            try db.execute(
                sql: """
                    CREATE TABLE transfers (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        plugin TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        method TEXT NOT NULL,
                        url TEXT NOT NULL,
                        file TEXT NOT NULL,
                        sha256 TEXT,
                        state TEXT NOT NULL,
                        received INTEGER NOT NULL DEFAULT 0,
                        total INTEGER,
                        etag TEXT,
                        last_modified TEXT,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        reason TEXT
                    );
                    CREATE TABLE transfer_events (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        plugin TEXT NOT NULL,
                        transfer INTEGER NOT NULL,
                        name TEXT NOT NULL,
                        reason TEXT
                    );
                    """)
        }
        m.registerMigration("transfer-tags") { db in
            // The id a plugin gave its transfer (`download{id = ...}`); NULL: the row's id serves.
            try db.execute(sql: "ALTER TABLE transfers ADD COLUMN tag TEXT")
        }
        m.registerMigration("transfers-without-validators") { db in
            // A partial file's validators live beside it (its `.partial` sidecar), so they always
            // describe its bytes; these columns were never written. (SQLite 3.35 and later.)
            try db.execute(
                sql: """
                    ALTER TABLE transfers DROP COLUMN etag;
                    ALTER TABLE transfers DROP COLUMN last_modified;
                    """)
        }
        m.registerMigration("system-tasks") { db in
            // Scheduled task requests, pending until they run: the system's, so a host started
            // again finds them. `earliest` is seconds since 1970; `seq` keeps submission order.
            try db.execute(
                sql: """
                    CREATE TABLE system_tasks (
                        plugin TEXT NOT NULL,
                        identifier TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        earliest REAL NOT NULL,
                        requires_network INTEGER NOT NULL,
                        requires_power INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        PRIMARY KEY (plugin, identifier)
                    ) WITHOUT ROWID
                    """)
        }
        return m
    }

    private func storeConnection() throws(StoreError) -> DatabaseQueue {
        do throws(LifelineError) {
            return try connect()
        } catch {
            throw StoreError(error.message)
        }
    }

    /// Runs `body` in one write transaction; a thrown error rolls it back.
    func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        let queue = try storeConnection()
        do {
            return try queue.write(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("the state database failed: \(error)")
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        let queue = try storeConnection()
        do {
            return try queue.read(body)
        } catch {
            throw StoreError("the state database failed: \(error)")
        }
    }
}
