/// UIKit's base class of the app delegate, so `class AppDelegate: UIResponder, UIApplicationDelegate`
/// compiles. It has nothing of UIKit's responder chain: Lifeline has no UI.
open class UIResponder {
    public init() {}
}

/// The app as UIKit shows it: `UIApplication.shared`, for the plugin whose code is running.
///
/// Each plugin has an application object of its own at each launch; `shared` is the running
/// plugin's. Read with no plugin's code running, `shared` is an application that may do nothing:
/// `beginBackgroundTask` returns `.invalid`, `backgroundTimeRemaining` is 0 and
/// `applicationState` is `.background`.
public final class UIApplication: UIResponder, @unchecked Sendable {
    /// The app this object stands for; nil for the one read outside plugin code.
    weak var app: AppleApp?

    init(detached: Bool) {}

    /// The application of the plugin whose code is running.
    public static var shared: UIApplication { AppleApp.current?.application ?? detached }
    private static let detached = UIApplication(detached: true)

    private var context: PluginContext? { app?.context }

    /// The plugin context this application stands for, for Lifeline-only code beside iOS code
    /// (nil outside plugin code, or once the launch is over).
    public var pluginContext: PluginContext? { context }

    /// The adopted app delegate, if the plugin has one.
    public var delegate: (any UIApplicationDelegate)? { app?.delegate }

    /// The app's state, as UIKit names it.
    public enum State: Int, Sendable {
        case active = 0
        case inactive = 1
        case background = 2
    }

    /// `.active`, `.inactive` or `.background`, from the host's state. A suspended app runs no
    /// code, so plugin code never sees it; outside plugin code this is `.background`.
    public var applicationState: State {
        switch context?.state {
        case .active: return .active
        case .inactive: return .inactive
        default: return .background
        }
    }

    /// Seconds of background time left, the host's own figure (T2): `.greatestFiniteMagnitude` in
    /// the foreground, as iOS's `DBL_MAX`. 0 outside plugin code.
    public var backgroundTimeRemaining: TimeInterval { context?.backgroundTimeRemaining ?? 0 }

    /// Begins a background task (T1). The expiration handler runs on the main executor with this
    /// plugin current, shortly before the background time runs out; it must end the task.
    /// Returns `.invalid` when the app may not begin one (outside plugin code, or while a reload
    /// unloads the plugin).
    public func beginBackgroundTask(
        withName taskName: String?, expirationHandler handler: (() -> Void)? = nil
    ) -> UIBackgroundTaskIdentifier {
        guard let app, let context = app.context else { return .invalid }
        let id = context.beginBackgroundTask(taskName, expirationHandler: handler.map { h in { app.run(h) } })
        return UIBackgroundTaskIdentifier(rawValue: id)
    }

    /// Begins a background task with no name.
    public func beginBackgroundTask(expirationHandler handler: (() -> Void)? = nil) -> UIBackgroundTaskIdentifier {
        beginBackgroundTask(withName: nil, expirationHandler: handler)
    }

    /// Ends a background task (T6). Ending `.invalid` does nothing, as on iOS, so the common
    /// pattern of ending from both the work and the expiration handler is harmless; ending a task
    /// twice is the host's warning (`endUnknownTask`).
    public func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier) {
        guard identifier != .invalid, let context else { return }
        context.endBackgroundTask(identifier.rawValue)
    }

    // MARK: - Background fetch

    /// `setMinimumBackgroundFetchInterval`'s shortest interval: fetch as often as the system lets.
    public static let backgroundFetchIntervalMinimum: TimeInterval = 0
    /// `setMinimumBackgroundFetchInterval`'s "never fetch", iOS's default.
    public static let backgroundFetchIntervalNever: TimeInterval = .greatestFiniteMagnitude

    /// Accepted so that iOS 7–12 fetch code compiles, and ignored: on iOS it is what lets fetches
    /// come at all, while under Lifeline the scenario's `fetch` lines decide when one comes, and an
    /// adopted delegate hears each one.
    public func setMinimumBackgroundFetchInterval(_ minimumBackgroundFetchInterval: TimeInterval) {}

    /// Whether the user lets the app refresh in the background.
    public enum BackgroundRefreshStatus: Int, Sendable {
        case restricted = 0
        case denied = 1
        case available = 2
    }

    /// Always `.available`: Lifeline has no user to turn background refresh off. A profile with no
    /// task scheduler refuses `submit` with `.unavailable` instead.
    public var backgroundRefreshStatus: BackgroundRefreshStatus { .available }

    // MARK: - Remote notifications

    /// Accepted so that push code compiles: the scenario's `push` lines deliver silent pushes to an
    /// adopted delegate whether or not the app registered, and there is no device token
    /// (`application(_:didRegisterForRemoteNotificationsWithDeviceToken:)` is never called).
    public func registerForRemoteNotifications() {}

    /// Accepted and ignored, as `registerForRemoteNotifications()`.
    public func unregisterForRemoteNotifications() {}

    /// True: pushes reach the app (above).
    public var isRegisteredForRemoteNotifications: Bool { true }

    // MARK: - Notifications

    public static let didFinishLaunchingNotification = Notification.Name("UIApplicationDidFinishLaunchingNotification")
    public static let didBecomeActiveNotification = Notification.Name("UIApplicationDidBecomeActiveNotification")
    public static let willResignActiveNotification = Notification.Name("UIApplicationWillResignActiveNotification")
    public static let didEnterBackgroundNotification = Notification.Name("UIApplicationDidEnterBackgroundNotification")
    public static let willEnterForegroundNotification = Notification.Name("UIApplicationWillEnterForegroundNotification")
    public static let willTerminateNotification = Notification.Name("UIApplicationWillTerminateNotification")
    public static let didReceiveMemoryWarningNotification = Notification.Name(
        "UIApplicationDidReceiveMemoryWarningNotification")

    /// The notification UIKit posts for a host event; nil for the events UIKit has no notification
    /// for (a fetch, a push, the transfer events, `willUnload`).
    public static func notificationName(for event: LifecycleEventName) -> Notification.Name? {
        switch event {
        case .didFinishLaunching: return didFinishLaunchingNotification
        case .didBecomeActive: return didBecomeActiveNotification
        case .willResignActive: return willResignActiveNotification
        case .didEnterBackground: return didEnterBackgroundNotification
        case .willEnterForeground: return willEnterForegroundNotification
        case .willTerminate: return willTerminateNotification
        case .didReceiveMemoryWarning: return didReceiveMemoryWarningNotification
        default: return nil
        }
    }

    /// The launch options UIKit hands `didFinishLaunching`; Lifeline hands none (nil).
    public struct LaunchOptionsKey: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        // The keys launch code reads most, so that it compiles; no launch options are ever given.
        public static let remoteNotification = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsRemoteNotificationKey")
        public static let url = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsURLKey")
        public static let sourceApplication = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsSourceApplicationKey")
        public static let location = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsLocationKey")
    }

    // MARK: - Adopting an app delegate

    /// Makes `delegate` this plugin's app delegate (as `UIApplicationMain` does on iOS): it gets
    /// `application(_:didFinishLaunchingWithOptions:)` when the app finishes launching (the place to
    /// register `BGTaskScheduler` handlers), the lifecycle callbacks, a fetch and a silent push;
    /// then `body` runs with Apple's names bound to this plugin. Call it from `load`.
    public static func adopt(
        _ delegate: any UIApplicationDelegate, in context: PluginContext, then body: () throws -> Void
    ) rethrows {
        let app = AppleApp.of(context)
        app.delegate = delegate
        app.listen(withDelegate: true)
        try app.run(body)
    }

    /// Makes `delegate` this plugin's app delegate (see `adopt(_:in:then:)`).
    public static func adopt(_ delegate: any UIApplicationDelegate, in context: PluginContext) {
        adopt(delegate, in: context, then: {})
    }
}

