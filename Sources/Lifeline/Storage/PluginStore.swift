import Foundation
import GRDB

/// One plugin's durable key-value store: `lifeline.store` in Lua, `context.store` in Swift.
///
/// - Values are JSON values: strings, numbers, booleans, and tables (arrays and objects) of them.
/// - Each plugin sees only its own keys: every row carries the plugin's name.
/// - A quota bounds what a plugin keeps: the bytes of its keys and values (as JSON text) together.
/// - Outside a transaction, each `set` and `delete` is its own SQLite transaction: when it returns,
///   the change is in the database and survives the host being killed.
/// - A transaction collects the changes in memory and writes them at `commit`, all or nothing, so
///   no database lock is held while plugin code runs. Reads inside it see its own changes.
///
/// Threading: main executor only.
public final class PluginStore {
    public let plugin: String
    /// Bytes of keys and values the plugin may keep; a reload sets the changed plugin.toml's.
    public internal(set) var quota: Int
    private let database: StateDatabase
    /// Bytes the committed rows use; read from the database on first need, then kept up to date.
    private var committedUsage: Int?
    /// An open transaction: each changed key's new JSON text, or nil where it was deleted. Keyed
    /// by the key's bytes, as SQLite compares them (Swift's `String` equality would merge keys that
    /// are canonically equivalent but stored apart).
    private var pending: [[UInt8]: (key: String, text: String?)]?
    /// The usage the open transaction would leave.
    private var pendingUsage = 0

    /// The quota of a plugin whose plugin.toml sets none: 10 MiB.
    public static let defaultQuota = 10 * 1024 * 1024
    /// The longest key, in bytes.
    public static let maximumKeyLength = 1024

    init(plugin: String, quota: Int, database: StateDatabase) {
        self.plugin = plugin
        self.quota = quota
        self.database = database
    }

    /// Whether a transaction is open.
    public var isInTransaction: Bool { pending != nil }

    /// The value stored under `key`, or nil. A row the host cannot read whole (its value is not
    /// JSON text) reads as no value, with a warning naming it; `set` replaces it.
    public func get(_ key: String) throws(StoreError) -> JSONValue? {
        if let pending, let change = pending[Array(key.utf8)] {
            // The transaction's own text, made by `set` from a value it checked.
            guard let text = change.text else { return nil }
            return try? JSONValue.parse(text)
        }
        let plugin = self.plugin
        return try database.read { [database] db in
            try database.readRows(
                db, table: "store", sql: "SELECT plugin, key, value FROM store WHERE plugin = ? AND key = CAST(? AS TEXT)",
                arguments: [plugin, PluginStore.bound(key)], name: PluginStore.rowName, PluginStore.value
            ).first
        }
    }

    /// The JSON text stored under `key` (nil: no such key), for a reader that decodes it itself
    /// (`lifeline.store.get` decodes it straight into Lua). `fits` is asked first, with the text's
    /// length in bytes, whether it may be read at all: false gives `.tooLarge`, having read nothing.
    package func storedJSON(_ key: String, fits: (Int) -> Bool) throws(StoreError) -> StoredJSON {
        if let pending, let change = pending[Array(key.utf8)] {
            guard let text = change.text else { return .missing }
            return fits(text.utf8.count) ? .text(text) : .tooLarge
        }
        guard let length = try storedSize(key) else { return .missing }
        guard fits(length) else { return .tooLarge }
        let plugin = self.plugin
        // Straight from SQLite's copy of the value into the text, with no row between (`StoredRow`
        // reads the bytes in place). A value that is not text, holds a NUL or is not UTF-8 (GRDB's
        // `String` would cut it or repair it) reads as no value, with a warning.
        let text = try database.read { [database] db in
            try database.readRows(
                db, table: "store", sql: "SELECT plugin, key, value FROM store WHERE plugin = ? AND key = CAST(? AS TEXT)",
                arguments: [plugin, PluginStore.bound(key)], name: PluginStore.rowName
            ) { row throws(RowDamage) in try row.text("value") }.first
        }
        return text.map { .text($0) } ?? .missing
    }

