/// A call into plugin code and how long it really ran. The pictures (`--html`, `--trace`,
/// `--lanes`) show these; the report never does, because real time would make two runs of the
/// same scenario differ.
public struct HandlerCall: Equatable, Sendable {
    /// When the call began, on the host's clock (virtual in simulate).
    public var time: HostTime
    public var plugin: String
    /// What was called: an event name, `timer`, `expiration handler`, `load`, …
    public var handler: String
    /// Real milliseconds the call took.
    public var milliseconds: Double

    public init(time: HostTime, plugin: String, handler: String, milliseconds: Double) {
        self.time = time
        self.plugin = plugin
        self.handler = handler
        self.milliseconds = milliseconds
    }
}

/// One run to draw: its report (the JSON object `--report` writes), the handler calls beside it,
/// and a title (the scenario's file name, or `lifeline run`).
public struct RenderedRun: Sendable {
    public var title: String
    public var report: JSONValue
    public var calls: [HandlerCall]

    public init(title: String, report: JSONValue, calls: [HandlerCall] = []) {
        self.title = title
        self.report = report
        self.calls = calls
    }

    /// `{"title": …, "report": {…}, "calls": [{"t", "plugin", "handler", "ms"}]}`: how `lifeline
    /// test` carries a run from the process that simulated it to the one that draws.
    public var json: JSONValue {
        .object([
            ("title", .string(title)),
            ("report", report),
            (
                "calls",
                .array(
                    calls.map {
                        .object([
                            ("t", .number(ReportNumber.seconds($0.time))), ("plugin", .string($0.plugin)),
                            ("handler", .string($0.handler)),
                            ("ms", .number(ReportNumber.seconds($0.milliseconds))),
                        ])
                    })
            ),
        ])
    }

    /// Reads what `json` wrote; nil when `value` is not of that shape.
    public init?(json value: JSONValue) {
        guard case .string(let title)? = value["title"], let report = value["report"],
            case .array(let items)? = value["calls"]
        else { return nil }
        var calls: [HandlerCall] = []
        for item in items {
            guard let t = item["t"]?.doubleValue, case .string(let plugin)? = item["plugin"],
                case .string(let handler)? = item["handler"], let ms = item["ms"]?.doubleValue
            else { return nil }
            calls.append(HandlerCall(time: .seconds(t), plugin: plugin, handler: handler, milliseconds: ms))
        }
        self.init(title: title, report: report, calls: calls)
    }
}

extension JSONValue {
    /// The value as a Double, for numbers (`.int` and `.number`); nil otherwise.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .number(let s): return Double(s)
        default: return nil
        }
    }
}
