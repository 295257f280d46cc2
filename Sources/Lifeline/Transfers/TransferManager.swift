import Foundation

/// Background transfers, owned by the host and not by the app: no budget of the app's
/// applies, and they go on while the app is suspended or not running. It carries out the pure
/// rules (`RetryPolicy`, `ResumeRule`, `ProgressThrottle`) and keeps every change in the ledger,
/// so a host started again on the same state dir resumes where this one stopped.
///
/// At most `limit` transfers run at once; the rest wait in the order they were made. A final
/// state is written together with its event (`TransferLedger.save`); the host delivers events.
///
/// Threading: main executor only. Transports report from any thread; their reports are posted.
final class TransferManager {
    /// Transfers at once, by default.
    static let defaultLimit = 4

    struct Callbacks {
        /// A final state was saved with its event. `relaunch`: false for a force-quit, after which
        /// iOS does not wake the app.
        var eventQueued: (_ plugin: String, _ relaunch: Bool) -> Void
        /// Bytes so far, at most 4 a second per transfer, and once at the end.
        var progress: (_ plugin: String, _ id: String, _ received: Int64, _ total: Int64?) -> Void
        var record: (_ event: ReportEventName, _ fields: [(String, JSONValue)]) -> Void
    }

    private let ledger: TransferLedger
    private let transport: any TransferTransport
    private let executor: MainExecutor
    /// `<state-dir>/files`: each plugin's folder is under it.
    let filesRoot: String
    let limit: Int
    private let retry: RetryPolicy
    private var random: () -> Double
    private let callbacks: Callbacks

    /// The transfers that are not over, by ledger id.
    private var live: [Int64: TransferRecord] = [:]
    /// Waiting for a slot, oldest first.
    private var waiting: [Int64] = []
    /// Running now: the wire, and the attempt number its reports must carry.
    private var running: [Int64: (wire: any HTTPCancellable, attempt: Int)] = [:]
    /// Waiting to be tried again.
    private var retries: [Int64: MainExecutor.JobID] = [:]
    private var throttle = ProgressThrottle()
    /// Seconds since 1970 at the clock's zero, so a Retry-After date becomes a delay on the
    /// host's clock (a fixed epoch in simulate, so runs repeat).
    private let epochAtStart: Double

    init(
        ledger: TransferLedger, transport: any TransferTransport, executor: MainExecutor, filesRoot: String,
        limit: Int = TransferManager.defaultLimit, retry: RetryPolicy = RetryPolicy(), jitterSeed: UInt64?,
        epochAtStart: Double = 0, callbacks: Callbacks
    ) {
        self.epochAtStart = epochAtStart
        self.ledger = ledger
        self.transport = transport
        self.executor = executor
        self.filesRoot = filesRoot
        self.limit = max(1, limit)
        self.retry = retry
        self.callbacks = callbacks
        if let seed = jitterSeed {
            var generator = SplitMix64(seed: seed)
            random = { Double(generator.next() >> 11) / Double(1 << 53) }
        } else {
            random = { Double.random(in: 0..<1) }
        }
    }

    /// The plugin's files folder.
    func folder(of plugin: String) -> String { filesRoot + "/" + plugin }

    /// Takes up the transfers a previous host left unfinished, oldest first.
    func resumeUnfinished() throws(StoreError) {
        for var record in try ledger.unfinished() where live[record.id] == nil {
            record.state = .queued
            live[record.id] = record
            waiting.append(record.id)
            callbacks.record(.transferResumed, fields(record) + [("received", .int(record.received))])
        }
        pump()
    }

    /// The most unfinished transfers the host keeps for one plugin: their records live in the
    /// host, not in the plugin's state, so this bounds what one plugin can make the host hold.
    public static let maximumUnfinishedPerPlugin = 1000