    /// What `storedJSON` found.
    package enum StoredJSON {
        case text(String)
        case missing
        case tooLarge
    }

    /// Stores `value` under `key`. Throws, and changes nothing, when the plugin's quota would be
    /// exceeded.
    public func set(_ key: String, _ value: JSONValue) throws(StoreError) {
        try check(key)
        try check(value, depth: 0)
        try put(key, value.serialized())
    }

    /// Deletes `key`. Returns whether it was there.
    @discardableResult
    public func delete(_ key: String) throws(StoreError) -> Bool {
        try put(key, nil)
    }

    /// The keys that start with `prefix`, in byte order.
    public func keys(prefix: String = "") throws(StoreError) -> [String] {
        let plugin = self.plugin
        // A key that is not text of valid UTF-8 is skipped, with a warning: no call could name it.
        var keys = try database.read { [database] db in
            try database.readRows(
                db, table: "store", sql: "SELECT plugin, key FROM store WHERE plugin = ? AND key >= CAST(? AS TEXT) ORDER BY key",
                arguments: [plugin, PluginStore.bound(prefix)], name: PluginStore.rowName
            ) { row throws(RowDamage) in try row.text("key", allowingNUL: true) }
        }
        // Byte order, which is SQLite's BINARY order, puts every key with the prefix in one run.
        if let end = keys.firstIndex(where: { !$0.utf8.starts(with: prefix.utf8) }) { keys.removeSubrange(end...) }
        guard let pending else { return keys }
        var byBytes = Dictionary(keys.map { (Array($0.utf8), $0) }, uniquingKeysWith: { a, _ in a })
        for (bytes, change) in pending where bytes.starts(with: prefix.utf8) {
            byBytes[bytes] = change.text == nil ? nil : change.key
        }
        return byBytes.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { byBytes[$0]! }
    }

