/// The lifecycle notifications a plugin can subscribe to (SPEC 6.2).
public enum LifecycleEventName: String, CaseIterable, Sendable, Hashable {
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    case didReceiveMemoryWarning

    /// The valid names, comma-separated, for error messages.
    public static var validNames: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

/// What a handler receives: `event.name`, `event.time`, `event.state`.
public struct LifecycleEvent: Sendable, Equatable {
    public var name: LifecycleEventName
    /// Seconds since the host started, on the host's clock.
    public var time: Double
    /// The app's state while the handlers run.
    public var state: AppState

    public init(name: LifecycleEventName, time: Double, state: AppState) {
        self.name = name
        self.time = time
        self.state = state
    }
}

/// The app's state (SPEC 3).
public enum AppState: String, Sendable, Equatable {
    case notRunning
    case inactive
    case active
    case background
    case suspended
    case ended

    /// Whether plugin code may run in this state.
    public var isRunning: Bool {
        switch self {
        case .inactive, .active, .background: return true
        case .notRunning, .suspended, .ended: return false
        }
    }
}
