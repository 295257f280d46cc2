/// Runs the slices of Swift plugins' async code (see `HostTaskExecutor`) under the watchdog, and
/// holds the ones that become ready while the app is suspended: a suspended app runs no code.
///
/// Threading: main executor only, but for `pending`, which any thread may post to.
final class SwiftSlices {
    /// Slices posted and not yet run, across every plugin: the app is not suspended while one
    /// waits (T7).
    let pending = HostTaskExecutor.Queue()
    private let session: AppSession
    private let caller: GuardedCaller
    /// Slices that became ready while the app was suspended, in the order they did.
    private var held: [(PluginRef, () -> Void)] = []

    init(session: AppSession, caller: GuardedCaller) {
        self.session = session
        self.caller = caller
    }

    /// Runs one slice: under the watchdog while the plugin is part of the running app; as is once
    /// it is not (a cancelled task unwinding after the app ended).
    func run(_ plugin: PluginRef, _ slice: @escaping () -> Void) {
        guard session.isCurrent(plugin) else { return slice() }
        // A slice that a completion (a response, a timer) makes ready while the app is suspended
        // waits until the app runs again, or runs cancelled when the app ends.
        guard session.visibleState != .suspended else {
            held.append((plugin, slice))
            return
        }
        caller.call(plugin.slot, in: caller.openWindow(limit: session.profile.transitionLimit, handler: "Swift task")) {
            slice()
            return .returned
        }
    }

    /// Runs the held slices on later turns, in the order they became ready.
    func releaseHeld() {
        let held = self.held
        self.held.removeAll()
        for (plugin, slice) in held {
            session.executor.schedule(at: session.now) { [unowned self] in run(plugin, slice) }
        }
    }
}
