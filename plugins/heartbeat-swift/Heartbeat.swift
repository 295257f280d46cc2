import Lifeline

/// A Swift plugin compiled into `lifeline` (SPEC 6.5). When the app enters the background it
/// flushes its counters inside a background task, which it ends on every path: when the flush is
/// done, and from the expiration handler if time runs out first.
public final class Heartbeat: SwiftPlugin {
    public static let name = "heartbeat"

    /// Seconds a flush takes.
    public static let flushSeconds = 2.0

    private var beats = 0

    public init() {}

    public func load(_ context: PluginContext) throws {
        context.on(.didBecomeActive) { [unowned self] _ in
            beats += 1
        }
        context.on(.didEnterBackground) { [unowned self] _ in
            var id = 0
            // Ends the task once, whichever path gets there first.
            func finish() {
                if id != 0 { context.endBackgroundTask(id) }
                id = 0
            }
            id = context.beginBackgroundTask("heartbeat-flush") {
                context.logger.warning("flush cut short by expiration")
                finish()
            }
            context.after(Heartbeat.flushSeconds, perform: { [beats] in
                context.logger.info("flushed \(beats) beats")
                finish()
            })
        }
    }
}
