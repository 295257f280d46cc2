/// The lifecycle state machine (SPEC 3 and the table in 2.2), as a pure value.
///
/// It decides whether a step is allowed and which notifications it sends, in iOS's order. It does
/// not run handlers: the host carries out what it returns.
public struct Lifecycle: Equatable, Sendable {
    /// The app's state now.
    public private(set) var state: AppState = .notRunning

    public init() {}

    /// One thing the host must do to carry out a step, in order.
    public enum Action: Equatable, Sendable {
        /// Send the notification to every subscriber; handlers see `state`.
        case notify(LifecycleEventName, state: AppState)
        /// Load the plugins afresh: a new app process. In the background, the budget starts first,
        /// so init.lua already sees it.
        case startApp(inBackground: Bool)
        /// The app enters the background: the budget starts, full.
        case startBudget
        /// The app leaves the background: the budget stops, and timers held while suspended run.
        case stopBudget
        /// The app ends: its plugins are closed, its tasks and timers dropped.
        case endApp
        /// The user force-quit the app: its background transfers are cancelled.
        case cancelTransfers
    }

    /// Why a step is not allowed.
    public struct TransitionError: Error, Equatable, Sendable, CustomStringConvertible {
        public var step: Step
        public var state: AppState
        public var description: String {
            switch state {
            case .notRunning: return "'\(step)' before the app was launched: only 'launch' can start it"
            case .ended: return "'\(step)' after the app ended: only 'launch' can start it again"
            default: return "'\(step)' is not allowed while the app is \(state.rawValue)"
            }
        }
    }

    /// The actions that carry out `step`, or the reason it is not allowed.
    public mutating func apply(_ step: Step) throws(TransitionError) -> [Action] {
        let from = state
        let fail = TransitionError(step: step, state: from)
        // What the system does changes no state here: the host carries it out, relaunching or
        // resuming the app as it needs.
        if step.isSystemEvent { return [] }
        if case .reload = step { return [] }
        switch (step, from) {
        case (.launch, .notRunning), (.launch, .ended):
            state = .active
            return [
                .startApp(inBackground: false), .notify(.didFinishLaunching, state: .inactive),
                .notify(.didBecomeActive, state: .active),
            ]
        case (.launchInBackground, .notRunning), (.launchInBackground, .ended):
            state = .background
            return [.startApp(inBackground: true), .notify(.didFinishLaunching, state: .background)]
        case (.resign, .active):
            state = .inactive
            return [.notify(.willResignActive, state: .inactive)]
        case (.activate, .inactive):
            state = .active
            return [.notify(.didBecomeActive, state: .active)]
        case (.background, .active):
            state = .background
            return [
                .notify(.willResignActive, state: .inactive), .startBudget,
                .notify(.didEnterBackground, state: .background),
            ]
        case (.background, .inactive):
            state = .background
            return [.startBudget, .notify(.didEnterBackground, state: .background)]
        case (.foreground, .background), (.foreground, .suspended):
            state = .active
            return [
                .stopBudget, .notify(.willEnterForeground, state: .inactive),
                .notify(.didBecomeActive, state: .active),
            ]
        case (.memoryWarning, .inactive), (.memoryWarning, .active), (.memoryWarning, .background):
            return [.notify(.didReceiveMemoryWarning, state: from)]
        case (.memoryWarning, .suspended):
            return []  // dropped: a suspended app runs no code
        case (.terminate, .inactive), (.terminate, .active), (.terminate, .background):
            state = .ended
            return [.notify(.willTerminate, state: from), .endApp]
        case (.terminate, .suspended), (.kill, .inactive), (.kill, .active), (.kill, .background),
            (.kill, .suspended):
            state = .ended
            return [.endApp]
        case (.forceQuit, .inactive), (.forceQuit, .active), (.forceQuit, .background), (.forceQuit, .suspended):
            state = .ended
            return [.cancelTransfers, .endApp]
        default:
            throw fail
        }
    }

    /// The app was suspended: in the background, with no task and no handler running (T7).
    public mutating func suspend() {
        precondition(state == .background, "only a background app can be suspended")
        state = .suspended
    }

    /// The system woke the suspended app in the background: for a fetch, a push or a task.
    public mutating func resume() {
        precondition(state == .suspended, "only a suspended app can be woken")
        state = .background
    }

    /// The app ended outside a step: terminated by a rule.
    public mutating func end() { state = .ended }
}
