import Logging

/// Wraps a log handler so that every line carries the host's time (virtual in simulate) as the
/// metadata `t`, and so that a plugin's lines also reach the report as `log` events. The CLI prints
/// `t` as the one clock of its output; the wall clock would give every line of a simulation the
/// same second.
///
/// Threading: `onLog` and the clock are read on the thread that logs, which for plugins and the
/// host is the main executor.
struct HostLogHandler: LogHandler {
    /// The metadata key that holds the host's time, in seconds with three decimals.
    static let timeKey = "t"

    var inner: any LogHandler
    let now: UncheckedSendable<() -> HostTime>
    let onLog: UncheckedSendable<((Logger.Level, String) -> Void)?>

    /// `logger`, with lines stamped by `now` and handed to `onLog` as they are written.
    static func wrap(
        _ logger: Logger, now: @escaping () -> HostTime, onLog: ((Logger.Level, String) -> Void)? = nil
    ) -> Logger {
        var wrapped = logger
        wrapped.handler = HostLogHandler(inner: logger.handler, now: UncheckedSendable(now), onLog: UncheckedSendable(onLog))
        return wrapped
    }

    func log(event: LogEvent) {
        var event = event
        var metadata = event.metadata ?? [:]
        metadata[HostLogHandler.timeKey] = .string(ReportNumber.seconds(now.value()))
        event.metadata = metadata
        onLog.value?(event.level, event.message.description)
        inner.log(event: event)
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }
}

extension Logger.Level {
    /// The report's word for a level: debug, info, warning or error.
    var reportName: String {
        switch self {
        case .trace, .debug: return "debug"
        case .info, .notice: return "info"
        case .warning: return "warning"
        case .error, .critical: return "error"
        }
    }
}
