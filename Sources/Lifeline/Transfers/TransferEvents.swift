/// The host's background transfers, and the delivery of their events to the plugins: the host's
/// and not the app's, so they outlive a launch. An event waits in the ledger until its handlers
/// have run; the app is relaunched in the background to hear it when it is not running.
///
/// Threading: main executor only.
final class TransferEvents {
    private let session: AppSession
    private let subscriptions: SubscriptionTable
    private let caller: GuardedCaller
    /// Gives `didFinishTransferEvents` its completion.
    private let system: SystemWork
    private var manager: TransferManager?
    private var ledger: TransferLedger?
    /// When each unfinished transfer's progress was last recorded, in seconds.
    private var progressRecorded: [String: Double] = [:]
    /// Set while events are being delivered, so a delivery never nests.
    private var delivering = false
    /// Set when an event arrived while the app was suspended: if the app then ends without
    /// running again, the host relaunches it to deliver them.
    private var held = false

    /// The reason a force-quit gives the transfers it cancels, as iOS does.
    static let forceQuitReason = "userForceQuit"

    init(session: AppSession, subscriptions: SubscriptionTable, caller: GuardedCaller, system: SystemWork) {
        self.session = session
        self.subscriptions = subscriptions
        self.caller = caller
        self.system = system
    }

    /// What the transfers need of the host's configuration.
    struct Settings {
        var transport: any TransferTransport
        /// How many transfers run at once.
        var limit: Int
        var jitterSeed: UInt64?
    }

    /// Starts the transfers of the state dir's database, and resumes the unfinished ones.
    func start(_ database: StateDatabase, settings: Settings, epochAtStart: Double) {
        let ledger = TransferLedger(database: database)
        self.ledger = ledger
        let manager = TransferManager(
            ledger: ledger, transport: settings.transport, executor: session.executor,
            filesRoot: database.filesRoot, limit: settings.limit,
            jitterSeed: settings.jitterSeed, epochAtStart: epochAtStart,
            callbacks: TransferManager.Callbacks(
                eventQueued: { [unowned self] _, relaunch in queued(relaunch: relaunch) },
                progress: { [unowned self] plugin, id, received, total in
                    progress(plugin: plugin, id: id, received: received, total: total)
                },
                record: { [session] event, fields in session.record(event, fields) }))
        self.manager = manager
        // A temporary database that was never opened holds nothing to resume.
        guard database.mayHoldData else { return }
        do {
            try manager.resumeUnfinished()
        } catch {
            session.logger.error("cannot resume the unfinished transfers: \(error.message)")
        }
    }

    func shutdown() { manager?.shutdown() }

    // MARK: - The plugins' calls

    /// The host's transfers, or why there are none.
    private func transferManager() throws(TransferError) -> TransferManager {
        guard let manager else {
            throw TransferError("the host was started without a state dir, so there are no background transfers")
        }
        return manager
    }

    func start(
        _ plugin: PluginRef, kind: TransferRecord.Kind, method: String, url: String, file: String,
        sha256: String?, tag: String?
    ) throws(TransferError) -> String {
        let manager = try transferManager()
        if let target = HTTPURL(url), !session.permissions(of: plugin).allows(host: target.host, port: target.port) {
            throw TransferError(NetworkPermissions.denial(plugin: plugin.name, host: target.host, port: target.port))
        }
        return try manager.start(
            plugin: plugin.name, kind: kind, method: method, url: url, file: file, sha256: sha256, tag: tag)
    }

    func list(_ plugin: PluginRef) throws(TransferError) -> [TransferRecord] {
        try transferManager().list(plugin: plugin.name)
    }

    func cancel(_ plugin: PluginRef, id: String) throws(TransferError) -> Bool {
        try transferManager().cancel(plugin: plugin.name, id: id)
    }

    // MARK: - Delivery

    /// A force-quit cancels every transfer, with iOS's reason.
    func cancelAll() { manager?.cancelAll(reason: Self.forceQuitReason) }

    /// What a lifecycle step means for the events: a launch or the foreground delivers them; an
    /// end while some were held relaunches the app for them; a force-quit forgets that.
    func stepped(_ step: Step) {
        if step == .launch || step == .launchInBackground || step == .foreground { deliver() }
        if (step == .kill || step == .terminate) && held {
            held = false
            queued(relaunch: true)
        }
        if step == .forceQuit { held = false }
    }

