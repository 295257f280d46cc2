/// What a component asks of the coordinator: the few things that change the whole app, which no
/// component may do by itself. Components call `AppSession.request(_:)`; the coordinator (the
/// host) carries every case out in one `switch`, as swift-service-lifecycle's `ServiceGroup`
/// handles what its children report.
enum HostRequest {
    /// A rule was broken: the termination is recorded once (after the watchdog's event, when the
    /// watchdog decided it), and the app ends.
    case terminate(Termination, watchdog: WatchdogTarget? = nil)
    /// The app was terminated meanwhile by the watchdog's thread (W3): it ends now, on the main
    /// executor, with the termination already recorded.
    case endApp
    /// The system needs the app: it is woken if suspended, or launched in the background if not
    /// running. The report says why.
    case wake(reason: String)
    /// Transfer events wait: the app is launched in the background if it is not running.
    case relaunch(reason: String)
}

/// Who carries out the components' requests: the coordinator, or a test's stand-in.
protocol HostRequestHandler: AnyObject {
    func handle(_ request: HostRequest)
}
