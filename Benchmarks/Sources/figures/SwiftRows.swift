// The rows that run Swift plugins: task.swift and queue.swift.
import Foundation
import Lifeline
import Synchronization

/// A Swift plugin whose memory-warning handler runs `SwiftBench.body`.
final class SwiftBench: SwiftPlugin {
    nonisolated(unsafe) static var body: (PluginContext) -> Void = { _ in }
    static let name = "swift-bench"
    init() {}
    func load(_ context: PluginContext) throws {
        context.on(.didReceiveMemoryWarning) { _ in SwiftBench.body(context) }
    }
}

/// ns per `per` units of `body`, run in each of `events` memory-warning handlers of a Swift plugin,
/// counting the jobs the handler leaves on the executor until they are done.
func swiftHandler(events: Int, per: Int, _ body: @escaping (PluginContext) -> Void) -> Double {
    SwiftBench.body = body
    let bench = BenchHost([SwiftBench.descriptor])
    let ns = nanoseconds(per: events * per) { for _ in 0..<events { bench.perform(.memoryWarning) } }
    bench.checkClean()
    return ns
}

// MARK: task.swift

func taskSwift(count n: Int, events: Int = 10) -> Double {
    swiftHandler(events: events, per: n) { context in
        for _ in 0..<n { context.endBackgroundTask(context.beginBackgroundTask(name: "x", expirationHandler: nil)) }
    }
}

func taskSwiftRow() -> Row {
    let n = 10_000
    let m = interleaved(rounds: 9, [
        { taskSwift(count: n) }, { mutexDictionary(count: n * 10) },
    ])
    return Row(
        name: "task.swift", unit: "ns/op", value: m[0], baseline: ("insert and remove, Mutex<[Int: String]>", m[1]),
        target: "≤ 2", met: m[0] / m[1] <= 2)
}

/// ns per insert and remove of one entry in a `Mutex<[Int: String]>`, each under its own lock.
func mutexDictionary(count: Int) -> Double {
    let tasks = Mutex<[Int: String]>([:])
    var next = 0
    return nanoseconds(per: count) {
        for _ in 0..<count {
            next += 1
            let id = next
            tasks.withLock { $0[id] = "x" }
            tasks.withLock { _ = $0.removeValue(forKey: id) }
        }
    }
}

// MARK: queue.swift

func lifelineQueue(count: Int) -> Double {
    swiftHandler(events: 1, per: count) { context in
        let q = try! context.queue("bench")
        for _ in 0..<count { q.addOperation { _ in } }
    }
}

func operationQueue(count: Int) -> Double {
    let q = OperationQueue()
    q.maxConcurrentOperationCount = 1
    return nanoseconds(per: count) {
        for _ in 0..<count { q.addOperation {} }
        q.waitUntilAllOperationsAreFinished()
    }
}

func dispatchQueue(count: Int) -> Double {
    let q = DispatchQueue(label: "figures.serial")
    let group = DispatchGroup()
    return nanoseconds(per: count) {
        for _ in 0..<count { q.async(group: group) {} }
        group.wait()
    }
}

func queueSwiftRow() -> Row {
    let n = 100_000
    let m = interleaved(rounds: 7, [{ lifelineQueue(count: n) }, { dispatchQueue(count: n) }, { operationQueue(count: n) }])
    return Row(
        name: "queue.swift", unit: "ns/op", value: m[0], baseline: ("serial DispatchQueue", m[1]), target: "≤ 1.0",
        met: m[0] / m[1] <= 1.0, others: [("OperationQueue, maxConcurrentOperationCount 1", m[2])])
}
