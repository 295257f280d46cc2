/// One scenario action, or one signal of `lifeline run` (SPEC 2.2, 2.5), or one thing the
/// system does to the app: a background fetch, a silent push, running scheduled tasks, and the
/// device's power and network.
public enum Step: Equatable, Sendable, CustomStringConvertible {
    case launch
    case launchInBackground
    case resign
    case activate
    case background
    case foreground
    case memoryWarning
    case terminate
    case kill
    /// The user swiped the app away: its background transfers are cancelled with reason
    /// `userForceQuit`, then it is killed.
    case forceQuit
    /// The system asks the app to fetch (iOS 7 background fetch): `performFetch`.
    case fetch
    /// A silent remote notification (content-available) arrives with this JSON object as its
    /// payload: `didReceiveRemoteNotification`.
    case push(payload: String)
    /// The system runs the pending task requests that `filter` picks, as soon as their
    /// conditions hold, whatever their `earliestBegin`.
    case runTasks(TaskFilter)
    /// The device is put on or taken off its charger.
    case charging(Bool)
    /// The device gains or loses its network.
    case network(Bool)
    /// The host loads the plugins again from their files (SIGHUP, `lifeline ctl reload`, a
    /// scenario's `reload` line): each changed, added or removed plugin gets a new generation,
    /// the others keep running untouched; `reload all` gives every plugin a new generation, changed
    /// or not. It changes no state of the app.
    case reload(all: Bool)

    /// The action as a scenario file spells it.
    public var description: String {
        switch self {
        case .launch: return "launch"
        case .launchInBackground: return "launch background"
        case .resign: return "resign"
        case .activate: return "activate"
        case .background: return "background"
        case .foreground: return "foreground"
        case .memoryWarning: return "memory-warning"
        case .terminate: return "terminate"
        case .kill: return "kill"
        case .forceQuit: return "force-quit"
        case .fetch: return "fetch"
        case .push(let payload): return payload == Step.defaultPushPayload ? "push" : "push \(payload)"
        case .runTasks(let filter): return filter == .all ? "run-tasks" : "run-tasks \(filter)"
        case .charging(let on): return "charging \(on ? "on" : "off")"
        case .network(let on): return "network \(on ? "on" : "off")"
        case .reload(let all): return all ? "reload all" : "reload"
        }
    }

    /// Whether this is something the system does, not a change of the app's lifecycle state: the
    /// lifecycle allows it in every state.
    public var isSystemEvent: Bool {
        switch self {
        case .fetch, .push, .runTasks, .charging, .network: return true
        default: return false
        }
    }

    /// A silent push's payload when the step gives none: just the flag that makes it silent.
    public static let defaultPushPayload = #"{"aps":{"content-available":1}}"#

    /// Every action without an argument, for parsing and for error messages.
    public static let all: [Step] = [
        .launch, .launchInBackground, .resign, .activate, .background, .foreground, .memoryWarning, .terminate, .kill,
        .forceQuit, .fetch, .reload(all: false), .reload(all: true),
    ]

    /// The actions without an argument, by name: one lookup a line, where comparing the line with
    /// each action's description built eleven strings for every line of a scenario.
    package static let byName = Dictionary(uniqueKeysWithValues: all.map { ($0.description, $0) })

    /// The forms of the actions that take an argument, for error messages.
    public static let argumentForms = ["push [JSON]", "run-tasks [refresh|processing|IDENTIFIER]", "charging on|off", "network on|off"]

    /// Every action's form, for the message that refuses an unknown one.
    public static let actionList = (all.map(\.description) + argumentForms).joined(separator: ", ")

    /// Reads an action as a scenario line or `lifeline ctl` writes it (the words after the time).
    /// Returns nil for an unknown action; throws the message for a known one with a bad argument.
    public static func parse(_ text: Substring) throws(StepSyntaxError) -> Step? {
        let trimmed = text.drop { $0 == " " || $0 == "\t" }
        let words = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
        guard let first = words.first else { return nil }
        switch first {
        case "push":
            let rest = trimmed[first.endIndex...].drop { $0 == " " || $0 == "\t" }
            let restTrimmed = String(rest.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
            guard !restTrimmed.isEmpty else { return .push(payload: defaultPushPayload) }
            guard case .object = try? JSONValue.parse(restTrimmed) else {
                throw StepSyntaxError("'push' takes a JSON object as its payload, as in push {\"aps\":{\"content-available\":1}}")
            }
            return .push(payload: restTrimmed)
        case "run-tasks":
            guard words.count <= 2 else {
                throw StepSyntaxError("'run-tasks' takes at most one word: refresh, processing or a task identifier")
            }
            return .runTasks(words.count == 2 ? TaskFilter(String(words[1])) : .all)
        case "charging", "network":
            guard words.count == 2, words[1] == "on" || words[1] == "off" else {
                throw StepSyntaxError("'\(first)' takes 'on' or 'off', as in '\(first) on'")
            }
            return first == "charging" ? .charging(words[1] == "on") : .network(words[1] == "on")
        default:
            return byName[words.joined(separator: " ")]
        }
    }
}

/// Why an action's argument could not be read.
public struct StepSyntaxError: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// Which pending task requests a `run-tasks` step runs.
public enum TaskFilter: Equatable, Sendable, CustomStringConvertible {
    case all
    case kind(SystemTaskKind)
    case identifier(String)

    init(_ word: String) {
        if let kind = SystemTaskKind(rawValue: word) { self = .kind(kind) } else { self = .identifier(word) }
    }

    public var description: String {
        switch self {
        case .all: return "all"
        case .kind(let kind): return kind.rawValue
        case .identifier(let identifier): return identifier
        }
    }

    /// Whether a request of `kind` under `identifier` is picked.
    public func matches(kind: SystemTaskKind, identifier: String) -> Bool {
        switch self {
        case .all: return true
        case .kind(let k): return k == kind
        case .identifier(let i): return i == identifier
        }
    }
}

/// The two kinds of task a plugin can ask the system to run (BGTaskScheduler).
public enum SystemTaskKind: String, Equatable, Sendable, CaseIterable {
    /// BGAppRefreshTask: a short refresh of the app's content.
    case refresh
    /// BGProcessingTask: minutes of deferrable maintenance.
    case processing
}
