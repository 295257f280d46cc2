/// Why the host terminated the app, as the report's `termination` object shows it (SPEC 2.3).
public struct Termination: Equatable, Sendable {
    /// The kinds of termination, with iOS's codes.
    public enum Kind: String, Equatable, Sendable, CaseIterable {
        case watchdog
        case backgroundTaskTimeout
        case taskLimit
        /// A fetch's or a silent push's completion was not called, or a scheduled task was not
        /// completed, in time: iOS's watchdog ends the app for exhausting its time allowance.
        case completionTimeout

        /// The exception code iOS gives: 0x8badf00d, 0x2182bad2, 0xbada5e47.
        public var code: String {
            switch self {
            case .watchdog, .completionTimeout: return "0x8badf00d"
            case .backgroundTaskTimeout: return "0x2182bad2"
            case .taskLimit: return "0xbada5e47"
            }
        }
    }

    public var kind: Kind
    /// One sentence that names the plugin and what it did.
    public var reason: String
    public var plugin: String?
    public var time: HostTime
    /// Where the host stopped Lua code; nil when no code was stopped.
    public var traceback: String?

    public init(kind: Kind, reason: String, plugin: String?, time: HostTime, traceback: String?) {
        self.kind = kind
        self.reason = reason
        self.plugin = plugin
        self.time = time
        self.traceback = traceback
    }

    /// The report's `termination` object.
    public var json: JSONValue {
        .object([
            ("code", .string(kind.code)),
            ("kind", .string(kind.rawValue)),
            ("reason", .string(reason)),
            ("plugin", plugin.map { .string($0) } ?? .null),
            ("t", .number(ReportNumber.seconds(time))),
            ("traceback", traceback.map { .string($0) } ?? .null),
        ])
    }
}
