import DequeModule
import HeapModule

/// Work that is its own job: scheduling it makes no closure. A background work's slices are
/// scheduled this way, one job per slice, where a closure around a closure around a closure cost
/// three allocations and their releases.
package protocol HostJob: AnyObject {
    func runJob()
}

/// The one executor that runs all plugin code, like iOS's main thread: a queue of jobs ordered
/// by time, then by the order they were scheduled.
///
/// Threading: main executor only. Other threads hand work in through the clock's inbox.
public final class MainExecutor {
    /// Who a job belongs to. App jobs belong to one launch of the app: they are held while the app
    /// is suspended and dropped once that launch has ended.
    public enum Owner: Equatable {
        case host
        case app(generation: Int)
    }

    /// A scheduled job's handle, for cancelling it.
    public struct JobID: Hashable, Sendable {
        fileprivate let seq: UInt64
        fileprivate let slot: Int32
    }

    /// Ordered by (time, due, seq): the sequence number is unique, so the order is total and a
    /// run repeats exactly.
    private struct Job: Comparable {
        var time: HostTime
        /// When the job first fell due; differs from `time` once a held job is released, so
        /// released jobs keep the order they fell due in.
        var due: HostTime
        var seq: UInt64
        var owner: Owner
        /// Where its body is in `slots`.
        var slot: Int32
        static func < (a: Job, b: Job) -> Bool {
            if a.time != b.time { return a.time < b.time }
            if a.due != b.due { return a.due < b.due }
            return a.seq < b.seq
        }
        static func == (a: Job, b: Job) -> Bool { a.seq == b.seq }
    }

    public let clock: any HostClock
    // Every job touches these several times, and the runtime's exclusivity check on each access
    // cost about 300 instructions a job. No access outlives the statement it is in: a job's body
    // and `appJobsAllowed` are copied out before they are called, so a job that schedules or
    // cancels another never overlaps one, and the check is skipped.

    /// Runs of jobs in the order they run: a job goes to the end of the first run whose last job
    /// runs no later than it, and only when none can take it, to the heap. Work for the next turn
    /// fills one run; a scenario's steps, scheduled up front, another; the background budget's
    /// deadlines a third; and the timers plugins set, each a fixed delay on, a fourth. A heap of a
    /// thousand timers cost about 800 instructions a job; a run costs one comparison.
    @exclusivity(unchecked) private var lanes = [Deque<Job>](repeating: Deque(), count: 4)
    /// Every other job.
    @exclusivity(unchecked) private var heap = Heap<Job>()
    @exclusivity(unchecked) private var held: [Job] = []
    /// The bodies of jobs queued or held, each in a slot with its job's sequence number: cancelling
    /// a job frees its body (and all it captured) at once, and cancelling one that already ran
    /// leaves nothing behind. A queued job whose slot no longer holds its number was cancelled,
    /// and is skipped when it comes up. Slots are reused through `freeSlots`; a table keyed by
    /// sequence number cost two hashed operations a job.
    @exclusivity(unchecked) private var slots: [Slot] = []
    @exclusivity(unchecked) private var freeSlots: [Int32] = []
    /// How many queued or held entries belong to cancelled jobs.
    @exclusivity(unchecked) private var cancelledCount = 0
    @exclusivity(unchecked) private var nextSeq: UInt64 = 0

    private struct Slot {
        var seq: UInt64
        var body: Body?
    }

    private enum Body {
        case closure(() -> Void)
        case job(any HostJob)

        func run() {
            switch self {
            case .closure(let body): body()
            case .job(let job): job.runJob()
            }
        }
    }

    /// Whether app jobs may run now; the host says no while the app is suspended (SPEC 3).
    @exclusivity(unchecked) public var appJobsAllowed: (Int) -> AppJobPolicy = { _ in .run }

    /// What to do with an app job that falls due.
    public enum AppJobPolicy { case run, hold, drop }

    public init(clock: any HostClock) { self.clock = clock }

    /// The time now, on the executor's clock.
    public var now: HostTime { clock.now }

    /// Schedules `body` at `time` (the next turn, if that is now or past).
    @discardableResult
    public func schedule(at time: HostTime, owner: Owner = .host, _ body: @escaping () -> Void) -> JobID {
        schedule(at: time, owner: owner, body: .closure(body))
    }

    /// Schedules `job.runJob()` at `time`, as `schedule(at:owner:_:)` schedules a closure.
    @discardableResult
    package func schedule(at time: HostTime, owner: Owner = .host, job: any HostJob) -> JobID {
        schedule(at: time, owner: owner, body: .job(job))
    }

