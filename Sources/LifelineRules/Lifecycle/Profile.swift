/// The budget and watchdog figures of one iOS generation (SPEC 4.3). Every figure can be
/// overridden; docs/lifecycle.md says where each comes from.
public struct Profile: Equatable, Sendable {
    public var name: String
    /// Background time, in seconds, granted at each entry into the background (T2).
    public var budget: Double
    /// How long before the budget runs out the expiration handlers are called (T3).
    public var expirationLead: Double
    /// Watchdog limit for loading the plugins, and again for didFinishLaunching.
    public var launchLimit: Double
    /// Watchdog limit for didEnterBackground.
    public var backgroundLimit: Double
    /// Watchdog limit for every other notification, and for timer callbacks.
    public var transitionLimit: Double
    /// Watchdog limit for willTerminate.
    public var terminateLimit: Double
    /// Watchdog limit for each expiration handler.
    public var expirationHandlerLimit: Double
    /// How many tasks may be active at once (T8).
    public var taskLimit: Int
    /// Background fetch and silent pushes (iOS 7 and later).
    public var hasBackgroundFetch: Bool
    /// BGTaskScheduler: app refresh and processing tasks (iOS 13 and later).
    public var hasTaskScheduler: Bool
    /// How long a plugin has to call a fetch's or a silent push's completion (about 30 s).
    public var fetchLimit: Double
    /// How long an app refresh task may run before it must be completed.
    public var refreshTaskLimit: Double
    /// How long a processing task may run before it must be completed.
    public var processingTaskLimit: Double
    /// How long the app stays awake for a plugin to call the completion of
    /// `didFinishTransferEvents` before it is suspended anyway.
    public var transferEventsLimit: Double

    public init(
        name: String, budget: Double, expirationLead: Double, launchLimit: Double, backgroundLimit: Double,
        transitionLimit: Double, terminateLimit: Double, expirationHandlerLimit: Double, taskLimit: Int,
        hasBackgroundFetch: Bool = true, hasTaskScheduler: Bool = true, fetchLimit: Double = 30,
        refreshTaskLimit: Double = 30, processingTaskLimit: Double = 180, transferEventsLimit: Double = 30
    ) {
        self.name = name
        self.budget = budget
        self.expirationLead = expirationLead
        self.launchLimit = launchLimit
        self.backgroundLimit = backgroundLimit
        self.transitionLimit = transitionLimit
        self.terminateLimit = terminateLimit
        self.expirationHandlerLimit = expirationHandlerLimit
        self.taskLimit = taskLimit
        self.hasBackgroundFetch = hasBackgroundFetch
        self.hasTaskScheduler = hasTaskScheduler
        self.fetchLimit = fetchLimit
        self.refreshTaskLimit = refreshTaskLimit
        self.processingTaskLimit = processingTaskLimit
        self.transferEventsLimit = transferEventsLimit
    }

    public static let ios13 = Profile(
        name: "ios13", budget: 30, expirationLead: 5, launchLimit: 20, backgroundLimit: 5,
        transitionLimit: 10, terminateLimit: 5, expirationHandlerLimit: 1, taskLimit: 1000)
    public static let ios7: Profile = {
        var p = ios13
        p.name = "ios7"
        p.budget = 180
        p.hasTaskScheduler = false
        return p
    }()
    public static let ios6: Profile = {
        var p = ios7
        p.name = "ios6"
        p.budget = 600
        p.hasBackgroundFetch = false
        return p
    }()

    /// The time a task of `kind` may run before it must be completed.
    public func limit(for kind: SystemTaskKind) -> Double {
        kind == .refresh ? refreshTaskLimit : processingTaskLimit
    }

    /// Why this profile cannot carry out `step`, or nil when it can: ios6 has no background fetch
    /// or silent pushes, and only ios13 has BGTaskScheduler.
    public func lacks(_ step: Step) -> String? {
        switch step {
        case .fetch, .push:
            return hasBackgroundFetch ? nil : "'\(step.description.split(separator: " ")[0])' needs background fetch and silent pushes, which profile \(name) lacks (they came with iOS 7)"
        case .runTasks:
            return hasTaskScheduler ? nil : "'run-tasks' needs BGTaskScheduler, which profile \(name) lacks (it came with iOS 13)"
        default:
            return nil
        }
    }

    /// The built-in profiles.
    public static let all: [Profile] = [ios6, ios7, ios13]

    /// The profile called `name`.
    public static func named(_ name: String) throws(LifelineError) -> Profile {
        guard let p = all.first(where: { $0.name == name }) else {
            throw .usage("unknown profile '\(name)'; the profiles are: \(all.map(\.name).joined(separator: ", "))")
        }
        return p
    }

