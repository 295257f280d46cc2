import Foundation

/// How a run of `lifeline explore` failed: what shrinking keeps, so a shrunk run fails the same way.
public enum ExploreFailure: Hashable, Sendable {
    /// The host terminated the app by a rule.
    case terminated(Termination.Kind)
    /// A plugin raised an error; the message up to its `file.lua:LINE:` where it names one (the
    /// rest may hold values that differ from run to run), else the whole message.
    case pluginError(String)
    /// An `expect` line of explore.scenario did not hold: its text.
    case expectation(String)

    /// What `lifeline explore` prints: `terminated (backgroundTaskTimeout, 0x2182bad2)`,
    /// `pluginError at ./sync/init.lua:43`, `'no taskExpired' failed`.
    public var summary: String {
        switch self {
        case .terminated(let kind): return "terminated (\(kind.rawValue), \(kind.code))"
        case .pluginError(let location):
            return location.hasSuffix(":") ? "pluginError at \(location.dropLast())" : "pluginError: \(location)"
        case .expectation(let text): return "'\(text)' failed"
        }
    }

    /// The part of a plugin error's message that says where it was raised.
    static func location(of message: String) -> String {
        let bytes = Array(message.utf8)
        var i = 0
        while i + 5 <= bytes.count {
            // ".lua:" followed by digits and a colon.
            if bytes[i] == UInt8(ascii: "."), bytes[i + 1] == UInt8(ascii: "l"), bytes[i + 2] == UInt8(ascii: "u"),
                bytes[i + 3] == UInt8(ascii: "a"), bytes[i + 4] == UInt8(ascii: ":")
            {
                var j = i + 5
                while j < bytes.count, bytes[j] >= UInt8(ascii: "0"), bytes[j] <= UInt8(ascii: "9") { j += 1 }
                if j > i + 5, j < bytes.count, bytes[j] == UInt8(ascii: ":") {
                    return String(decoding: bytes[...j], as: UTF8.self)
                }
            }
            i += 1
        }
        return message
    }
}

/// What one run of `lifeline explore` gave.
public struct ExploreOutcome: Sendable {
    /// Every way the run failed, the first the one shrinking keeps; empty when it passed.
    public var failures: [ExploreFailure]
    /// The message of each failure, in the same order: a termination's reason, a plugin error's
    /// message, an expectation's own (`FILE:LINE: expected …`).
    public var messages: [String]
    public var recorder: Recorder

    /// The message of `failure`, if the run failed that way.
    public func message(_ failure: ExploreFailure) -> String? {
        failures.firstIndex(of: failure).map { messages[$0] }
    }
}

/// What `lifeline explore` explores for one plugin: the settings of its explore.scenario, the
/// plugins to load, and the setup (profile, limits, task policy) every run gets.
public struct ExploreTarget: Sendable {
    /// The plugin explored, whose name files and messages carry.
    public var plugin: String
    public var settings: ExploreSettings
    /// The plugin, and those its explore.scenario `uses`.
    public var setup: RunSetup

    public init(plugin: String, settings: ExploreSettings, setup: RunSetup) {
        self.plugin = plugin
        self.settings = settings
        self.setup = setup
    }

    /// Draws runs for this target.
    public var generator: ExploreGenerator { ExploreGenerator(settings: settings, profile: setup.profile) }
}

/// Runs, checks and shrinks the runs of `lifeline explore` (docs/explore.md).
public enum Explorer {
    /// The most runs shrinking one failure may make: each is one simulation, a millisecond or so.
    public static let shrinkAttempts = 2000