    /// A transfer ended and its event waits: delivered now if the app runs, held while it is
    /// suspended, and, when it is not running, the host launches it in the background to hear it.
    private func queued(relaunch: Bool) {
        session.executor.schedule(at: session.now) { [unowned self] in
            if session.appRunning {
                if session.visibleState == .suspended { held = true }
                deliver()
            } else if relaunch, !session.isStopped {
                session.request(.relaunch(reason: "transferEvents"))
            }
        }
    }

    /// Delivers the waiting transfer events to the plugins that handle them, in the order they
    /// happened, then `didFinishTransferEvents` to each plugin that got any. An event is removed
    /// once its handlers have returned (or raised); if the app ends meanwhile it stays, and is
    /// delivered at the next launch. Events of a plugin with no handler for them stay too.
    func deliver() {
        guard let ledger, session.isRunning, session.visibleState != .suspended, !caller.isInsidePluginCode,
            !delivering
        else { return }
        delivering = true
        held = false
        defer { delivering = false }
        let names: [String]
        do {
            names = try ledger.pluginsWithPendingEvents()
        } catch {
            return session.logger.error("cannot read the transfer events: \(error.message)")
        }
        for name in names {
            guard let plugin = session.plugin(named: name) else { continue }
            var delivered = false
            for pending in (try? ledger.pendingEvents(plugin: name)) ?? [] {
                guard session.isRunning, let event = LifecycleEventName(rawValue: pending.name) else { return }
                let info = TransferEventInfo(id: pending.transferID, reason: pending.reason)
                guard dispatch(event, to: plugin, transfer: info) else { continue }
                guard session.isRunning else { return }
                do {
                    try ledger.acknowledge(pending.seq)
                } catch {
                    session.logger.error("cannot remove a delivered transfer event: \(error.message)")
                }
                delivered = true
            }
            if delivered {
                _ = dispatch(
                    .didFinishTransferEvents, to: plugin, transfer: nil, recordAlways: true,
                    completion: system.transferEventsCompletion(plugin: plugin))
            }
        }
    }

    private func progress(plugin: String, id: String, received: Int64, total: Int64?) {
        // The report samples progress: at most one event per transfer per virtual second, and the
        // last one, so a long download is a few lines, not hundreds.
        let now = session.now.seconds
        let last = progressRecorded[id]
        let complete = total.map { received >= $0 } ?? false
        if last == nil || now - last! >= 1 || complete {
            progressRecorded[id] = complete ? nil : now
            var fields: [(String, JSONValue)] = [
                ("plugin", .string(plugin)), ("transfer", .string(id)), ("received", .int(received)),
            ]
            if let total { fields.append(("total", .int(total))) }
            session.record(.transferProgress, fields)
        }
        guard session.isRunning, session.visibleState != .suspended, !caller.isInsidePluginCode,
            let ref = session.plugin(named: plugin)
        else { return }
        _ = dispatch(.transferProgress, to: ref, transfer: TransferEventInfo(id: id, received: received, total: total))
    }

    /// Sends an event to one plugin's handlers; false if it has none. The event is recorded when
    /// it has handlers, or always with `recordAlways`; `transferProgress` is recorded by
    /// `progress` itself, sampled.
    private func dispatch(
        _ name: LifecycleEventName, to plugin: PluginRef, transfer: TransferEventInfo?, recordAlways: Bool = false,
        completion: Int? = nil
    ) -> Bool {
        let list = subscriptions.subscriptions(to: name, plugin: plugin.slot)
        if list.isEmpty && !recordAlways { return false }
        if name != .transferProgress {
            var fields: [(String, JSONValue)] = [("plugin", .string(plugin.name))]
            if let transfer {
                fields.append(("transfer", .string(transfer.id)))
                if let reason = transfer.reason { fields.append(("reason", .string(reason))) }
            }
            session.record(ReportEventName(name), fields)
        }
        guard !list.isEmpty else { return false }
        caller.deliver(
            LifecycleEvent(
                name: name, time: session.now.seconds, state: session.visibleState, transfer: transfer, completion: completion),
            to: list)
        return true
    }
}
