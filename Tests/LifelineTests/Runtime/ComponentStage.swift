import LifelineTesting

@testable import Lifeline
@testable import LifelineRules

/// What a component stands on, without a host: a session on a virtual clock, a caller with its
/// watchdog, the bus's table, and a stand-in coordinator that writes what components request.
/// Plugins are refs in the roster with stand-in code; their handlers are closures the test
/// subscribes itself.
final class ComponentStage: HostRequestHandler {
    let executor = MainExecutor(clock: VirtualClock())
    let profile: Profile
    let recorder: Recorder
    let session: AppSession
    let caller: GuardedCaller
    let subscriptions = SubscriptionTable()
    /// What components asked of the coordinator, in order, as words.
    private(set) var requests: [String] = []

    init(profile: Profile = .ios13) {
        self.profile = profile
        recorder = Recorder(profile: profile)
        session = AppSession(executor: executor, recorder: recorder, profile: profile, logger: quietLogger())
        caller = GuardedCaller(session: session, configuration: HostConfiguration(profile: profile, logger: quietLogger()))
        session.handler = self
    }

    deinit { caller.shutdown() }

    /// The coordinator's part, as far as a component can tell: a termination is written once and
    /// the app ends; a wake of a running app changes nothing.
    func handle(_ request: HostRequest) {
        switch request {
        case .terminate(let termination, let target):
            requests.append("terminate \(termination.kind.rawValue): \(termination.reason)")
            session.recordTermination(termination, watchdog: target)
            if session.appRunning { session.end() }
        case .endApp:
            requests.append("endApp")
            if session.appRunning { session.end() }
        case .wake(let reason): requests.append("wake \(reason)")
        case .relaunch(let reason): requests.append("relaunch \(reason)")
        }
    }

    /// Launches the app in the background with one plugin per name; returns their refs.
    func launch(_ names: [String], taskIdentifiers: [String] = []) -> [PluginRef] {
        session.beginLaunch(inBackground: true)
        return names.map { name in
            let ref = session.nextRef(name: name)
            session.add(
                LoadedPlugin(
                    ref: ref, code: StandInCode(), network: .none, taskIdentifiers: taskIdentifiers,
                    watchdogSlot: caller.register(WatchdogSubject(plugin: name, preemptor: nil))))
            return ref
        }
    }

    /// Runs the executor's jobs up to `seconds` of virtual time.
    func run(until seconds: Double) {
        executor.run(until: .seconds(seconds), shouldStop: { false })
    }

    /// The timeline as lines, as `lines(_:only:)` gives it.
    func timeline(only: Set<String>? = nil) -> [String] { lines(recorder, only: only) }
}

/// Plugin code that is not there: nothing to stop or close. The handlers a test subscribes are
/// what runs.
final class StandInCode: PluginCode {
    var preemptor: (any Preemptible)? { nil }
    func resetPreemption() {}
    func close() {}
}
