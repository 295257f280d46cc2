import Foundation

/// How `lifeline explore` spends its runs.
public struct ExploreOptions: Sendable {
    public var seed: UInt64
    /// Runs per plugin; `Int.max` with `seconds` for no limit.
    public var runs: Int
    /// Real seconds to spend; nil: until `runs` are done.
    public var seconds: Double?
    public var shard: Shard
    public var jobs: Int
    /// One line per run on stdout.
    public var verbose: Bool

    public init(seed: UInt64, runs: Int, seconds: Double? = nil, shard: Shard = .all, jobs: Int = 1, verbose: Bool = false) {
        self.seed = seed
        self.runs = runs
        self.seconds = seconds
        self.shard = shard
        self.jobs = max(jobs, 1)
        self.verbose = verbose
    }
}

/// The runs of one `lifeline explore`: every target's run numbers in the shard, spread over
/// `jobs` threads, each run a host of its own in this process.
///
/// Work goes out run number first (run 0 of every plugin, then run 1, …), so `--time` spends it
/// evenly. What a plugin keeps is its failing run with the lowest number, whichever thread found
/// it first: once one is known, the plugin's higher-numbered runs are skipped, and lower ones
/// still run. So the failures, and the files, depend only on the seed and the runs, not on
/// `jobs` or on timing.
public final class ExploreSession: @unchecked Sendable {
    /// A plugin's failing run with the lowest number.
    public struct Found: Sendable {
        public var number: Int
        public var run: ExploreCase
        public var failure: ExploreFailure
        public var messages: [String]
    }

    public let targets: [ExploreTarget]
    public let options: ExploreOptions
    /// Writes a line of `--verbose` and of the progress line; stdout and stderr by default.
    public var output: @Sendable (String) -> Void = { line in FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    /// Called on the watchdog's thread when a Swift handler overruns and cannot be stopped (W3):
    /// the run's thread is lost, so the command says so and ends.
    public var onUnpreemptibleOverrun: (@Sendable (ExploreTarget, Int) -> Void)?
    /// Shows progress (on a terminal): called about four times a second with the runs done and
    /// the plugins failing so far.
    public var progress: (@Sendable (_ runs: Int, _ failing: Int) -> Void)?

    private struct State {
        var next = 0
        var found: [Found?]
        var error: LifelineError?
        var done = 0
        /// Verbose lines by work item, printed in order.
        var lines: [Int: String] = [:]
        var printed = 0
        var finished = false
    }

    private let state: Locked<State>

    public init(targets: [ExploreTarget], options: ExploreOptions) {
        self.targets = targets
        self.options = options
        state = Locked(State(found: Array(repeating: nil, count: targets.count)))
    }

    /// Runs done so far (skipped ones not counted).
    public var runsDone: Int { state.withLock { $0.done } }

    /// Explores, and returns each target's failure, if any, by index. Throws the first error a
    /// run threw: a plugin that cannot load (65) or an internal error.
    public func explore() throws(LifelineError) -> [Found?] {
        let start = ContinuousClock.now
        let deadline = options.seconds.map { start + .milliseconds(Int64(($0 * 1000).rounded(.up))) }
        let done = DispatchGroup()
        for _ in 0..<options.jobs {
            done.enter()
            // A thread each: a run blocks its thread, which Dispatch's pool would not widen for.
            let thread = Thread { [self] in
                do throws(LifelineError) {
                    try StateDatabase.withTemporary { database in work(deadline: deadline, database: database) }
                } catch {
                    state.withLock { $0.error = $0.error ?? error }
                }
                done.leave()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        if let progress {
            while done.wait(timeout: .now() + .milliseconds(250)) == .timedOut {
                let (runs, failing) = state.withLock { s in (s.done, s.found.compactMap { $0 }.count) }
                progress(runs, failing)
            }
        } else {
            done.wait()
        }
        return try state.withLock { s throws(LifelineError) in
            if let error = s.error { throw error }
            return s.found
        }
    }

    /// The run number of work item `item`, or nil past the last.
    private func runNumber(_ item: Int) -> (run: Int, target: Int)? {
        let slot = item / targets.count
        let (run, overflow) = (options.shard.index - 1).addingReportingOverflow(slot.multipliedReportingOverflow(by: options.shard.count).partialValue)
        guard !overflow, run < options.runs else { return nil }
        return (run, item % targets.count)
    }

    private func work(deadline: ContinuousClock.Instant?, database: StateDatabase) {
        while true {
            let claimed: (item: Int, run: Int, target: Int)? = state.withLock { s in
                guard s.error == nil, !s.finished else { return nil }
                if let deadline, ContinuousClock.now >= deadline {
                    s.finished = true
                    return nil
                }
                let item = s.next
                guard let (run, target) = runNumber(item) else {
                    s.finished = true
                    return nil
                }
                s.next += 1
                return (item, run, target)
            }
            guard let (item, number, index) = claimed else { return }
            let target = targets[index]
            let skip = state.withLock { s in s.found[index].map { $0.number < number } ?? false }
            var line: String?
            if !skip {
                let run = target.generator.draw(seed: options.seed, plugin: target.plugin, run: number)
                do {
                    let overrun = onUnpreemptibleOverrun
                    guard
                        let outcome = try Explorer.run(
                            run, target, database: database, onUnpreemptibleOverrun: { _ in overrun?(target, number) })
                    else {
                        state.withLock {
                            $0.error = $0.error ?? .internalError("explore drew a scenario it cannot read: run \(number) of \(target.plugin)")
                        }
                        return
                    }
                    let steps = target.settings.scenario.entries.count + run.moves.count
                    state.withLock { s in
                        s.done += 1
                        if let failure = outcome.failures.first {
                            if s.found[index].map({ number < $0.number }) ?? true {
                                s.found[index] = Found(number: number, run: run, failure: failure, messages: outcome.messages)
                            }
                        }
                    }
                    if options.verbose {
                        line =
                            "\(target.plugin) run \(number): "
                            + (outcome.failures.first.map { "FAIL \($0.summary)" } ?? "ok") + " (\(steps) steps)"
                    }
                } catch {
                    state.withLock { $0.error = $0.error ?? error }
                    return
                }
            } else if options.verbose {
                line = "\(target.plugin) run \(number): skipped (a run before it failed)"
            }
            if options.verbose {
                let ready: [String] = state.withLock { s in
                    s.lines[item] = line
                    var out: [String] = []
                    while let next = s.lines.removeValue(forKey: s.printed) {
                        out.append(next)
                        s.printed += 1
                    }
                    return out
                }
                for l in ready { output(l) }
            }
        }
    }
}
