import Dispatch

// Grand Central Dispatch, as much of it as background code written for iOS uses around
// beginBackgroundTask: `DispatchQueue.main` and `.global()`, `async`, `asyncAfter`, and
// `DispatchSemaphore` to make a call synchronous. These shadow Dispatch's types for code that
// imports LifelineBackgroundTasks.
//
// The host's rules are kept on its clock (virtual in simulate), and a report must be the same
// for the same input. So a block never runs beside the main executor:
//
// - `DispatchQueue.main.async` runs the block on a later turn of the main executor; the app is
//   not suspended before it has run.
// - `DispatchQueue.global().async` runs it on a thread of its own, a worker, at once, but only
//   while the caller waits: the caller hands the worker the turn and waits until the worker
//   finishes or waits on a `DispatchSemaphore`; a `signal` hands the turn back the same way. On
//   iOS the block would run beside the caller; here it runs first, which is one of the orders iOS
//   could give, and always the same one. Code on a worker may block, as iOS code on a global queue
//   does, and its blocking takes host time (the time until the signal), never wall-clock time.
//
// One thread runs at a time, so the module's state and the host's need no lock. A worker still
// waiting when its app ends stays blocked; its thread is leaked, a few kilobytes, until the
// process exits.

/// Dispatch's queue type, as code that imports LifelineBackgroundTasks names it. An alias, not a
/// class of that name: the Swift compiler takes the closures of any type named `DispatchQueue`
/// to be `@Sendable`, which would refuse Apple's code under Swift 6 for no reason here.
public typealias DispatchQueue = HostDispatchQueue

/// A queue blocks are dispatched to.
public final class HostDispatchQueue: @unchecked Sendable {
    private let isMain: Bool
    public let label: String

    private init(label: String, isMain: Bool) {
        self.label = label
        self.isMain = isMain
    }

    /// The main executor's queue: blocks run on later turns, in order.
    public static let main = HostDispatchQueue(label: "com.apple.main-thread", isMain: true)
    private static let globalQueue = HostDispatchQueue(label: "com.apple.root.default-qos", isMain: false)

    /// The global queue: each block runs on a worker (see above). Every quality of service is the
    /// same one.
    public class func global(qos: Dispatch.DispatchQoS.QoSClass = .default) -> HostDispatchQueue { globalQueue }

    /// Runs `work` later, with the dispatching plugin current. Outside plugin code nothing runs it.
    public func async(execute work: @escaping () -> Void) {
        schedule(after: 0, work)
    }

    /// Runs `work` at `deadline` on the host's clock.
    public func asyncAfter(deadline: DispatchTime, execute work: @escaping () -> Void) {
        schedule(after: max(0, deadline.seconds - DispatchTime.now().seconds), work)
    }

    private func schedule(after seconds: Double, _ work: @escaping () -> Void) {
        guard let app = AppleApp.current, let context = app.context else { return }
        switch (isMain, seconds > 0) {
        case (true, false): app.soon(work)
        case (true, true): context.after(seconds) { app.run(work) }
        case (false, false): Worker.start(app, work)
        case (false, true): context.after(seconds) { Worker.start(app, work) }
        }
    }
}

/// A point on the host's clock (seconds since the host started; virtual in simulate).
public struct DispatchTime: Comparable, Sendable {
    public let seconds: Double

    /// The host's now for the running plugin; 0 outside plugin code.
    public static func now() -> DispatchTime { DispatchTime(seconds: AppleApp.currentContext?.now ?? 0) }
    public static let distantFuture = DispatchTime(seconds: .greatestFiniteMagnitude)

    public static func + (time: DispatchTime, seconds: Double) -> DispatchTime {
        DispatchTime(seconds: time.seconds + seconds)
    }

    public static func + (time: DispatchTime, interval: DispatchTimeInterval) -> DispatchTime {
        let seconds: Double
        switch interval {
        case .seconds(let n): seconds = Double(n)
        case .milliseconds(let n): seconds = Double(n) / 1e3
        case .microseconds(let n): seconds = Double(n) / 1e6
        case .nanoseconds(let n): seconds = Double(n) / 1e9
        case .never: seconds = .greatestFiniteMagnitude
        @unknown default: seconds = 0
        }
        return time + seconds
    }

    public static func < (a: DispatchTime, b: DispatchTime) -> Bool { a.seconds < b.seconds }
}

/// A counting semaphore. `wait` on a worker (a `DispatchQueue.global()` block) blocks it until a
/// `signal`, and lets the main executor run meanwhile. `wait` on the main executor cannot block
/// (the signal could never come): with nothing to take, it returns at once and logs why.
public final class DispatchSemaphore: @unchecked Sendable {
    private var value: Int
    private var waiting: [Worker] = []

    public init(value: Int) { self.value = value }

    public func wait() {
        if value > 0 {
            value -= 1
            return
        }
        guard let worker = Worker.running else {
            AppleApp.currentContext?.logger.error(
                "DispatchSemaphore.wait() on the main executor would block it for good; it returns at once")
            return
        }
        waiting.append(worker)
        worker.yield()
    }

    /// Wakes the oldest waiter, which runs until it finishes or waits again, before `signal`
    /// returns. Returns 1 when it woke one, else 0.
    @discardableResult
    public func signal() -> Int {
        guard !waiting.isEmpty else {
            value += 1
            return 0
        }
        waiting.removeFirst().resume()
        return 1
    }
}

/// One `DispatchQueue.global()` block on a thread of its own, run in turns with the main executor.
final class Worker: @unchecked Sendable {
    /// The worker this thread is; nil on any other thread.
    static var running: Worker? { runningSlot.value }
    private static let runningSlot = ThreadSlot<Worker>()

    private let toWorker = Dispatch.DispatchSemaphore(value: 0)
    private let toCaller = Dispatch.DispatchSemaphore(value: 0)

    /// Starts `work` on a new thread, and waits until it finishes or waits.
    static func start(_ app: AppleApp, _ work: @escaping () -> Void) {
        let worker = Worker()
        let body = UncheckedBox {
            worker.toWorker.wait()
            runningSlot.value = worker
            app.run(work)
            runningSlot.value = nil
            worker.handBack()
        }
        let thread = Thread { body.value() }
        thread.name = "DispatchQueue.global()"
        thread.start()
        worker.resume()
    }

    /// Gives this worker the turn, and waits until it finishes or waits.
    func resume() {
        toWorker.signal()
        toCaller.wait()
    }

    /// On the worker: gives the turn back, and waits for it again.
    func yield() {
        handBack()
        toWorker.wait()
    }

    private func handBack() {
        toCaller.signal()
    }
}

/// A closure handed to a thread that runs it only while its starter waits.
private struct UncheckedBox: @unchecked Sendable {
    let value: () -> Void
    init(_ value: @escaping () -> Void) { self.value = value }
}
