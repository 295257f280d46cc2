import GRDB

/// One background transfer as the host keeps it.
public struct TransferRecord: Equatable, Sendable {
    public enum Kind: String, Sendable { case download, upload }
    public enum State: String, Sendable {
        case queued, running, finished, failed, cancelled
        /// Whether the transfer is over.
        public var isFinal: Bool { self == .finished || self == .failed || self == .cancelled }
    }

    /// Unique for the state dir's life, never reused.
    public var id: Int64
    public var plugin: String
    public var kind: Kind
    public var method: String
    public var url: String
    /// The file's name, relative to the plugin's files folder.
    public var file: String
    /// The expected SHA-256 of a download, lowercase hex.
    public var sha256: String?
    public var state: State
    /// Bytes in the partial file (download) or sent (upload).
    public var received: Int64
    /// The whole size, once known.
    public var total: Int64?
    /// Attempts made.
    public var attempts: Int
    /// Why it failed or was cancelled.
    public var reason: String?
    /// The id the plugin gave it, if any.
    public var tag: String? = nil

    /// The id plugins see: the one the plugin gave, else the row's number.
    public var publicID: String { tag ?? String(id) }
}

/// A completion event waiting for its plugin's handler: removed only once the handler returned,
/// so each is delivered at least once.
public struct TransferEventRecord: Equatable, Sendable {
    public var seq: Int64
    public var plugin: String
    public var transfer: Int64
    /// `transferDidFinish` or `transferDidFail`.
    public var name: String
    public var reason: String?
    /// The transfer's id as plugins see it (`TransferRecord.publicID`).
    public var transferID: String
}

/// The transfers and their undelivered events, in the state dir's database. A change of state
/// and the event it makes are written in one SQLite transaction: a host killed in between loses
/// neither.
///
/// Threading: main executor only.
public final class TransferLedger {
    private let database: StateDatabase

    public init(database: StateDatabase) { self.database = database }

    /// Records a new transfer, queued.
    public func add(
        plugin: String, kind: TransferRecord.Kind, method: String, url: String, file: String, sha256: String?,
        tag: String? = nil
    ) throws(StoreError) -> TransferRecord {
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO transfers (plugin, kind, method, url, file, sha256, state, tag)
                    VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)
                    """, arguments: [plugin, kind.rawValue, method, url, file, sha256, tag])
            return TransferRecord(
                id: db.lastInsertedRowID, plugin: plugin, kind: kind, method: method, url: url, file: file,
                sha256: sha256, state: .queued, received: 0, total: nil, attempts: 0,
                reason: nil, tag: tag)
        }
    }

    /// Saves a transfer's progress or state. The change into a final state also queues its event,
    /// in the same transaction: `transferDidFinish`, or `transferDidFail` with the reason. A
    /// transfer that is over already is not changed again, so it never makes a second event.
    public func save(_ record: TransferRecord) throws(StoreError) {
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE transfers SET state = ?, received = ?, total = ?,
                        attempts = ?, reason = ? WHERE id = ? AND state NOT IN ('finished', 'failed', 'cancelled')
                    """,
                arguments: [
                    record.state.rawValue, record.received, record.total,
                    record.attempts, record.reason, record.id,
                ])
            guard record.state.isFinal, db.changesCount > 0 else { return }
            try db.execute(
                sql: "INSERT INTO transfer_events (plugin, transfer, name, reason) VALUES (?, ?, ?, ?)",
                arguments: [
                    record.plugin, record.id, record.state == .finished ? "transferDidFinish" : "transferDidFail",
                    record.reason,
                ])
        }
    }

    /// The transfers of `plugin` (every plugin's when nil), oldest first.
    public func transfers(plugin: String? = nil) throws(StoreError) -> [TransferRecord] {
        try database.read { db in
            let rows =
                if let plugin {
                    try Row.fetchAll(db, sql: "SELECT * FROM transfers WHERE plugin = ? ORDER BY id", arguments: [plugin])
                } else {
                    try Row.fetchAll(db, sql: "SELECT * FROM transfers ORDER BY id")
                }
            return rows.map(TransferLedger.record)
        }
    }

    /// The transfers that are not over, oldest first: what a host resumes when it starts.
    public func unfinished() throws(StoreError) -> [TransferRecord] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM transfers WHERE state IN ('queued', 'running') ORDER BY id")
                .map(TransferLedger.record)
        }
    }

    /// The events waiting for `plugin`, in the order they happened.
    public func pendingEvents(plugin: String) throws(StoreError) -> [TransferEventRecord] {
        try database.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT e.*, COALESCE(t.tag, CAST(e.transfer AS TEXT)) AS transfer_id
                    FROM transfer_events e LEFT JOIN transfers t ON t.id = e.transfer
                    WHERE e.plugin = ? ORDER BY e.seq
                    """, arguments: [plugin]
            ).map(TransferLedger.event)
        }
    }

    /// The plugins that have events waiting, by name.
    public func pluginsWithPendingEvents() throws(StoreError) -> [String] {
        try database.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT plugin FROM transfer_events ORDER BY plugin")
        }
    }

    /// How many events wait for delivery, all plugins together.
    public func pendingEventCount() throws(StoreError) -> Int {
        try database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM transfer_events") ?? 0 }
    }

    /// Removes a delivered event: call once its handler has returned.
    public func acknowledge(_ seq: Int64) throws(StoreError) {
        try database.write { db in try db.execute(sql: "DELETE FROM transfer_events WHERE seq = ?", arguments: [seq]) }
    }

    private static func record(_ row: Row) -> TransferRecord {
        TransferRecord(
            id: row["id"], plugin: row["plugin"], kind: TransferRecord.Kind(rawValue: row["kind"]) ?? .download,
            method: row["method"], url: row["url"], file: row["file"], sha256: row["sha256"],
            state: TransferRecord.State(rawValue: row["state"]) ?? .failed, received: row["received"],
            total: row["total"], attempts: row["attempts"],
            reason: row["reason"], tag: row["tag"])
    }

    private static func event(_ row: Row) -> TransferEventRecord {
        TransferEventRecord(
            seq: row["seq"], plugin: row["plugin"], transfer: row["transfer"], name: row["name"], reason: row["reason"],
            transferID: row["transfer_id"])
    }
}