    /// Runs `run` and checks it: no termination by a rule, no `pluginError`, and every `expect`
    /// line of explore.scenario, with the implicit rules of a scenario's expect lines
    /// (docs/testing.md). Returns nil for a run that is not a valid scenario (shrinking makes
    /// those; the generator does not). Throws what a simulation throws: a plugin that cannot load
    /// (65) or an internal error.
    ///
    /// - Parameter database: a state to empty and use (one per thread saves making and migrating
    ///   a file for each run); nil: a temporary state dir, removed afterwards.
    public static func run(
        _ run: ExploreCase, _ target: ExploreTarget, database: StateDatabase? = nil,
        onUnpreemptibleOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)? = nil
    ) throws(LifelineError) -> ExploreOutcome? {
        let text = run.scenarioText(settings: target.settings)
        guard let scenario = try? Scenario.parse(text, fileName: target.settings.fileName) else { return nil }
        try database?.erase()
        let recorder = try Simulation.run(
            scenario: scenario, setup: target.setup, database: database, onUnpreemptibleOverrun: onUnpreemptibleOverrun)
        return check(recorder, scenario: scenario)
    }

    /// The verdict on a finished run.
    static func check(_ recorder: Recorder, scenario: Scenario) -> ExploreOutcome {
        var outcome = ExploreOutcome(failures: [], messages: [], recorder: recorder)
        guard !scenario.expectations.isEmpty else {
            if let termination = recorder.termination {
                outcome.failures.append(.terminated(termination.kind))
                outcome.messages.append(termination.reason)
            }
            if recorder.pluginErrorCount > 0 {
                for event in recorder.timeline where event.name == .pluginError {
                    guard case .string(let message)? = event["message"] else { continue }
                    outcome.failures.append(.pluginError(ExploreFailure.location(of: message)))
                    outcome.messages.append(message)
                }
            }
            return outcome
        }
        let report = recorder.report()
        for result in Expectation.check(scenario.expectations, report: report, fileName: scenario.fileName)
        where !result.passed {
            switch result.expectation.kind {
            case .noUnexpectedTermination:
                outcome.failures.append(.terminated(recorder.termination?.kind ?? .watchdog))
            case .noUnexpectedPluginError:
                let message = result.pluginError ?? ""
                outcome.failures.append(.pluginError(ExploreFailure.location(of: message)))
                outcome.messages.append(message)
                continue
            default:
                outcome.failures.append(.expectation(result.expectation.text))
            }
            outcome.messages.append(result.message)
        }
        return outcome
    }

    /// Whether `run` fails with `failure` among its failures.
    private static func fails(
        _ run: ExploreCase, _ failure: ExploreFailure, _ target: ExploreTarget, _ database: StateDatabase,
        _ attempts: inout Int
    ) -> Bool {
        guard attempts > 0 else { return false }
        attempts -= 1
        guard let outcome = try? Explorer.run(run, target, database: database) else { return false }
        return outcome.failures.contains(failure)
    }

    /// Reduces a failing run to a smallest one that still fails with `failure`: the fewest steps,
    /// then the earliest times, then the fewest and plainest answers. Each pass tries one kind of
    /// reduction, and any that keeps the failure is kept; the passes repeat until none does
    /// (delta debugging, Zeller 2002), or `shrinkAttempts` runs are spent. Every kept reduction
    /// makes the run smaller in that order, so this ends.
    public static func shrink(_ run: ExploreCase, failing failure: ExploreFailure, _ target: ExploreTarget)
        -> ExploreCase
    {
        (try? StateDatabase.withTemporary { database in shrink(run, failing: failure, target, database) }) ?? run
    }

    private static func shrink(
        _ run: ExploreCase, failing failure: ExploreFailure, _ target: ExploreTarget, _ database: StateDatabase
    ) -> ExploreCase {
        var best = run
        var attempts = shrinkAttempts
        var improved = true
        while improved && attempts > 0 {
            improved = false
            // Drop steps: halves first, then quarters, down to one at a time. A dropped step's
            // wait goes to the step after, so the steps left keep their times.
            var chunk = max(best.moves.count / 2, 1)
            while chunk >= 1 && !best.moves.isEmpty {
                var start = 0
                while start + chunk <= best.moves.count {
                    var candidate = best
                    let dropped = candidate.moves[start..<start + chunk].reduce(0) { $0 + $1.wait }
                    candidate.moves.removeSubrange(start..<start + chunk)
                    if start < candidate.moves.count { candidate.moves[start].wait += dropped }
                    candidate = allowed(candidate, after: target.settings.scenario)
                    if fails(candidate, failure, target, database, &attempts) {
                        best = candidate
                        improved = true
                    } else {
                        start += 1
                    }
                }
                chunk /= 2
            }
            // Move a step earlier: to the time of the step before it, then halfway there; the
            // steps after it keep their times.
            for index in best.moves.indices where best.moves[index].wait > 0 {
                for newWait in candidateWaits(best.moves[index].wait) {
                    var candidate = best
                    let saved = candidate.moves[index].wait - newWait
                    candidate.moves[index].wait = newWait
                    if index + 1 < candidate.moves.count { candidate.moves[index + 1].wait += saved }
                    if fails(candidate, failure, target, database, &attempts) {
                        best = candidate
                        improved = true
                        break
                    }
                }
            }
            // Shorten a wait: the step and every step after it come earlier.
            for index in best.moves.indices where best.moves[index].wait > 0 {
                for newWait in candidateWaits(best.moves[index].wait) {
                    var candidate = best
                    candidate.moves[index].wait = newWait
                    if fails(candidate, failure, target, database, &attempts) {
                        best = candidate
                        improved = true
                        break
                    }
                }
            }
            // No drawn answers at all (a plugin that sends no request needs none), else fewer
            // (the last repeats, so dropping one from the end changes only the requests past
            // it), then plain ones.
            if !best.answers.isEmpty {
                var candidate = best
                candidate.answers = []
                if fails(candidate, failure, target, database, &attempts) {
                    best = candidate
                    improved = true
                }
            }
            while best.answers.count > 1 {
                var candidate = best
                candidate.answers.removeLast()
                guard fails(candidate, failure, target, database, &attempts) else { break }
                best = candidate
                improved = true
            }
            for index in best.answers.indices where best.answers[index] != ExploreCase.plainAnswer {
                var candidate = best
                candidate.answers[index] = ExploreCase.plainAnswer
                if fails(candidate, failure, target, database, &attempts) {
                    best = candidate
                    improved = true
                }
            }
        }
        return best
    }

    /// `run` without the steps the lifecycle refuses once others are gone: a `launch` after the
    /// `kill` before it was dropped, then the `foreground` that needed that launch. Dropping a
    /// step often leaves such steps behind; dropping them too lets shrinking go past them.
    static func allowed(_ run: ExploreCase, after prefix: Scenario) -> ExploreCase {
        var lifecycle = Lifecycle()
        for entry in prefix.entries { _ = try? lifecycle.apply(entry.step) }
        var kept = run
        kept.moves = []
        var carried: Int64 = 0
        for move in run.moves {
            if (try? lifecycle.apply(move.step)) != nil {
                kept.moves.append(ExploreCase.Move(wait: move.wait + carried, step: move.step))
                carried = 0
            } else {
                carried += move.wait
            }
        }
        return kept
    }

    /// Shorter waits to try in place of `wait` milliseconds, shortest first: none, whole
    /// seconds, then halves.
    private static func candidateWaits(_ wait: Int64) -> [Int64] {
        var waits: [Int64] = [0]
        if wait > 1000, wait % 1000 != 0 { waits.append(wait / 1000 * 1000) }
        if wait / 2 > 0 { waits.append(wait / 2) }
        return waits
    }
}