    /// Starts a download or upload for `plugin`. The file name is checked against the plugin's
    /// folder; the URL must be http(s). With `tag`, an unfinished transfer of the plugin's with
    /// that id is returned as it is, not started twice.
    func start(
        plugin: String, kind: TransferRecord.Kind, method: String, url: String, file: String, sha256: String?,
        tag: String?
    ) throws(TransferError) -> String {
        // The ledger keeps these as SQLite text, and a file name is a C string: a NUL would cut them.
        for (what, text) in [("URL", url), ("file name", file), ("id", tag ?? "")] where text.utf8.contains(0) {
            throw TransferError("a transfer's \(what) must not contain a NUL byte")
        }
        guard HTTPURL(url) != nil else { throw TransferError("'\(url)' is not an http:// or https:// URL") }
        if let sha256 {
            guard sha256.count == 64, sha256.allSatisfy(\.isHexDigit) else {
                throw TransferError("sha256 must be 64 hexadecimal digits")
            }
        }
        if let tag {
            guard !tag.isEmpty else { throw TransferError("a transfer's id must not be empty") }
            guard !tag.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw TransferError("a transfer's id must not be all digits: those are the ids the host gives")
            }
            if let existing = live.values.first(where: { $0.plugin == plugin && $0.tag == tag }) {
                return existing.publicID
            }
        }
        guard live.values.lazy.filter({ $0.plugin == plugin }).count < TransferManager.maximumUnfinishedPerPlugin else {
            throw TransferError(
                "plugin '\(plugin)' has \(TransferManager.maximumUnfinishedPerPlugin) unfinished transfers, the most "
                    + "the host keeps for one plugin; wait for some to finish or cancel them")
        }
        let path = try TransferPath.resolve(file, in: folder(of: plugin))
        if kind == .download, live.values.contains(where: { $0.plugin == plugin && $0.kind == .download && $0.file == path.name }) {
            throw TransferError("another unfinished transfer is downloading to '\(path.name)'; cancel it first")
        }
        if kind == .upload {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path.path, isDirectory: &isFolder), !isFolder.boolValue
            else { throw TransferError("'\(file)' does not exist in the plugin's files folder") }
        }
        let record: TransferRecord
        do {
            record = try ledger.add(
                plugin: plugin, kind: kind, method: method, url: url, file: path.name, sha256: sha256?.lowercased(),
                tag: tag)
        } catch {
            throw TransferError(error.message)
        }
        live[record.id] = record
        waiting.append(record.id)
        callbacks.record(
            .transferQueued, fields(record) + [("kind", .string(kind.rawValue)), ("url", .string(url))])
        pump()
        return record.publicID
    }

    /// The plugin's transfers, oldest first (finished ones included).
    func list(plugin: String) throws(StoreError) -> [TransferRecord] {
        try ledger.transfers(plugin: plugin).map { live[$0.id] ?? $0 }
    }

    /// Cancels the plugin's unfinished transfer `id`; false if it has none such. Its partial file
    /// is removed, and `transferDidFail` follows with `reason`.
    @discardableResult
    func cancel(plugin: String, id: String, reason: String = "cancelled") -> Bool {
        guard let record = live.values.first(where: { $0.plugin == plugin && $0.publicID == id }) else { return false }
        end(record.id, state: .cancelled, reason: reason, relaunch: true)
        return true
    }

    /// Force-quit: every unfinished transfer is cancelled with reason `userForceQuit`. The app is
    /// not woken for these events; it hears of them at its next launch.
    func cancelAll(reason: String) {
        waiting.removeAll()  // so no slot freed on the way starts one
        for id in live.keys.sorted() { end(id, state: .cancelled, reason: reason, relaunch: false) }
    }

    // MARK: - Running

    private func pump() {
        while running.count < limit, !waiting.isEmpty {
            let id = waiting.removeFirst()
            if live[id] != nil { attempt(id) }
        }
    }

    private func partialName(_ record: TransferRecord) -> String { DownloadFile.partialName(record.file, id: record.id) }

    private func discardPartial(_ record: TransferRecord) {
        DownloadFile.discard(root: folder(of: record.plugin), partialName: partialName(record))
    }

    private func attempt(_ id: Int64) {
        guard var record = live[id] else { return }
        record.state = .running
        record.attempts += 1
        var resumeFrom: Int64 = 0
        var headers: HTTPFields = [:]
        if record.kind == .download {
            // The validators kept beside the partial file, which describe its bytes.
            let point = DownloadFile.resumePoint(root: folder(of: record.plugin), partialName: partialName(record))
            headers = ResumeRule.headers(
                method: record.method, received: point.bytes, etag: point.etag, lastModified: point.lastModified)
            if !headers.isEmpty { resumeFrom = point.bytes }
            record.received = resumeFrom
        }
        save(record)
        callbacks.record(
            .transferStarted, fields(record) + [("attempt", .int(Int64(record.attempts))), ("from", .int(resumeFrom))])
        let request = HTTPRequest(method: record.method, url: record.url, headers: headers, timeout: .infinity)
        let attempt = TransferAttempt(
            kind: record.kind, request: request, root: folder(of: record.plugin), name: record.file, id: record.id,
            resumeFrom: resumeFrom, sha256: record.sha256)
        let number = record.attempts
        let manager = UncheckedSendable(self)
        let executor = UncheckedSendable(self.executor)
        let wire = transport.transfer(
            attempt,
            report: { report in executor.value.post { manager.value.reported(id, number, report) } },
            completion: { result in executor.value.post { manager.value.ended(id, number, result) } })
        // A transport may complete at once; the completion is posted, so the slot is taken first.
        running[id] = (wire, number)
    }

    private func reported(_ id: Int64, _ number: Int, _ report: TransferReport) {
        guard running[id]?.attempt == number, var record = live[id] else { return }
        switch report {
        case .progress(let bytes, let total):
            record.received = bytes
            record.total = total ?? record.total
            live[id] = record
            if throttle.admit(id, at: executor.now.seconds) {
                save(record)
                callbacks.progress(record.plugin, record.publicID, bytes, record.total)
            }
        }
    }

    private func ended(_ id: Int64, _ number: Int, _ result: TransferAttemptResult) {
        guard running[id]?.attempt == number, let record = live[id] else { return }
        running[id] = nil
        let failure: RetryPolicy.Failure
        switch result {
        case .response(let status, let headers, let bytes) where (200..<300).contains(status):
            var done = record
            done.received = bytes
            done.total = done.kind == .download ? bytes : done.total
            live[id] = done
            _ = throttle.admit(id, at: executor.now.seconds, final: true)
            callbacks.progress(done.plugin, done.publicID, bytes, done.total)
            end(id, state: .finished, reason: nil, relaunch: true)
            return
        case .response(let status, let headers, _):
            let now = epochAtStart + executor.now.seconds
            let retryAfter = headers[values: .retryAfter].first.flatMap { RetryAfter.seconds($0, now: now) }
            failure = .status(status, retryAfter: retryAfter)
        case .rangeMismatch:
            // The server sent other bytes than asked for: drop the partial file and start again
            // from zero at once, without counting the attempt.
            discardPartial(record)
            var again = record
            again.attempts -= 1
            live[id] = again
            callbacks.record(.transferRestarted, fields(record) + [("reason", .string("range mismatch"))])
            waiting.insert(id, at: 0)
            pump()
            return
        case .fileFailed(let why):
            failure = .verification(why)
        case .failed(let error):
            failure = .connection(error.message.isEmpty ? error.kind.rawValue : error.message)
        }
        switch retry.decide(failure, attempts: record.attempts, random: random()) {
        case .fail(let reason):
            end(id, state: .failed, reason: reason, relaunch: true)
        case .retry(let delay):
            var waitingRecord = record
            waitingRecord.state = .queued
            live[id] = waitingRecord
            save(waitingRecord)
            callbacks.record(
                .transferRetrying,
                fields(record) + [
                    ("after", .number(ReportNumber.seconds(delay))),
                    ("reason", .string(RetryPolicy.describe(failure))),
                ])
            retries[id] = executor.schedule(at: executor.now.adding(seconds: delay)) { [unowned self] in
                retries[id] = nil
                guard live[id] != nil else { return }
                waiting.append(id)
                pump()
            }
        }
        pump()
    }

    /// Puts a transfer in a final state, with its event, and frees its slot.
    private func end(_ id: Int64, state: TransferRecord.State, reason: String?, relaunch: Bool) {
        guard var record = live.removeValue(forKey: id) else { return }
        if let wire = running.removeValue(forKey: id)?.wire { wire.cancel() }
        if let job = retries.removeValue(forKey: id) { executor.cancel(job) }
        waiting.removeAll { $0 == id }
        if state != .finished, record.kind == .download { discardPartial(record) }
        record.state = state
        record.reason = reason
        save(record)
        var fields = fields(record) + [("state", .string(state.rawValue))]
        if let reason { fields.append(("reason", .string(reason))) }
        callbacks.record(.transferEnded, fields)
        callbacks.eventQueued(record.plugin, relaunch)
        pump()
    }

    private func save(_ record: TransferRecord) {
        if !record.state.isFinal { live[record.id] = record }
        do {
            try ledger.save(record)
        } catch {
            callbacks.record(
                .transferError, fields(record) + [("message", .string("cannot save the transfer: \(error.message)"))])
        }
    }

    private func fields(_ record: TransferRecord) -> [(String, JSONValue)] {
        [("plugin", .string(record.plugin)), ("transfer", .string(record.publicID))]
    }

    /// Stops every attempt under way (the host is going away); the ledger keeps them unfinished.
    func shutdown() {
        for (_, run) in running { run.wire.cancel() }
        running.removeAll()
        for (_, job) in retries { executor.cancel(job) }
        retries.removeAll()
    }
}

/// A small seeded generator (SplitMix64), so simulate's jitter is the same on every run.
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
