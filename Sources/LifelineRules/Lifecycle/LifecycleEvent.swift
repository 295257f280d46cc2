/// The lifecycle notifications a plugin can subscribe to (SPEC 6.2).
public enum LifecycleEventName: String, CaseIterable, Sendable, Hashable {
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate
    case didReceiveMemoryWarning
    /// A background transfer's bytes so far: at most 4 a second per transfer, and only
    /// while the app is running.
    case transferProgress
    /// A background transfer finished: its file is complete and verified under its final name.
    case transferDidFinish
    /// A background transfer failed or was cancelled; `event.reason` says why.
    case transferDidFail
    /// The transfer events waiting for this plugin have all been delivered.
    case didFinishTransferEvents
    /// The system asks the app to fetch new content (iOS 7 background fetch); the handler calls
    /// `event.complete(result)` within the profile's fetch limit.
    case performFetch
    /// A silent remote notification arrived; `event.payload` is its JSON object, and the handler
    /// calls `event.complete(result)` within the profile's fetch limit.
    case didReceiveRemoteNotification
    /// The plugin's generation is being unloaded by a reload: its last word, once, before its
    /// tasks' expiration handlers run. No new work can start from here on.
    case willUnload

    /// The event's position in `allCases`, for tables indexed by event (the subscriptions, the
    /// Lua bridge's strings, whose C side keeps `LIFELINE_EVENT_NAME_SLOTS` of them). A switch, so
    /// reading it is a jump, not a search of `allCases` at every dispatch; LifecycleEventTests
    /// holds it equal to the position, so a new case cannot be numbered wrong.
    public var ordinal: Int {
        switch self {
        case .didFinishLaunching: return 0
        case .didBecomeActive: return 1
        case .willResignActive: return 2
        case .didEnterBackground: return 3
        case .willEnterForeground: return 4
        case .willTerminate: return 5
        case .didReceiveMemoryWarning: return 6
        case .transferProgress: return 7
        case .transferDidFinish: return 8
        case .transferDidFail: return 9
        case .didFinishTransferEvents: return 10
        case .performFetch: return 11
        case .didReceiveRemoteNotification: return 12
        case .willUnload: return 13
        }
    }

    /// The valid names, comma-separated, for error messages.
    public static var validNames: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

/// What a handler receives: `event.name`, `event.time`, `event.state`, and for the transfer
/// events `event.id`, `event.reason`, `event.received`, `event.total`.
public struct LifecycleEvent: Sendable, Equatable {
    public var name: LifecycleEventName
    /// Seconds since the host started, on the host's clock.
    public var time: Double
    /// The app's state while the handlers run.
    public var state: AppState
    /// The transfer the event is about (transfer events only).
    public var transfer: TransferEventInfo?
    /// The completion this plugin must call (`performFetch`, `didReceiveRemoteNotification`,
    /// `didFinishTransferEvents`), by its id; see the plugin context's `complete`.
    public var completion: Int?
    /// A silent push's payload, a JSON object as text.
    public var payload: String?

    public init(
        name: LifecycleEventName, time: Double, state: AppState, transfer: TransferEventInfo? = nil,
        completion: Int? = nil, payload: String? = nil
    ) {
        self.name = name
        self.time = time
        self.state = state
        self.transfer = transfer
        self.completion = completion
        self.payload = payload
    }
}

/// What a transfer event says of its transfer.
public struct TransferEventInfo: Sendable, Equatable {
    /// The transfer's id, as `download`/`upload` returned it.
    public var id: String
    /// Why it failed (`transferDidFail`).
    public var reason: String?
    /// Bytes so far, and the whole size once known (`transferProgress`).
    public var received: Int64?
    public var total: Int64?

    public init(id: String, reason: String? = nil, received: Int64? = nil, total: Int64? = nil) {
        self.id = id
        self.reason = reason
        self.received = received
        self.total = total
    }
}

/// The app's state (SPEC 3).
public enum AppState: String, Sendable, Equatable, CaseIterable {
    case notRunning
    case inactive
    case active
    case background
    case suspended
    case ended

    /// The state's position in `allCases`, for tables indexed by state. A switch, for speed, that
    /// LifecycleEventTests holds equal to the position.
    public var ordinal: Int {
        switch self {
        case .notRunning: return 0
        case .inactive: return 1
        case .active: return 2
        case .background: return 3
        case .suspended: return 4
        case .ended: return 5
        }
    }

    /// Whether plugin code may run in this state.
    public var isRunning: Bool {
        switch self {
        case .inactive, .active, .background: return true
        case .notRunning, .suspended, .ended: return false
        }
    }
}