/// UIKit's name for `UIApplication.BackgroundRefreshStatus`.
public typealias UIBackgroundRefreshStatus = UIApplication.BackgroundRefreshStatus

/// The identifier `beginBackgroundTask` returns.
public struct UIBackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    /// No task: what `beginBackgroundTask` returns when it cannot begin one.
    public static let invalid = UIBackgroundTaskIdentifier(rawValue: 0)
}

/// The name `.invalid` had before Swift 4.2. Apple's article "Extending your app's background
/// execution time" still prints it, so its example compiles here as printed.
public let UIBackgroundTaskInvalid = UIBackgroundTaskIdentifier.invalid

/// What a fetch or a silent push reports to its completion handler.
public enum UIBackgroundFetchResult: Int, Sendable {
    case newData = 0
    case noData = 1
    case failed = 2

    var fetchResult: FetchResult {
        switch self {
        case .newData: return .newData
        case .noData: return .noData
        case .failed: return .failed
        }
    }
}

/// The app delegate's callbacks that Lifeline makes. Each has a default that does nothing, as
/// UIKit's optional methods do, but for the fetch and the push: their defaults complete with
/// `.noData` at once, because the host holds the app awake until the completion is called.
public protocol UIApplicationDelegate: AnyObject {
    func application(_ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool
    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool
    func applicationDidBecomeActive(_ application: UIApplication)
    func applicationWillResignActive(_ application: UIApplication)
    func applicationDidEnterBackground(_ application: UIApplication)
    func applicationWillEnterForeground(_ application: UIApplication)
    func applicationWillTerminate(_ application: UIApplication)
    func applicationDidReceiveMemoryWarning(_ application: UIApplication)
    func application(
        _ application: UIApplication, performFetchWithCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void)
    func application(
        _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
        fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void)
}

extension UIApplicationDelegate {
    public func application(_ application: UIApplication, willFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool { true }
    public func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool { true }
    public func applicationDidBecomeActive(_ application: UIApplication) {}
    public func applicationWillResignActive(_ application: UIApplication) {}
    public func applicationDidEnterBackground(_ application: UIApplication) {}
    public func applicationWillEnterForeground(_ application: UIApplication) {}
    public func applicationWillTerminate(_ application: UIApplication) {}
    public func applicationDidReceiveMemoryWarning(_ application: UIApplication) {}
    public func application(
        _ application: UIApplication, performFetchWithCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) { completionHandler(.noData) }
    public func application(
        _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
        fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) { completionHandler(.noData) }
}

/// An app delegate that is itself the Swift plugin: conform a final class with `init()` and a
/// `name`, and its `load` adopts it (`UIApplication.adopt`).
///
/// ```swift
/// final class AppDelegate: UIResponder, UIApplicationDelegate, ApplicationDelegatePlugin {
///     static let name = "refresher"
///     func application(_ application: UIApplication, didFinishLaunchingWithOptions …) -> Bool { … }
/// }
/// ```
public protocol ApplicationDelegatePlugin: UIApplicationDelegate, SwiftPlugin {}

extension ApplicationDelegatePlugin {
    public func load(_ context: PluginContext) throws { UIApplication.adopt(self, in: context) }
}