    private func schedule(at time: HostTime, owner: Owner, body: Body) -> JobID {
        let seq = nextSeq
        nextSeq += 1
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(free)] = Slot(seq: seq, body: body)
        } else {
            slot = Int32(slots.count)
            slots.append(Slot(seq: seq, body: body))
        }
        let job = Job(time: time, due: time, seq: seq, owner: owner, slot: slot)
        if let lane = lanes.firstIndex(where: { $0.last.map { !(job < $0) } ?? true }) {
            lanes[lane].append(job)
        } else {
            heap.insert(job)
        }
        return JobID(seq: seq, slot: slot)
    }

    /// Whether the job is still to run: not cancelled, dropped or run.
    private func isLive(_ job: Job) -> Bool { slots[Int(job.slot)].seq == job.seq && slots[Int(job.slot)].body != nil }

    /// Takes the job's body out of its slot and frees the slot; nil if the job is not live.
    private func takeBody(seq: UInt64, slot: Int32) -> Body? {
        let index = Int(slot)
        guard index < slots.count, slots[index].seq == seq, let body = slots[index].body.take() else { return nil }
        freeSlots.append(slot)
        return body
    }

    /// Hands work to the executor from any thread: it runs as a host job at the time it arrives.
    public func post(_ work: @escaping @Sendable () -> Void) { clock.post(work) }

    /// Cancels a job that has not run yet; harmless otherwise.
    public func cancel(_ id: JobID) {
        guard takeBody(seq: id.seq, slot: id.slot) != nil else { return }
        cancelledCount += 1
        compactIfMostlyCancelled()
    }

    /// A cancelled job's entry stays queued until it comes up; when most entries are cancelled
    /// ones, they are dropped, so a plugin that starts and cancels timers forever cannot make the
    /// queue grow without bound.
    private func compactIfMostlyCancelled() {
        let queued = heap.count + lanes.reduce(0) { $0 + $1.count } + held.count
        guard cancelledCount > 1024, cancelledCount * 2 > queued else { return }
        heap = Heap(heap.unordered.filter(isLive))
        for i in lanes.indices { lanes[i] = Deque(lanes[i].filter(isLive)) }
        held = held.filter(isLive)
        cancelledCount = 0
    }

    /// Puts held app jobs back in the queue, to run now in the order they fell due.
    public func releaseHeld() {
        let jobs = held
        held.removeAll()
        let now = clock.now
        for var job in jobs {
            job.time = max(job.time, now)
            heap.insert(job)
        }
    }

    /// Whether any job could still run: held jobs do not count.
    public var hasPendingJobs: Bool {
        heap.unordered.contains(where: isLive) || lanes.contains { $0.contains(where: isLive) }
    }

    /// Whether a job that can run now is waiting: one due by the clock's time.
    public var hasJobDueNow: Bool { peekRunnable().map { $0.time <= clock.now } ?? false }

    /// Runs jobs in order until `shouldStop` says so, the queue is empty on a virtual clock, or the
    /// next job lies past `limit`. `afterJob` runs after every job.
    public func run(until limit: HostTime? = nil, shouldStop: () -> Bool, afterJob: () -> Void = {}) {
        while !shouldStop() {
            // The next job's time, unless it lies past the limit.
            var due = peekRunnable()?.time
            if let d = due, let limit, d > limit { due = nil }
            if due == nil || due! > clock.now {
                // Wait for the job, the limit, or outside work (run mode), whichever comes first.
                // A virtual clock with nothing to wait for says so: we are done.
                guard let posted = clock.wait(until: due ?? limit) else { return }
                if posted.isEmpty, due == nil, let limit, clock.now >= limit { return }
                for work in posted { schedule(at: clock.now, work) }
                continue
            }
            let job = popNext()
            guard let body = takeBody(seq: job.seq, slot: job.slot) else { continue }
            body.run()
            afterJob()
        }
    }

    // Drops cancelled and stale jobs and holds suspended-app jobs until one can run.
    private func peekRunnable() -> Job? {
        while let top = peekNext() {
            if cancelledCount > 0, !isLive(top) {
                _ = popNext()
                cancelledCount -= 1
                continue
            }
            if case .app(let generation) = top.owner {
                switch appJobsAllowed(generation) {
                case .run: break
                case .hold:
                    held.append(popNext())
                    continue
                case .drop:
                    let job = popNext()
                    _ = takeBody(seq: job.seq, slot: job.slot)
                    continue
                }
            }
            return top
        }
        return nil
    }

    /// The next job in order, the least of the runs' firsts and the heap's least, and where it is:
    /// the run's index, or nil for the heap.
    private func next() -> (job: Job, lane: Int?)? {
        var best: (job: Job, lane: Int?)? = heap.min.map { ($0, nil) }
        for i in lanes.indices {
            if let first = lanes[i].first, best.map({ first < $0.job }) ?? true { best = (first, i) }
        }
        return best
    }

    private func peekNext() -> Job? { next()?.job }

    private func popNext() -> Job {
        guard let lane = next()!.lane else { return heap.removeMin() }
        return lanes[lane].removeFirst()
    }
}
