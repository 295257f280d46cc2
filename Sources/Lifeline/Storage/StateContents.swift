/// What a state dir's database holds, as the host reads it: every table, each row read the way
/// the host reads it when it runs. The entry point for checking a state database from outside (a
/// fuzz target that damages one, a tool): whatever the file holds, `StateDatabase.readAll` returns
/// or throws a `LifelineError`, and never traps.
public struct StateContents: Sendable {
    /// The store rows the host can read whole, all plugins together.
    public var storeRows: Int
    /// The transfers the host can read, every plugin's, oldest first.
    public var transfers: [TransferRecord]
    /// The transfer events waiting for delivery, every plugin's, in order.
    public var transferEvents: [TransferEventRecord]
    /// The plugins with events waiting.
    public var pluginsWithEvents: [String]
    /// The pending task requests: (plugin, identifier, kind, earliest in seconds since 1970).
    public var taskRequests: [(plugin: String, identifier: String, kind: SystemTaskKind, earliest: Double)]
    /// The warnings about rows that were skipped.
    public var warnings: [String]
}

extension StateDatabase {
    /// Opens the database (migrating it, under the state dir's lock) and reads every table: the
    /// store, the transfers and their events, and the pending task requests. The plugins' files
    /// keep no rows: `lifeline.files` is the files folder itself.
    ///
    /// Throws `.badInput` (exit 65) for a database the host cannot use; a row it cannot read is
    /// skipped, and named in `warnings`.
    public func readAll() throws(LifelineError) -> StateContents {
        do throws(StoreError) {
            let transfers = TransferLedger(database: self)
            let tasks = try SystemTaskLedger(database: self).all()
            return StateContents(
                storeRows: try PluginStore.readableRows(self),
                transfers: try transfers.transfers(),
                transferEvents: try transfers.pendingEvents(plugin: nil),
                pluginsWithEvents: try transfers.pluginsWithPendingEvents(),
                taskRequests: tasks.map { ($0.plugin, $0.request.identifier, $0.request.kind, $0.earliest) },
                warnings: warnings)
        } catch {
            throw .badInput(error.message)
        }
    }
}
