import Foundation
import Logging

/// Collects log lines as "level: message". Copies of the handler (a Logger keeps one per label)
/// share one list.
public final class LogLines: LogHandler, @unchecked Sendable {
    private let sink: Shared<[String]>
    public var logLevel: Logger.Level = .trace
    public var metadata: Logger.Metadata = [:]

    public init(sink: Shared<[String]> = Shared([])) { self.sink = sink }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) { sink.append("\(event.level): \(event.message)") }

    /// The lines logged so far, in order.
    public var lines: [String] { sink.value }
}

/// A logger whose lines land in `sink`, for checking iOS's warnings.
public func capturingLogger(_ sink: Shared<[String]>) -> Logger {
    let handler = LogLines(sink: sink)
    return Logger(label: "lifeline-test") { _ in handler }
}

/// A logger that drops everything, so test output stays readable.
public func quietLogger() -> Logger {
    Logger(label: "lifeline-test") { _ in SwiftLogNoOpLogHandler() }
}
