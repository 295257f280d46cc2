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
            let event: LifecycleEventName = record.state == .finished ? .transferDidFinish : .transferDidFail
            try db.execute(
                sql: "INSERT INTO transfer_events (plugin, transfer, name, reason) VALUES (?, ?, ?, ?)",
                arguments: [
                    record.plugin, record.id, event.rawValue, record.reason,
                ])
        }
    }

    /// The transfers of `plugin` (every plugin's when nil), oldest first. A row the host cannot
    /// read whole is skipped, with a warning (`StoredRow`).
    public func transfers(plugin: String? = nil) throws(StoreError) -> [TransferRecord] {
        try database.list { [database] db in
            if let plugin {
                try database.readRows(
                    db, table: "transfers", sql: "SELECT * FROM transfers WHERE plugin = ? ORDER BY id",
                    arguments: [plugin], name: TransferLedger.rowName, TransferLedger.record)
            } else {
                try database.readRows(
                    db, table: "transfers", sql: "SELECT * FROM transfers ORDER BY id", name: TransferLedger.rowName,
                    TransferLedger.record)
            }
        }
    }

    /// The transfers that are not over, oldest first: what a host resumes when it starts.
    public func unfinished() throws(StoreError) -> [TransferRecord] {
        try database.list { [database] db in
            try database.readRows(
                db, table: "transfers", sql: "SELECT * FROM transfers WHERE state IN ('queued', 'running') ORDER BY id",
                name: TransferLedger.rowName, TransferLedger.record)
        }
    }

    /// The events waiting for `plugin` (every plugin's when nil), in the order they happened.
    public func pendingEvents(plugin: String?) throws(StoreError) -> [TransferEventRecord] {
        let filter = plugin == nil ? "" : "WHERE e.plugin = ?"
        return try database.list { [database] db in
            try database.readRows(
                db, table: "transfer_events",
                sql: """
                    SELECT e.*, COALESCE(t.tag, CAST(e.transfer AS TEXT)) AS transfer_id
                    FROM transfer_events e LEFT JOIN transfers t ON t.id = e.transfer
                    \(filter) ORDER BY e.seq
                    """, arguments: plugin.map { [$0] } ?? [], name: { "seq \($0.shown("seq"))" }, TransferLedger.event)
        }
    }

    /// The plugins that have events waiting, by name. A name that is not text the host could have
    /// written is skipped, with a warning: no plugin has it.
    public func pluginsWithPendingEvents() throws(StoreError) -> [String] {
        try database.list { [database] db in
            try database.readRows(
                db, table: "transfer_events",
                sql: "SELECT plugin, MIN(seq) AS seq FROM transfer_events GROUP BY plugin ORDER BY plugin",
                name: { "seq \($0.shown("seq"))" }, { row throws(RowDamage) in try row.text("plugin") })
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

    /// The most bytes a transfer's `received` and `total` may say: 2^53, which a `Double` holds
    /// exactly, so no figure read back overflows or traps when the host computes with it.
    public static let maximumBytes: Int64 = 1 << 53
    /// The most attempts a row may count.
    public static let maximumAttempts: Int64 = 1_000_000

    private static func rowName(_ row: StoredRow) -> String { "id \(row.shown("id"))" }

    private static func record(_ row: StoredRow) throws(RowDamage) -> TransferRecord {
        TransferRecord(
            id: try row.integer("id", in: 1...Int64.max), plugin: try row.text("plugin"),
            kind: try row.name("kind", as: TransferRecord.Kind.self), method: try row.text("method"),
            url: try row.text("url"), file: try row.text("file"), sha256: try row.optionalText("sha256"),
            state: try row.name("state", as: TransferRecord.State.self),
            received: try row.integer("received", in: 0...maximumBytes),
            total: try row.optionalInteger("total", in: 0...maximumBytes),
            attempts: Int(try row.integer("attempts", in: 0...maximumAttempts)),
            reason: try row.optionalText("reason"), tag: try row.optionalText("tag"))
    }

    private static func event(_ row: StoredRow) throws(RowDamage) -> TransferEventRecord {
        let name = try row.text("name")
        let delivered: [LifecycleEventName] = [.transferDidFinish, .transferDidFail]
        guard delivered.contains(where: { $0.rawValue == name }) else {
            throw RowDamage(column: "name", why: "is \(row.shown("name")), an event this Lifeline does not know")
        }
        return TransferEventRecord(
            seq: try row.integer("seq", in: 1...Int64.max), plugin: try row.text("plugin"),
            transfer: try row.integer("transfer", in: 1...Int64.max), name: name,
            reason: try row.optionalText("reason"), transferID: try row.text("transfer_id"))
    }
}
