/// What plugins wait on: sleeps and HTTP requests, by id. Each wait is finished exactly once: by
/// its result, by `cancel`, or by the app's end (`abandon`). It owns the plugins' network session.
///
/// Threading: main executor only.
final class WaitTable {
    private struct Wait {
        var plugin: Int
        /// Stops the work; the completion is not called.
        var cancel: (HTTPFailure.Kind?) -> Void
        /// Stops the work and calls the completion with a cancellation (the app ended).
        var abandon: () -> Void
    }

    private let session: AppSession
    private let network: NetworkSession
    private var waits: [Int: Wait] = [:]
    private var nextID = 1

    init(session: AppSession, transport: any HTTPTransport) {
        self.session = session
        self.network = NetworkSession(transport: transport, executor: session.executor) { event, fields in
            session.record(event, fields)
        }
        // Plugins' requests fail at once while the device has no network.
        network.isOffline = { [device = session.device] in !device.networkAvailable }
    }

    /// Waits under way: none may be left once the work is done.
    var count: Int { waits.count }

    /// Calls `completion(true)` after `seconds` on the host's clock (as an app job: held while the
    /// app is suspended), or `completion(false)` if the app ends first.
    func sleep(plugin: Int, seconds: Double, completion: @escaping (Bool) -> Void) -> Int {
        let id = nextID
        nextID += 1
        let executor = session.executor
        let job = session.scheduleAppJob(at: session.now.adding(seconds: Units.clockDelay(seconds))) {
            [unowned self] in
            guard waits.removeValue(forKey: id) != nil else { return }
            completion(true)
        }
        waits[id] = Wait(
            plugin: plugin, cancel: { _ in executor.cancel(job) },
            abandon: {
                executor.cancel(job)
                completion(false)
            })
        return id
    }

    /// Starts an HTTP request for a plugin, under its network permissions.
    func http(
        _ plugin: PluginRef, _ request: HTTPRequest,
        completion: @escaping (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> Int {
        let id = nextID
        nextID += 1
        let network = self.network
        let exchange = network.start(plugin: plugin.name, permissions: session.permissions(of: plugin), request: request) {
            [unowned self] result in
            guard waits.removeValue(forKey: id) != nil else { return }
            completion(result)
        }
        waits[id] = Wait(
            plugin: plugin.slot, cancel: { kind in network.cancel(exchange, recording: kind) },
            abandon: {
                network.cancel(exchange)
                completion(.failure(HTTPFailure(.cancelled, "the app ended")))
            })
        return id
    }

    /// Stops a wait; its completion is not called. `kind` is what the report records for a request.
    func cancel(_ id: Int, recording kind: HTTPFailure.Kind?) {
        waits.removeValue(forKey: id)?.cancel(kind)
    }

    /// Ends the waits of one plugin (`plugin`), or all of them, calling each completion with a
    /// cancellation, in the order they began.
    func abandon(plugin: Int? = nil) {
        for id in waits.keys.sorted() {
            guard let wait = waits[id], plugin == nil || wait.plugin == plugin else { continue }
            waits[id] = nil
            wait.abandon()
        }
    }
}