    /// Runs `body` in a transaction: its changes are written together when it returns, or not at
    /// all when it throws. `body` cannot wait: it is not async.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try beginTransaction()
        let result: T
        do {
            result = try body()
        } catch {
            rollback()
            throw error
        }
        try commit()
        return result
    }

    // MARK: - Transactions, in parts (the Lua bridge's form)

    /// Opens a transaction. Transactions do not nest.
    public func beginTransaction() throws(StoreError) {
        guard pending == nil else { throw StoreError("a store transaction is already open: transactions do not nest") }
        pendingUsage = try usage()
        pending = [:]
    }

    /// Writes the open transaction's changes in one SQLite transaction. On failure nothing is
    /// written, and the transaction is closed either way.
    public func commit() throws(StoreError) {
        guard let changes = pending else { return }
        pending = nil
        guard !changes.isEmpty else { return }
        let plugin = self.plugin
        try database.write { db in
            for bytes in changes.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                let change = changes[bytes]!
                try PluginStore.write(db, plugin, change.key, change.text)
            }
        }
        committedUsage = pendingUsage
    }

    /// Drops the open transaction's changes; harmless when none is open.
    public func rollback() {
        pending = nil
    }

    // MARK: - Inside

    private func usage() throws(StoreError) -> Int {
        if let committedUsage { return committedUsage }
        let plugin = self.plugin
        let total = try database.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT CAST(total(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))) AS INTEGER)
                    FROM store WHERE plugin = ?
                    """, arguments: [plugin]) ?? 0
        }
        committedUsage = total
        return total
    }

    /// The bytes of the value stored under `key` as the quota counts them, or nil when there is
    /// none. Counted by SQLite, so a damaged row (which `get` skips) is still counted, as
    /// `usage` counts it.
    private func storedSize(_ key: String) throws(StoreError) -> Int? {
        if let pending, let change = pending[Array(key.utf8)] { return change.text?.utf8.count }
        let plugin = self.plugin
        return try database.read { db in
            try Int.fetchOne(
                db, sql: "SELECT COALESCE(length(CAST(value AS BLOB)), 0) FROM store WHERE plugin = ? AND key = CAST(? AS TEXT)",
                arguments: [plugin, PluginStore.bound(key)])
        }
    }

    /// A store row's name in a warning.
    private static func rowName(_ row: StoredRow) -> String {
        "(plugin \(row.shown("plugin")), key \(row.shown("key")))"
    }

    /// A store row's value: JSON text.
    static func value(_ row: StoredRow) throws(RowDamage) -> JSONValue {
        let text = try row.text("value")
        do {
            return try JSONValue.parse(text)
        } catch {
            throw RowDamage(column: "value", why: "is not JSON: \(error.message)")
        }
    }

    /// Every row of the store table, each plugin's: how many the host can read whole. The others
    /// are skipped with a warning. (`StateDatabase.readAll`.)
    static func readableRows(_ database: StateDatabase) throws(StoreError) -> Int {
        try database.read { db in
            try database.readRows(db, table: "store", sql: "SELECT plugin, key, value FROM store ORDER BY plugin, key", name: rowName) {
                row throws(RowDamage) in
                _ = try row.text("plugin")
                _ = try row.text("key", allowingNUL: true)
                _ = try value(row)
            }.count
        }
    }

    /// Sets (text) or deletes (nil) one key, within the quota. Returns whether the key existed.
    @discardableResult
    private func put(_ key: String, _ text: String?) throws(StoreError) -> Bool {
        let oldSize = try storedSize(key)
        let before = try pending == nil ? usage() : pendingUsage
        let after = before - (oldSize.map { key.utf8.count + $0 } ?? 0) + (text.map { key.utf8.count + $0.utf8.count } ?? 0)
        if text != nil, after > quota, after > before {
            throw StoreError(
                "plugin '\(plugin)' would keep \(Units.formatBytes(after)) in its store, over its quota of "
                    + "\(Units.formatBytes(quota)) (set another with [limits] store in plugin.toml)")
        }
        if pending != nil {
            pending![Array(key.utf8)] = (key, text)
            pendingUsage = after
            return oldSize != nil
        }
        let plugin = self.plugin
        try database.write { db in try PluginStore.write(db, plugin, key, text) }
        committedUsage = after
        return oldSize != nil
    }

    /// Writes one key's new text, or deletes it (nil).
    private static func write(_ db: Database, _ plugin: String, _ key: String, _ text: String?) throws {
        if let text {
            try db.execute(
                sql: "INSERT OR REPLACE INTO store (plugin, key, value) VALUES (?, CAST(? AS TEXT), ?)",
                arguments: [plugin, bound(key), text])
        } else {
            try db.execute(
                sql: "DELETE FROM store WHERE plugin = ? AND key = CAST(? AS TEXT)", arguments: [plugin, bound(key)])
        }
    }

    /// A key as its bytes, which SQL turns back into text with CAST(? AS TEXT). GRDB binds a Swift
    /// string as a C string, which ends at the first NUL: "user\0alice" and "user\0bob" would be
    /// one key. Keys are read back with CAST(key AS BLOB) for the same reason.
    private static func bound(_ key: String) -> Data { Data(key.utf8) }

    private func check(_ key: String) throws(StoreError) {
        guard !key.isEmpty else { throw StoreError("a store key must not be empty") }
        guard key.utf8.count <= PluginStore.maximumKeyLength else {
            throw StoreError("a store key is at most \(PluginStore.maximumKeyLength) bytes long")
        }
    }

    private func check(_ value: JSONValue, depth: Int) throws(StoreError) {
        guard depth <= JSONValue.maximumDepth else {
            throw StoreError("a stored value may nest at most \(JSONValue.maximumDepth) tables deep")
        }
        switch value {
        case .number(let text):
            // The same grammar the value is read back with: JSON's, finite.
            switch try? JSONValue.parse(text) {
            case .int?, .number?: break
            default: throw StoreError("cannot store the number '\(text)': only finite JSON numbers can be stored")
            }
        case .array(let items): for item in items { try check(item, depth: depth + 1) }
        case .object(let fields): for (_, item) in fields { try check(item, depth: depth + 1) }
        case .null, .bool, .int, .string: break
        }
    }
}
