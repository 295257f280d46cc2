import LifelineBackgroundTasks

// The smallest stand-ins for what Apple's examples use but do not show, or what Linux lacks (Core
// Data). They are Lifeline code, not Apple's: the feed lives in memory, one per plugin and launch,
// and the server is the scenario's scripted network (GET /entries, POST /data on 127.0.0.1:8080).

/// One entry of the color feed.
struct FeedEntry {
    var title: String
    var timestamp: Date
}

/// Stands in for Core Data's `NSManagedObjectContext`: the entries it holds.
final class NSManagedObjectContext {
    private let container: PersistentContainer
    init(container: PersistentContainer) { self.container = container }
    func insert(_ entries: [FeedEntry]) { container.entries += entries }
    func delete(where isOld: (FeedEntry) -> Bool) -> Int {
        let before = container.entries.count
        container.entries.removeAll(where: isOld)
        return before - container.entries.count
    }
}

/// Stands in for the sample's Core Data stack. `shared` is the running plugin's, one per launch,
/// so two runs in one process never see each other's feed.
final class PersistentContainer {
    var entries: [FeedEntry] = []
    var lastCleaned: Date?

    private final class Held {
        weak var context: PluginContext?
        let container = PersistentContainer()
        init(_ context: PluginContext) { self.context = context }
    }
    /// Locked: a process may run several hosts at once, each on its own thread.
    private static let lock = NSLock()
    nonisolated(unsafe) private static var containers: [ObjectIdentifier: Held] = [:]

    static var shared: PersistentContainer {
        guard let context = UIApplication.shared.pluginContext else { return PersistentContainer() }
        let key = ObjectIdentifier(context)
        lock.lock()
        defer { lock.unlock() }
        if let held = containers[key], held.context === context { return held.container }
        containers = containers.filter { $0.value.context != nil }
        let held = Held(context)
        containers[key] = held
        return held.container
    }

    /// Two entries: one from two days ago, one from now.
    func loadInitialData() {
        guard entries.isEmpty else { return }
        entries = [
            FeedEntry(title: "teal", timestamp: Date(timeIntervalSinceNow: -2 * 24 * 60 * 60)),
            FeedEntry(title: "coral", timestamp: Date()),
        ]
    }

    func newBackgroundContext() -> NSManagedObjectContext { NSManagedObjectContext(container: self) }
}

/// Stands in for Foundation's `NSPredicate(format:)`, which Linux does not implement: it keeps
/// the date of "timestamp < %@".
final class NSPredicate {
    let date: Date?
    init(format: String, _ arguments: Any...) { date = (arguments.first as? NSDate).map { Date(timeIntervalSinceReferenceDate: $0.timeIntervalSinceReferenceDate) } }
}

/// The sample's server protocol, reduced to the one call the refresh makes.
protocol Server {
    /// Calls `completion` with the new entries, or nil when the fetch failed or was cancelled.
    func fetchEntries(completion: @escaping ([FeedEntry]?) -> Void) -> Task<Void, Never>?
}

/// GET /entries on the scenario's server: a JSON array of `{"title": …}`.
final class MockServer: Server {
    func fetchEntries(completion: @escaping ([FeedEntry]?) -> Void) -> Task<Void, Never>? {
        guard let context = UIApplication.shared.pluginContext else {
            completion(nil)
            return nil
        }
        let done = Unchecked(completion)
        return context.task {
            var entries: [FeedEntry]?
            if let response = try? await context.http(HTTPRequest(url: "http://127.0.0.1:8080/entries")),
                response.status == 200,
                let list = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [[String: Any]]
            {
                entries = list.map { FeedEntry(title: $0["title"] as? String ?? "", timestamp: Date()) }
            }
            done.value(entries)
        }
    }
}

enum Operations {
    /// The sample downloads, then stores; one operation does both here.
    static func getOperationsToFetchLatestEntries(using context: NSManagedObjectContext, server: Server) -> [Operation] {
        [DownloadEntriesFromServerOperation(context: context, server: server)]
    }
}

/// An asynchronous operation, as Apple's documentation writes one: it says it finished with
/// `willChangeValue`/`didChangeValue(forKey: "isFinished")`.
final class DownloadEntriesFromServerOperation: Operation {
    private let context: NSManagedObjectContext
    private let server: Server
    private var request: Task<Void, Never>?
    private var running = false
    private var done = false

    init(context: NSManagedObjectContext, server: Server) {
        self.context = context
        self.server = server
    }

    override var isAsynchronous: Bool { true }
    override var isExecuting: Bool { running }
    override var isFinished: Bool { done }

    override func start() {
        guard !isCancelled else { return finish() }
        running = true
        let log = UIApplication.shared.pluginContext?.logger
        request = server.fetchEntries { [self] entries in
            guard !done else { return }
            if let entries {
                context.insert(entries)
                log?.info("Fetched \(entries.count) new feed entries")
            } else {
                log?.info("Could not fetch the feed")
            }
            finish()
        }
    }

    override func cancel() {
        super.cancel()
        request?.cancel()
        if running { finish() }
    }

    private func finish() {
        guard !done else { return }
        willChangeValue(forKey: "isFinished")
        running = false
        done = true
        didChangeValue(forKey: "isFinished")
    }
}

/// Deletes the entries the predicate picks: a synchronous operation.
final class DeleteFeedEntriesOperation: Operation {
    private let context: NSManagedObjectContext
    private let predicate: NSPredicate

    init(context: NSManagedObjectContext, predicate: NSPredicate) {
        self.context = context
        self.predicate = predicate
    }

    override func main() {
        guard let cutoff = predicate.date else { return }
        let deleted = context.delete(where: { $0.timestamp < cutoff })
        print("Deleted \(deleted) feed entries older than a day")
    }
}

extension DataSender {
    /// The article leaves this to the app. A POST of the data to the scenario's server, made
    /// synchronous as the article's comment says, the way an iOS app makes a URLSession call
    /// synchronous: the global queue's block waits on a semaphore that the response signals. The
    /// main executor runs meanwhile, so the wait takes host time.
    func sendAppDataToServer(data: NSData) {
        guard let context = UIApplication.shared.pluginContext else { return }
        let done = DispatchSemaphore(value: 0)
        let body = [UInt8](Data(referencing: data))
        context.task {
            let response = try? await context.http(HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/data", body: body))
            context.logger.info("Sent \(body.count) bytes: \(response.map { "status \($0.status)" } ?? "no answer")")
            done.signal()
        }
        done.wait()
    }
}

/// Lets a closure that only ever runs on the main executor into a `@Sendable` task.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
