import Foundation
import GRDB
import Logging

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
    /// Whether every table is known to be empty: a new temporary state dir, or one `erase`
    /// emptied, that nothing has written to since. Reads that list rows then skip SQLite.
    private let knownEmpty = Locked(false)
    /// The warnings given about skipped rows, and where they go.
    private let damage = Locked<
        (messages: Set<String>, ordered: [String], handler: (@Sendable (String) -> Void)?)
    >(([], [], nil))

    /// The file's name inside a state dir.
    public static let fileName = "lifeline.sqlite"

    /// Opens (and creates, or migrates) the database at `path`.
    public init(path: String) throws(LifelineError) {
        self.path = path
        _ = try connect()
    }

    private init(lazyAt path: String) { self.path = path }

    /// The connection, made (and the file created or migrated) on the first call.
    ///
    /// Opening and migrating happen under the state dir's `lifeline.lock` (`StateDirectoryLock`),
    /// so processes that start together never migrate at once. A database this host cannot use is
    /// refused (exit 65): not SQLite, migrations it does not know (a newer Lifeline's, or
    /// garbage), a table of another shape than it expects.
    private func connect() throws(LifelineError) -> DatabaseQueue {
        if let queue = connection.withLock({ $0 }) { return queue }
        let lockPath = (directory as NSString).appendingPathComponent(StateDirectoryLock.openingFileName)
        guard case .taken(let lock) = try StateDirectoryLock.take(lockPath, waiting: StateDirectoryLock.openingWait)
        else {
            throw .badInput(
                "cannot open the state database '\(path)': another process has held '\(lockPath)' for "
                    + "\(Int(StateDirectoryLock.openingWait)) s while opening it")
        }
        defer { lock.release() }
        var config = Configuration()
        config.journalMode = .wal
        // Another process (`lifeline transfers`) may read while the host writes.
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            try queue.read { db in try StateDatabase.checkMigrations(db) }
            try StateDatabase.migrator.migrate(queue)
            try queue.read { db in try StateDatabase.checkShape(db) }
            connection.withLock { $0 = queue }
            return queue
        } catch let error as Unusable {
            throw .badInput("cannot use the state database '\(path)': \(error.why)")
        } catch {
            throw .badInput("cannot open the state database '\(path)': \(error)")
        }
    }

    /// Why the database cannot be used, though SQLite reads it.
    private struct Unusable: Error { let why: String }

    /// The migrations recorded must all be ones this host knows, as text: a name it does not know
    /// is a newer Lifeline's (its tables may differ), or damage.
    private static func checkMigrations(_ db: Database) throws {
        guard try db.tableExists("grdb_migrations") else { return }
        let columns = try columnNames(db, "grdb_migrations")
        guard columns == ["identifier"] else {
            throw Unusable(why: "its table grdb_migrations has the columns \(columns), not [\"identifier\"]")
        }
        let known = Set(migrator.migrations)
        let cursor = try Row.fetchCursor(db, sql: "SELECT identifier FROM grdb_migrations")
        while let row = try cursor.next() {
            let stored = StoredRow(row: row)
            let name: String
            do throws(RowDamage) {
                name = try stored.text("identifier")
            } catch {
                throw Unusable(why: "its table grdb_migrations has a row whose \(error.message)")
            }
            guard known.contains(name) else {
                throw Unusable(
                    why: "it records the migration \(stored.shown("identifier")), which this Lifeline does not know "
                        + "(a newer Lifeline made it, or it is damaged)")
            }
        }
    }

    /// The columns each table has once migrated: a table of another shape was changed by hand,
    /// and the host's reads and writes would fail on it, or read other columns.
    static let tableColumns: [(table: String, columns: [String])] = [
        ("store", ["plugin", "key", "value"]),
        (
            "transfers",
            ["id", "plugin", "kind", "method", "url", "file", "sha256", "state", "received", "total", "attempts", "reason", "tag"]
        ),
        ("transfer_events", ["seq", "plugin", "transfer", "name", "reason"]),
        ("system_tasks", ["plugin", "identifier", "kind", "earliest", "requires_network", "requires_power", "seq"]),
    ]

    private static func checkShape(_ db: Database) throws {
        for (table, expected) in tableColumns {
            let columns = try columnNames(db, table)
            guard !columns.isEmpty else { throw Unusable(why: "it has no table \(table)") }
            guard Set(columns) == Set(expected), columns.count == expected.count else {
                throw Unusable(why: "its table \(table) has the columns \(columns), not \(expected)")
            }
        }
    }

    /// A table's column names, in order; none when there is no such table.
    private static func columnNames(_ db: Database, _ table: String) throws -> [String] {
        var names: [String] = []
        let cursor = try Row.fetchCursor(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [table])
        while let row = try cursor.next() {
            do throws(RowDamage) {
                names.append(try StoredRow(row: row).text("name"))
            } catch {
                throw Unusable(why: "a column of its table \(table) has a name that \(error.why)")
            }
        }
        return names
    }

    // MARK: - Damaged rows

    /// Says that a row was skipped: once per database and message, so a row read again and again
    /// (each delivery of transfer events) warns once. The warnings go to `onWarning`'s handler,
    /// else to the log (stderr), as the host's other warnings do.
    func warnDamaged(_ message: String) {
        let text = "state database '\(path)': \(message)"
        let isNew = damage.withLock { seen in
            guard !seen.messages.contains(text), seen.messages.count < StateDatabase.maximumWarnings else { return false }
            seen.messages.insert(text)
            seen.ordered.append(text)
            return true
        }
        guard isNew else { return }
        if let handler = damage.withLock({ $0.handler }) {
            handler(text)
        } else {
            Logger(label: "lifeline").warning("\(text)")
        }
    }

    /// The most warnings one database gives; after that, damaged rows are skipped silently.
    static let maximumWarnings = 1000

    /// Sends the warnings about skipped rows to `handler` instead of the log.
    public func onWarning(_ handler: @escaping @Sendable (String) -> Void) {
        damage.withLock { $0.handler = handler }
    }

    /// The warnings about skipped rows given so far, in order.
    public var warnings: [String] { damage.withLock { $0.ordered } }

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
        let database = lazy(inExistingDirectory: directory.path)
        database.knownEmpty.withLock { $0 = true }
        return try body(database)
    }

    /// Empties the state: every row of every table, and every plugin's files. A run of `lifeline
    /// explore` starts from nothing, as a simulation in a temporary state dir does, without the
    /// cost of making and migrating a new file each time.
    public func erase() throws(LifelineError) {
        if connection.withLock({ $0 }) != nil {
            do throws(StoreError) {
                try write { db in
                    for (table, _) in StateDatabase.tableColumns { try db.execute(sql: "DELETE FROM \(table)") }
                }
            } catch {
                throw .internalError("cannot empty the state database '\(path)': \(error)")
            }
        }
        if FileManager.default.fileExists(atPath: filesRoot) {
            do {
                try FileManager.default.removeItem(atPath: filesRoot)
            } catch {
                throw .internalError("cannot empty '\(filesRoot)': \(error.localizedDescription)")
            }
        }
        knownEmpty.withLock { $0 = true }
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

    /// Claims a state dir for a live run, creating the folder: the returned lock is held until
    /// `release()` (or the process ends). A state dir another run holds is refused at once with
    /// the message of a control socket that answers (exit 65), before the database is touched.
    public static func claimForRun(stateDirectory: String) throws(LifelineError) -> StateDirectoryClaim {
        do {
            try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        } catch {
            throw .badInput("cannot create the state dir '\(stateDirectory)': \(error.localizedDescription)")
        }
        let path = (stateDirectory as NSString).appendingPathComponent(StateDirectoryLock.runFileName)
        switch try StateDirectoryLock.take(path, waiting: 0) {
        case .taken(let lock): return StateDirectoryClaim(lock: lock)
        case .held: throw ControlSocket.busy(ControlSocket.path(stateDirectory: stateDirectory))
        }
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
        knownEmpty.withLock { $0 = false }
        let queue = try storeConnection()
        do {
            return try queue.write(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("the state database failed: \(error)")
        }
    }

    /// Runs SQL as it is, in one transaction: for tests that damage a database on purpose (the
    /// CLI's tests, which cannot import GRDB).
    func execute(sql: String) throws(StoreError) {
        try write { db in try db.execute(sql: sql) }
    }

    /// `read`, for a read that lists rows: none, without opening or touching the file, while
    /// every table is known to be empty. Each launch reads the ledgers (transfers, their events,
    /// scheduled tasks) this way, so a simulation whose plugins never write never makes the file,
    /// and an explore run does not pay for reading tables it has just emptied.
    func list<T>(_ body: (Database) throws -> [T]) throws(StoreError) -> [T] {
        if knownEmpty.withLock({ $0 }) { return [] }
        return try read(body)
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
