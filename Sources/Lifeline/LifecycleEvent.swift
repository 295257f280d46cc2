/// The lifecycle notifications a plugin can subscribe to (SPEC 6.2).
public enum LifecycleEventName: String, CaseIterable, Sendable, Hashable {
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    case didReceiveMemoryWarning

    /// The event's position in `allCases`, for tables indexed by event.
    var ordinal: Int {
        switch self {
        case .didFinishLaunching: return 0
        case .didBecomeActive: return 1
        case .willResignActive: return 2
        case .didEnterBackground: return 3
        case .willEnterForeground: return 4
        case .willTerminate: return 5
        case .didReceiveMemoryWarning: return 6
        }
    }

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
