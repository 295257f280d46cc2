import GRDB

/// The pending task requests in the state dir's database. The requests are the system's, not the
/// app's: a host started again with the same state dir finds them, as a relaunched iOS app finds
/// the requests it submitted before.
///
/// Threading: main executor only.
final class SystemTaskLedger {
    private let database: StateDatabase

    init(database: StateDatabase) { self.database = database }

    /// A request as kept: `earliest` in seconds since 1970.
    struct Saved: Equatable {
        var plugin: String
        var request: SystemTaskRequest
        var earliest: Double
    }

    /// Saves a request; one under the same plugin and identifier is replaced and keeps its place.
    func save(_ saved: Saved) throws(StoreError) {
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO system_tasks (plugin, identifier, kind, earliest, requires_network, requires_power, seq)
                    VALUES (?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM system_tasks))
                    ON CONFLICT (plugin, identifier) DO UPDATE SET kind = excluded.kind,
                        earliest = excluded.earliest, requires_network = excluded.requires_network,
                        requires_power = excluded.requires_power
                    """,
                arguments: [
                    saved.plugin, saved.request.identifier, saved.request.kind.rawValue, saved.earliest,
                    saved.request.requiresNetwork, saved.request.requiresPower,
                ])
        }
    }

    /// Forgets a request: it ran, or was cancelled.
    func remove(plugin: String, identifier: String) throws(StoreError) {
        try database.write { db in
            try db.execute(
                sql: "DELETE FROM system_tasks WHERE plugin = ? AND identifier = ?", arguments: [plugin, identifier])
        }
    }

    /// The range of `earliest` read back, in seconds since 1970: 0 to 10^11 (the year 5138). The
    /// host saves its start time plus a `HostTime`, which stays far below; a value outside (text,
    /// an infinity, 1e300) is damage, and the row is skipped rather than turned into a time that
    /// overflows.
    static let earliestRange: ClosedRange<Double> = 0...1e11

    /// Every pending request, in the order they were submitted. A row a newer Lifeline wrote with
    /// a kind this one does not know, or a row the host cannot read whole, is skipped with a
    /// warning naming it (`StoredRow`).
    func all() throws(StoreError) -> [Saved] {
        try database.list { [database] db in
            try database.readRows(
                db, table: "system_tasks", sql: "SELECT * FROM system_tasks ORDER BY seq",
                name: { "(plugin \($0.shown("plugin")), identifier \($0.shown("identifier")))" }
            ) { row throws(RowDamage) in
                Saved(
                    plugin: try row.text("plugin"),
                    request: SystemTaskRequest(
                        identifier: try row.text("identifier"), kind: try row.name("kind", as: SystemTaskKind.self),
                        earliestBegin: 0, requiresNetwork: try row.bool("requires_network"),
                        requiresPower: try row.bool("requires_power")),
                    earliest: try row.real("earliest", in: SystemTaskLedger.earliestRange))
            }
        }
    }
}
