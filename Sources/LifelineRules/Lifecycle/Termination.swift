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

    // MARK: - The sentences, one factory per way the app is terminated

    /// T8: a plugin began more tasks than the limit at once.
    public static func taskLimit(plugin: String, limit: Int, time: HostTime) -> Termination {
        Termination(
            kind: .taskLimit, reason: "plugin '\(plugin)' began more than \(limit) background tasks at once",
            plugin: plugin, time: time, traceback: nil)
    }

    /// T5: the budget ran out with tasks still running, each named by `label` (the first's plugin
    /// is blamed).
    public static func budgetRanOut(tasks: [TaskRegistry.Task], time: HostTime) -> Termination {
        let names = tasks.map(label).joined(separator: ", ")
        return Termination(
            kind: .backgroundTaskTimeout,
            reason: "background time ran out with \(tasks.count) task\(tasks.count == 1 ? "" : "s") "
                + "still running: \(names)",
            plugin: tasks.first?.plugin, time: time, traceback: nil)
    }

    /// How a task is named in a sentence: its plugin, its id and its name.
    public static func label(_ task: TaskRegistry.Task) -> String {
        "plugin '\(task.plugin)' task \(task.id)" + (task.name.map { " '\($0)'" } ?? "")
    }

    /// The completion of `event` (performFetch, didReceiveRemoteNotification) was not called
    /// within `limit` seconds.
    public static func completionTimeout(plugin: String, event: String, limit: Double, time: HostTime) -> Termination {
        Termination(
            kind: .completionTimeout,
            reason: "plugin '\(plugin)' did not call the completion of \(event) within \(ReportNumber.seconds(limit)) s",
            plugin: plugin, time: time, traceback: nil)
    }

    /// A scheduled task was not completed within `limit` seconds.
    public static func taskTimeout(
        plugin: String, kind: String, identifier: String, limit: Double, time: HostTime
    ) -> Termination {
        Termination(
            kind: .completionTimeout,
            reason: "plugin '\(plugin)' did not complete its \(kind) task '\(identifier)' "
                + "within \(ReportNumber.seconds(limit)) s",
            plugin: plugin, time: time, traceback: nil)
    }

    /// W1-W3: plugin code still ran when its watchdog limit passed.
    public static func watchdog(
        plugin: String, handler: String, limit: Double, time: HostTime, traceback: String?
    ) -> Termination {
        // Some code is named a handler already ("expiration handler"): it is not said twice.
        let what = handler.lowercased().hasSuffix("handler") ? handler : "\(handler) handler"
        return Termination(
            kind: .watchdog,
            reason: "plugin '\(plugin)' was still running its \(what) "
                + "when the \(ReportNumber.seconds(limit)) s watchdog limit passed",
            plugin: plugin, time: time, traceback: traceback)
    }

    /// The line a run prints when the app is terminated: `app terminated (KIND, CODE): REASON`.
    public var headline: String { "app terminated (\(kind.rawValue), \(kind.code)): \(reason)" }

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
