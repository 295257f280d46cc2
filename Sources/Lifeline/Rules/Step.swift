/// One scenario action, or one signal of `lifeline run` (SPEC 2.2, 2.5).
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
        }
    }

    /// Every action, for parsing and for error messages.
    public static let all: [Step] = [
        .launch, .launchInBackground, .resign, .activate, .background, .foreground, .memoryWarning, .terminate, .kill,
        .forceQuit,
    ]
}