    /// The watchdog limit for handlers of `event`.
    public func limit(for event: LifecycleEventName) -> Double {
        switch event {
        case .didFinishLaunching: return launchLimit
        case .didEnterBackground: return backgroundLimit
        // Unloading is a plugin's termination: it gets willTerminate's time.
        case .willTerminate, .willUnload: return terminateLimit
        case .didBecomeActive, .willResignActive, .willEnterForeground, .didReceiveMemoryWarning,
            .transferProgress, .transferDidFinish, .transferDidFail, .didFinishTransferEvents, .performFetch,
            .didReceiveRemoteNotification:
            return transitionLimit
        }
    }
}

extension Profile {
    /// A figure of the profile that a flag (`--budget 10m`) or a scenario's `limit` line
    /// (`limit budget 10m`) sets: its name is the flag's without the `--`.
    public enum Figure: String, CaseIterable, Sendable {
        case budget
        case expirationLead = "expiration-lead"
        case launchLimit = "launch-limit"
        case backgroundLimit = "background-limit"
        case transitionLimit = "transition-limit"
        case terminateLimit = "terminate-limit"
        case expirationHandlerLimit = "expiration-handler-limit"
        case taskLimit = "task-limit"
        case fetchLimit = "fetch-limit"
        case refreshTaskLimit = "refresh-task-limit"
        case processingTaskLimit = "processing-task-limit"
        case transferEventsLimit = "transfer-events-limit"

        /// The names, for messages.
        public static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }

        /// Where the figure lives; nil for `task-limit`, a count rather than seconds.
        public var seconds: WritableKeyPath<Profile, Double>? {
            switch self {
            case .budget: return \.budget
            case .expirationLead: return \.expirationLead
            case .launchLimit: return \.launchLimit
            case .backgroundLimit: return \.backgroundLimit
            case .transitionLimit: return \.transitionLimit
            case .terminateLimit: return \.terminateLimit
            case .expirationHandlerLimit: return \.expirationHandlerLimit
            case .taskLimit: return nil
            case .fetchLimit: return \.fetchLimit
            case .refreshTaskLimit: return \.refreshTaskLimit
            case .processingTaskLimit: return \.processingTaskLimit
            case .transferEventsLimit: return \.transferEventsLimit
            }
        }

        /// A figure's value: seconds, or for `task-limit` a count.
        public enum Value: Equatable, Sendable {
            case seconds(Double)
            case count(Int)
        }

        /// Reads the figure's value as its flag takes it: seconds (a plain number or a duration,
        /// `Seconds`), 0 or more and at most 100 years; for `task-limit`, a whole number, 1 or
        /// more. `at` starts the message.
        public func value(_ text: String, at: String) throws(LifelineError) -> Value {
            guard seconds != nil else {
                guard let count = Int(text), count >= 1 else {
                    throw .badInput("\(at): task-limit must be a whole number, at least 1, not '\(text)'")
                }
                return .count(count)
            }
            let value = try Seconds(text).value(at: at)
            guard value.isFinite, value >= 0 else {
                throw .badInput("\(at): \(rawValue) must be a number of seconds >= 0, not '\(text)'")
            }
            return .seconds(value)
        }

        /// Sets the figure to `value`, as `value(_:at:)` read it.
        public func apply(_ value: Value, to profile: inout Profile) {
            switch value {
            case .seconds(let s): if let seconds { profile[keyPath: seconds] = s }
            case .count(let n): if self == .taskLimit { profile.taskLimit = n }
            }
        }
    }
}

extension Profile {
    /// A number of seconds as a person writes one for a figure, on a command line say: a plain
    /// number (`30`, `0.25`), or a duration as a scenario writes one (`500ms`, `2m`, `5m10s`),
    /// since every duration Lifeline reads takes the same forms. It keeps the text, and is read
    /// when the place it came from is known, for the message. No value passes 100 years, as no
    /// scenario time does, so no figure can overflow the clock or the report; the lower bound (0,
    /// or above 0) and NaN are each figure's own to refuse.
    public struct Seconds: Sendable, Equatable {
        /// As written.
        public let text: String

        public init(_ text: String) { self.text = text }

        /// The number of seconds; `at` (a flag, a file:line) starts the message of a text that
        /// is none.
        public func value(at: String) throws(LifelineError) -> Double {
            if let value = Double(text) {
                // NaN and negative values are the figure's to refuse, with its own message.
                guard value.isNaN || value <= Units.maximumSeconds else {
                    throw .badInput(
                        "\(at): '\(text)' is too large: a number of seconds goes up to 100 years "
                            + "(\(Int(Units.maximumSeconds)))")
                }
                return value
            }
            return try Units.parseDuration(text, at: at).seconds
        }
    }
}
