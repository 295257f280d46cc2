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
    }

    private struct Job {
        var time: HostTime
        /// When the job first fell due; differs from `time` once a held job is released, so
        /// released jobs keep the order they fell due in.
        var due: HostTime
        var seq: UInt64
        var owner: Owner
        func runsBefore(_ other: Job) -> Bool {
            if time != other.time { return time < other.time }
            if due != other.due { return due < other.due }
            return seq < other.seq
        }
    }

    public let clock: any HostClock
    /// Jobs in the order they run, when each is scheduled no earlier than the one before it: the
    /// common case (work for the next turn), which then costs no heap operations.
    private var lane: [Job?] = []
    private var laneHead = 0
    /// Every other job: a binary min-heap on (time, due, seq).
    private var heap: [Job] = []
    private var held: [Job] = []
    private var cancelled: Set<UInt64> = []
    /// The bodies of jobs queued or held, by sequence number: cancelling a job frees its body (and
    /// all it captured) at once, and cancelling one that already ran leaves nothing behind.
    private var bodies: [UInt64: () -> Void] = [:]
    private var nextSeq: UInt64 = 0

    /// Whether app jobs may run now; the host says no while the app is suspended (SPEC 3).
    public var appJobsAllowed: (Int) -> AppJobPolicy = { _ in .run }

    /// What to do with an app job that falls due.
    public enum AppJobPolicy { case run, hold, drop }

    public init(clock: any HostClock) { self.clock = clock }

    /// The time now, on the executor's clock.
    public var now: HostTime { clock.now }

    /// Schedules `body` at `time` (the next turn, if that is now or past).
    @discardableResult
    public func schedule(at time: HostTime, owner: Owner = .host, _ body: @escaping () -> Void) -> JobID {
        let job = Job(time: time, due: time, seq: nextSeq, owner: owner)
        nextSeq += 1
        bodies[job.seq] = body
        if laneHead == lane.count || !job.runsBefore(lane[lane.count - 1]!) {
            lane.append(job)
        } else {
            push(job)
        }
        return JobID(seq: job.seq)
    }

    /// Hands work to the executor from any thread: it runs as a host job at the time it arrives.
    public func post(_ work: @escaping @Sendable () -> Void) { clock.post(work) }

    /// Cancels a job that has not run yet; harmless otherwise.
    public func cancel(_ id: JobID) {
        guard bodies.removeValue(forKey: id.seq) != nil else { return }
        cancelled.insert(id.seq)
        compactIfMostlyCancelled()
    }

    /// A cancelled job's entry stays queued until it comes up; when most entries are cancelled
    /// ones, they are dropped, so a plugin that starts and cancels timers forever cannot make the
    /// queue grow without bound.
    private func compactIfMostlyCancelled() {
        let queued = heap.count + (lane.count - laneHead) + held.count
        guard cancelled.count > 1024, cancelled.count * 2 > queued else { return }
        let live = { (job: Job) in !self.cancelled.contains(job.seq) }
        heap = heap.filter(live).sorted { $0.runsBefore($1) }  // a sorted array is a heap
        lane = lane[laneHead...].compactMap { $0 }.filter(live).map { Optional($0) }
        laneHead = 0
        held = held.filter(live)
        cancelled.removeAll()
    }

    /// Puts held app jobs back in the queue, to run now in the order they fell due.
    public func releaseHeld() {
        let jobs = held
        held.removeAll()
        let now = clock.now
        for var job in jobs {
            job.time = max(job.time, now)
            push(job)
        }
    }

    /// Whether any job could still run: held jobs do not count.
    public var hasPendingJobs: Bool {
        heap.contains { !cancelled.contains($0.seq) } || lane[laneHead...].contains { !cancelled.contains($0!.seq) }
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
            guard let body = bodies.removeValue(forKey: job.seq) else { continue }
            body()
            afterJob()
        }
    }

    // Drops cancelled and stale jobs and holds suspended-app jobs until one can run.
    private func peekRunnable() -> Job? {
        while let top = peekNext() {
            if !cancelled.isEmpty, cancelled.remove(top.seq) != nil {
                _ = popNext()
                continue
            }
            if case .app(let generation) = top.owner {
                switch appJobsAllowed(generation) {
                case .run: break
                case .hold:
                    held.append(popNext())
                    continue
                case .drop:
                    bodies.removeValue(forKey: popNext().seq)
                    continue
                }
            }
            return top
        }
        return nil
    }

    /// Whether the next job is the lane's; nil when there are none.
    private func laneIsNext() -> Bool? {
        let laneEmpty = laneHead == lane.count
        if heap.isEmpty { return laneEmpty ? nil : true }
        if laneEmpty { return false }
        return lane[laneHead]!.runsBefore(heap[0])
    }

    private func peekNext() -> Job? {
        switch laneIsNext() {
        case true?: return lane[laneHead]
        case false?: return heap[0]
        case nil: return nil
        }
    }

    private func popNext() -> Job {
        guard laneIsNext() == true else { return popMin() }
        let job = lane[laneHead]!
        lane[laneHead] = nil
        laneHead += 1
        if laneHead == lane.count {
            lane.removeAll(keepingCapacity: true)
            laneHead = 0
        } else if laneHead > 1024 && laneHead * 2 > lane.count {
            lane.removeFirst(laneHead)
            laneHead = 0
        }
        return job
    }

    // A binary min-heap on (time, seq).
    private func push(_ job: Job) {
        heap.append(job)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].runsBefore(heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private func popMin() -> Job {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < heap.count && heap[l].runsBefore(heap[m]) { m = l }
                if r < heap.count && heap[r].runsBefore(heap[m]) { m = r }
                if m == i { break }
                heap.swapAt(i, m)
                i = m
            }
        }
        return top
    }
}
