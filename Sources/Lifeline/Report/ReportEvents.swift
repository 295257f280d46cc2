/// Every event a report's timeline can hold, with the fields each may carry besides `t` and
/// `event` (docs/report.md). The set is closed: plugins reach the timeline only through the host,
/// which records these and nothing else. The names are `ReportEventName`'s, so the table and the
/// host's call sites spell each one the same way.
///
/// `expect` lines are checked against it, so a misspelt name fails instead of passing: without
/// it, `expect no taskExpird` would hold for every run. The test suite checks every recorded
/// event against it (`Recorder.checksEvents`), and a test holds docs/report.md to it.
public enum ReportEvents {
    /// Each event's optional and required fields, in the order the report writes them.
    public static let fields: [String: [String]] = {
        var table: [ReportEventName: [String]] = [:]
        for name in LifecycleEventName.allCases where !transferEvents.contains(name) {
            table[ReportEventName(name)] = []
        }
        for name: ReportEventName in [.suspended, .killed, .forceQuit, .endedWhileSuspended] { table[name] = [] }
        table[.memoryWarning] = ["dropped"]
        table[.relaunch] = ["reason"]
        table[.resumed] = ["reason"]
        table[.reloaded] = ["generation", "result", "changed", "added", "removed", "unchanged", "reason"]
        // A plugin's generation that a reload ended, once its tasks' expiration handlers had
        // their time: the tasks it still held then, which the host ended.
        table[.unloaded] = ["plugin", "ended"]
        table[.willUnload] = ["plugin"]
        table[.performFetch] = ["dropped"]
        table[.didReceiveRemoteNotification] = ["dropped"]
        table[.runTasks] = ["filter", "picked"]
        table[.charging] = ["on"]
        table[.network] = ["on"]
        for name: ReportEventName in [.fetchCompleted, .pushCompleted] { table[name] = ["plugin", "result"] }
        for name: ReportEventName in [.transferEventsCompleted, .transferEventsTimedOut] { table[name] = ["plugin"] }
        let systemTask = ["plugin", "identifier", "kind", "task"]
        table[.systemTaskSubmitted] = [
            "plugin", "identifier", "kind", "earliestBegin", "requiresNetwork", "requiresPower", "replaced",
        ]
        table[.systemTaskCancelled] = ["plugin", "identifier"]
        table[.systemTaskDropped] = ["plugin", "identifier", "reason"]
        table[.taskDeferred] = ["plugin", "identifier", "reason", "until"]
        table[.systemTaskStarted] = systemTask
        table[.systemTaskExpiring] = systemTask
        table[.systemTaskCompleted] = systemTask + ["success"]
        for name: ReportEventName in [.taskBegan, .taskExpiring] { table[name] = ["plugin", "task", "name"] }
        table[.taskEnded] = ["plugin", "task", "name", "expired"]
        table[.endUnknownTask] = ["plugin", "task"]
        table[.log] = ["plugin", "level", "message"]
        table[.pluginError] = ["plugin", "message", "traceback"]
        table[.watchdog] = ["plugin", "handler", "limit"]
        table[.terminated] = ["kind", "code"]
        table[.httpRequest] = ["plugin", "method", "url"]
        table[.httpResponse] = ["plugin", "method", "url", "status", "error"]
        let operation = ["plugin", "queue", "op", "name"]
        table[.opStarted] = operation
        table[.opFinished] = operation + ["result"]
        table[.opDropped] = operation + ["existing"]
        table[.opReplaced] = operation + ["replaced"]
        let transfer = ["plugin", "transfer"]
        table[.transferQueued] = transfer + ["kind", "url"]
        table[.transferStarted] = transfer + ["attempt", "from"]
        table[.transferResumed] = transfer + ["received"]
        table[.transferRestarted] = transfer + ["reason"]
        table[.transferRetrying] = transfer + ["after", "reason"]
        table[.transferEnded] = transfer + ["state", "reason"]
        table[.transferError] = transfer + ["message"]
        table[.transferProgress] = transfer + ["received", "total"]
        table[.transferDidFinish] = transfer + ["reason"]
        table[.transferDidFail] = transfer + ["reason"]
        table[.didFinishTransferEvents] = ["plugin"]
        return Dictionary(uniqueKeysWithValues: table.map { ($0.key.rawValue, $0.value) })
    }()

    /// The fields of the report's `termination` object, which `expect termination KIND` lines
    /// match.
    public static let terminationFields = ["code", "kind", "reason", "plugin", "t", "traceback"]

    /// The values a field can take where they are a closed set, so that `expect no opFinished
    /// result=timedout` fails on its typo rather than holding for every run.
    public static let values: [String: [String: [String]]] = {
        let booleans = ["true", "false"]
        let table: [ReportEventName: [String: [String]]] = [
            .taskEnded: ["expired": booleans],
            .memoryWarning: ["dropped": booleans],
            .log: ["level": ["debug", "info", "warning", "error"]],
            .terminated: ["kind": Termination.Kind.allCases.map(\.rawValue)],
            .httpResponse: ["error": HTTPFailure.Kind.allCases.map(\.rawValue)],
            .opFinished: ["result": ["finished", "timedOut", "cancelled", "expired", "failed"]],
            .transferQueued: ["kind": ["download", "upload"]],
            .transferEnded: ["state": ["finished", "failed", "cancelled"]],
            .relaunch: ["reason": ["transferEvents", "fetch", "push", "systemTask"]],
            .resumed: ["reason": ["transferEvents", "fetch", "push", "systemTask", "reload"]],
            .reloaded: ["result": ["ok", "failed"]],
            .performFetch: ["dropped": booleans],
            .didReceiveRemoteNotification: ["dropped": booleans],
            .charging: ["on": booleans],
            .network: ["on": booleans],
            .fetchCompleted: ["result": FetchResult.allCases.map(\.rawValue)],
            .pushCompleted: ["result": FetchResult.allCases.map(\.rawValue)],
            .systemTaskSubmitted: [
                "kind": SystemTaskKind.allCases.map(\.rawValue), "requiresNetwork": booleans, "requiresPower": booleans,
                "replaced": booleans,
            ],
            .systemTaskDropped: ["reason": ["noHandler"]],
            .taskDeferred: ["reason": TaskRequests.Deferral.allCases.map(\.rawValue)],
            .systemTaskStarted: ["kind": SystemTaskKind.allCases.map(\.rawValue)],
            .systemTaskExpiring: ["kind": SystemTaskKind.allCases.map(\.rawValue)],
            .systemTaskCompleted: ["kind": SystemTaskKind.allCases.map(\.rawValue), "success": booleans],
        ]
        return Dictionary(uniqueKeysWithValues: table.map { ($0.key.rawValue, $0.value) })
    }()

    /// The notifications that concern one transfer, recorded with its plugin and id.
    private static let transferEvents: Set<LifecycleEventName> = [
        .transferProgress, .transferDidFinish, .transferDidFail, .didFinishTransferEvents,
    ]

    /// Whether `event` is one of these, with only its own fields and their values.
    public static func admits(_ event: TimelineEvent) -> Bool {
        guard let known = fields[event.event] else { return false }
        let domains = values[event.event] ?? [:]
        return event.fields.allSatisfy { name, value in
            guard known.contains(name) else { return false }
            guard let domain = domains[name] else { return true }
            switch value {
            case .string(let s): return domain.contains(s)
            case .bool(let b): return domain.contains(b ? "true" : "false")
            default: return false
            }
        }
    }

    /// Every event name, sorted.
    public static var names: [String] { fields.keys.sorted() }
}
