import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT, SIGTERM and SIGHUP into `exit(128 + signal)` for `simulate` and `check`, so the
/// atexit handler of `TemporaryDirectory` removes their temporary state dirs; killed by the
/// signal's default action, the process would leave them behind. (`run` maps signals to steps.)
enum ExitOnSignals {
    /// Kept for the life of the process: a source that is released stops delivering. Written
    /// once, by `install` on the main thread, before any other thread could read it.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// The signal being turned into an exit; 0 while none.
    private static let exiting = Atomic<Int32>(0)

    /// Never returns once a signal is being turned into an exit: a thread that would end the
    /// process its own way (check, seeing its plugin's process killed) must leave it to that.
    static func parkIfExiting() {
        guard exiting.load(ordering: .sequentiallyConsistent) != 0 else { return }
        while true { pause() }
    }

    /// - Parameter before: runs first, on the signals' queue (check ends its plugin's process).
    static func install(before: @escaping @Sendable () -> Void = {}) {
        let queue = DispatchQueue(label: "lifeline.exit-signals")
        for signo in [SIGINT, SIGTERM, SIGHUP] {
            signal(signo, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signo, queue: queue)
            source.setEventHandler {
                exiting.store(signo, ordering: .sequentiallyConsistent)
                before()
                exit(128 + signo)
            }
            source.resume()
            sources.append(source)
        }
    }
}
