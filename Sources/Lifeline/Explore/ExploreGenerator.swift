/// Draws the runs of `lifeline explore` (docs/explore.md).
///
/// Each run uses a random subset of the allowed kinds of step and of the kinds of HTTP answer:
/// swarm testing (Groce et al., ISSTA 2012). A run that may only rarely draw a memory warning, or
/// never a foreground, reaches states that a run drawing evenly from everything does not.
///
/// Only steps the lifecycle allows in the state the steps before leave are drawn, and none the
/// profile lacks (ios6 never fetches), so every run is a valid scenario.
public struct ExploreGenerator: Sendable {
    public var settings: ExploreSettings
    public var profile: Profile
    /// The most steps a run draws (after explore.scenario's own).
    public static let maximumSteps = 20
    /// The most drawn answers a run gives the plugin's requests, the last repeating.
    public static let maximumAnswers = 6

    public init(settings: ExploreSettings, profile: Profile) {
        self.settings = settings
        self.profile = profile
    }

    /// The kinds of answer a run draws from.
    private enum AnswerKind: CaseIterable {
        case success, failure, hang, refuse, slow, size
    }

    /// Run `run` of `plugin` under `seed`: the same arguments give the same run on every machine.
    public func draw(seed: UInt64, plugin: String, run: Int) -> ExploreCase {
        var random = ExploreRandom(seed: seed, plugin: plugin, run: run)
        // The swarm: each kind joins this run with even odds; `launch` always may, so the app
        // can start, and an empty draw takes them all.
        var kinds = settings.kinds.filter { $0 == .launch || random.chance(0.5) }
        if kinds.isEmpty { kinds = settings.kinds }
        var lifecycle = Lifecycle()
        for entry in settings.scenario.entries { _ = try? lifecycle.apply(entry.step) }
        let count = Int.random(in: 1...Self.maximumSteps, using: &random)
        // Waits reach past the budget, so a task outlives it; now and then far past it, so a
        // scheduled task's earliest begin or a suspended app's timer comes round.
        let longWait = Int64(max(profile.budget, 1) * 2 * 1000)
        let first = settings.scenario.entries.isEmpty
        let figures: [Double] = [
            profile.budget - profile.expirationLead, profile.budget, profile.expirationLead,
            profile.expirationHandlerLimit, profile.transitionLimit, profile.backgroundLimit, profile.fetchLimit,
            profile.refreshTaskLimit, profile.processingTaskLimit, 10,
        ]
        let edges: [Int64] = figures.filter { $0.isFinite && $0 > 0 && $0 < 86_400 }.map { Int64($0 * 1000) }
        var moves: [ExploreCase.Move] = []
        for index in 0..<count {
            let candidates = kinds.compactMap { kind -> Step? in
                let step = self.step(kind, &random)
                var copy = lifecycle
                guard profile.lacks(step) == nil, (try? copy.apply(step)) != nil else { return nil }
                return step
            }
            guard let step = candidates.randomElement(using: &random) else { break }
            _ = try? lifecycle.apply(step)
            let wait: Int64
            if index == 0 && first {
                wait = 0
            } else if random.chance(0.1) {
                wait = random.logUniform(1, 3_600_000)
            } else if !edges.isEmpty, random.chance(0.25) {
                // Near a figure of the rules: the expiration handlers' call, the budget's end, a
                // watchdog limit. Bugs gather at the edges, which spread-out waits rarely hit.
                let figure = edges.randomElement(using: &random)!
                wait = max(1, figure + Int64.random(in: -1000...1000, using: &random))
            } else {
                wait = random.logUniform(1, longWait)
            }
            moves.append(ExploreCase.Move(wait: wait, step: step))
        }
        var answerKinds = AnswerKind.allCases.filter { _ in random.chance(0.5) }
        if answerKinds.isEmpty { answerKinds = AnswerKind.allCases }
        let answers = (0..<Int.random(in: 1...Self.maximumAnswers, using: &random)).map { _ in
            answer(answerKinds.randomElement(using: &random)!, &random)
        }
        return ExploreCase(moves: moves, answers: answers)
    }

    /// A step of `kind`, with its argument drawn.
    private func step(_ kind: ExploreStepKind, _ random: inout ExploreRandom) -> Step {
        switch kind {
        case .launch: return random.chance(0.5) ? .launch : .launchInBackground
        case .background: return .background
        case .foreground: return .foreground
        case .resign: return .resign
        case .activate: return .activate
        case .terminate: return .terminate
        case .kill: return .kill
        case .forceQuit: return .forceQuit
        case .memoryWarning: return .memoryWarning
        case .fetch: return .fetch
        case .push: return .push(payload: Step.defaultPushPayload)
        case .runTasks:
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return .runTasks(.kind(.refresh))
            case 1: return .runTasks(.kind(.processing))
            default: return .runTasks(.all)
            }
        case .charging: return .charging(random.chance(0.5))
        case .network: return .network(random.chance(0.5))
        }
    }

    /// An answer of `kind`, in the scripted network's vocabulary.
    private func answer(_ kind: AnswerKind, _ random: inout ExploreRandom) -> NetworkRule.Result {
        let delay = random.chance(0.5) ? 0 : Double(random.logUniform(1, 30_000)) / 1000
        switch kind {
        case .success:
            return .respond(status: [200, 200, 201, 204].randomElement(using: &random)!, body: "", delay: delay)
        case .failure:
            let status = [400, 401, 403, 404, 408, 429, 500, 502, 503, 504].randomElement(using: &random)!
            return .respond(status: status, body: "", delay: delay)
        case .hang: return .hang
        case .refuse: return .refuse(delay: delay)
        case .slow:
            return .stream(
                status: 200, size: random.logUniform(1, 1 << 20), rate: Double(random.logUniform(100, 1 << 20)),
                delay: delay)
        case .size: return .stream(status: 200, size: random.logUniform(0, 1 << 20), rate: nil, delay: delay)
        }
    }
}
