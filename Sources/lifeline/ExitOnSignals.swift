import Dispatch
import Foundation

/// Turns SIGINT, SIGTERM and SIGHUP into `exit(128 + signal)` for `simulate` and `check`, so the
/// atexit handler of `TemporaryDirectory` removes their temporary state dirs; killed by the
/// signal's default action, the process would leave them behind. (`run` maps signals to steps.)
enum ExitOnSignals {
    /// Kept for the life of the process: a source that is released stops delivering. Written
    /// once, by `install` on the main thread, before any other thread could read it.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// - Parameter before: runs first, on the signals' queue (check ends its plugin's process).
    static func install(before: @escaping @Sendable () -> Void = {}) {
        let queue = DispatchQueue(label: "lifeline.exit-signals")
        for signo in [SIGINT, SIGTERM, SIGHUP] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler {
                before()
                exit(128 + signo)
            }
            source.resume()
            sources.append(source)
        }
    }
}
