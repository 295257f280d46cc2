// What a plugin asks of the system, and what the system hands it, as plain values: scheduled
// task requests (BGTaskScheduler), the results a fetch or a silent push reports, and how eager the
// simulated system is. `SystemWork` carries them out.

/// A request to run a task later (iOS's `BGAppRefreshTaskRequest`, `BGProcessingTaskRequest`).
public struct SystemTaskRequest: Equatable, Sendable {
    public var identifier: String
    public var kind: SystemTaskKind
    /// The soonest the task may begin, in seconds from when the request is submitted.
    public var earliestBegin: Double
    /// Run only while the device has a network.
    public var requiresNetwork: Bool
    /// Run only while the device is charging.
    public var requiresPower: Bool

    public init(
        identifier: String, kind: SystemTaskKind, earliestBegin: Double = 0, requiresNetwork: Bool = false,
        requiresPower: Bool = false
    ) {
        self.identifier = identifier
        self.kind = kind
        self.earliestBegin = earliestBegin
        self.requiresNetwork = requiresNetwork
        self.requiresPower = requiresPower
    }

    /// Letters, digits, `.`, `-` and `_`, 1 to 255 of them: what a reverse-DNS identifier uses,
    /// and nothing a report or a command line would have to quote.
    public static func isValidIdentifier(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 255
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2e || c == 0x2d
                    || c == 0x5f
            }
    }

    /// The latest `earliestBegin`: 10 years, far inside what the host's clock holds, so a request's
    /// time never saturates.
    public static let maximumEarliestBegin: Double = 10 * 365 * 24 * 3600

    /// How many requests of each kind one plugin may have pending at once: one refresh and ten
    /// processing requests, as Apple documents for `tooManyPendingTaskRequests`.
    public static func pendingLimit(_ kind: SystemTaskKind) -> Int { kind == .refresh ? 1 : 10 }
}

/// A request waiting to run, as `pending()` lists it.
public struct PendingSystemTask: Equatable, Sendable {
    public var request: SystemTaskRequest
    /// When it may begin at the soonest, in seconds since the host started.
    public var earliestBegin: Double

    public init(request: SystemTaskRequest, earliestBegin: Double) {
        self.request = request
        self.earliestBegin = earliestBegin
    }
}

/// What a fetch's or a silent push's completion reports (`UIBackgroundFetchResult`).
public enum FetchResult: String, Equatable, Sendable, CaseIterable {
    case newData
    case noData
    case failed

    /// The valid words, for messages.
    public static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

/// A scheduled task as its handler gets it.
public struct SystemTaskInfo: Equatable, Sendable {
    /// Unique for the host's life: the task's completion.
    public var id: Int
    public var identifier: String
    public var kind: SystemTaskKind

    public init(id: Int, identifier: String, kind: SystemTaskKind) {
        self.id = id
        self.identifier = identifier
        self.kind = kind
    }
}

/// Why the system refused a call: the message names the rule.
public struct SystemTaskError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Which rule refused, for callers that answer with codes of their own (BGTaskScheduler's).
    public enum Reason: String, Equatable, Sendable {
        /// The profile has no task scheduler, or the app is not running.
        case unavailable
        /// The identifier is not listed in plugin.toml's `[background] identifiers`.
        case notPermitted
        /// The plugin has as many requests of the kind pending as it may.
        case tooManyPending
        case other
    }
    public var message: String
    public var reason: Reason
    public init(_ message: String, reason: Reason = .other) {
        self.message = message
        self.reason = reason
    }
    public var description: String { message }
}

/// How eager the simulated system is to run scheduled tasks (`--task-policy`).
public enum TaskPolicy: Equatable, Sendable, CustomStringConvertible {
    /// A request runs at its earliestBegin, or as soon as its conditions hold after it.
    case earliest
    /// A request runs this many seconds after its earliestBegin, once its conditions hold: the
    /// system is in no hurry, as a real one often is not.
    case delayed(Double)
    /// Requests run only when a `run-tasks` step (or `lifeline ctl run-tasks`) asks.
    case manual

    public var description: String {
        switch self {
        case .earliest: return "earliest"
        case .manual: return "manual"
        case .delayed(let seconds): return "delay:\(ReportNumber.seconds(.seconds(seconds)))s"
        }
    }

    /// `earliest`, `manual` or `delay:DURATION` (`delay:15m`); `at` starts the message.
    public static func parse(_ text: String, at: String) throws(LifelineError) -> TaskPolicy {
        switch text {
        case "earliest": return .earliest
        case "manual": return .manual
        default:
            guard text.hasPrefix("delay:") else {
                throw .usage("\(at): unknown task policy '\(text)'; the policies are earliest, manual and delay:DURATION (as in delay:15m)")
            }
            let seconds = try Profile.Seconds(String(text.dropFirst("delay:".count))).value(at: at)
            guard seconds.isFinite, seconds >= 0 else {
                throw .usage("\(at): a task policy's delay must be 0 or more")
            }
            return .delayed(seconds)
        }
    }
}
