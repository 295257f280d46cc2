/// The one place a termination is written into the report: the watchdog's event when the
/// watchdog decided it, then `terminated`. The first termination wins.
///
/// Threading: any thread. The coordinator writes on the main executor; the watchdog's thread
/// writes when Swift code overran and cannot be stopped (W3), while the main executor is stuck in
/// that code, and the app then ends on the main executor once the code returns.
struct Terminations: Sendable {
    let recorder: Recorder

    /// Writes `termination`; false if the app was terminated already.
    @discardableResult
    func write(_ termination: Termination, watchdog target: WatchdogTarget? = nil) -> Bool {
        guard recorder.termination == nil else { return false }
        if let target {
            recorder.record(
                TimelineEvent(
                    time: target.time, event: .watchdog,
                    fields: [
                        ("plugin", .string(target.plugin)), ("handler", .string(target.handler)),
                        ("limit", .number(ReportNumber.seconds(target.limit))),
                    ]))
        }
        recorder.record(
            TimelineEvent(
                time: termination.time, event: .terminated,
                fields: [("kind", .string(termination.kind.rawValue)), ("code", .string(termination.kind.code))]))
        recorder.noteTermination(termination)
        return true
    }
}

extension Termination {
    /// The watchdog's termination of the code `target` names: the watchdog's thread and the host
    /// both build it so.
    static func watchdog(_ target: WatchdogTarget, traceback: String?) -> Termination {
        .watchdog(plugin: target.plugin, handler: target.handler, limit: target.limit, time: target.time, traceback: traceback)
    }
}
