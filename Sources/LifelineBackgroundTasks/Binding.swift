@_exported import Foundation
@_exported import Lifeline

// Apple's names are process singletons (`UIApplication.shared`, `BGTaskScheduler.shared`,
// `NotificationCenter.default`), while the host gives each plugin a `PluginContext` of its own at
// every launch. The module binds the singletons to the plugin whose code is running: every handler
// it registers with the host (notifications, timers, task launches, expiration handlers, queued
// operations, dispatched blocks) runs with its plugin's `AppleApp` made current, and puts back
// what was current before. Code that runs with no plugin current gets what an iOS app gets when
// it may not run: `.invalid`, a thrown `.unavailable`, nothing posted.
//
// Threading: main executor only, as `PluginContext` is. The one exception, the worker threads of
// `DispatchQueue.global()`, run only while the main executor waits for them (see Dispatch.swift),
// so at most one thread of a host touches its state. Which app is current is kept per thread, and
// the table of apps behind a lock, because one process may run several hosts at once.

/// One plugin's Apple world for one launch: its application object, its notification center and
/// its app delegate.
final class AppleApp {
    weak var context: PluginContext?
    let application: UIApplication
    let notificationCenter = NotificationCenter(detached: false)
    /// `OperationQueue.main` for this app, made at its first use.
    private(set) lazy var mainOperationQueue = OperationQueue(mainOf: self)
    var delegate: (any UIApplicationDelegate)?
    /// The lifecycle events this app listens to already, so each is subscribed once.
    private var subscribed: Set<LifecycleEventName> = []

    init(context: PluginContext) {
        self.context = context
        self.application = UIApplication(detached: false)
        application.app = self
    }

    /// Runs `body` with this app current.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        let saved = AppleApp.current
        AppleApp.current = self
        defer { AppleApp.current = saved }
        return try body()
    }

    /// Subscribes to the host's lifecycle events once, to post them as notifications and call the
    /// delegate. A fetch and a push are listened to only with a delegate: each one a plugin hears
    /// holds the app awake until its completion is called.
    func listen(withDelegate: Bool) {
        guard let context else { return }
        var events: [LifecycleEventName] = [
            .didFinishLaunching, .didBecomeActive, .willResignActive, .didEnterBackground, .willEnterForeground,
            .willTerminate, .didReceiveMemoryWarning,
        ]
        if withDelegate { events += [.performFetch, .didReceiveRemoteNotification] }
        for event in events where !subscribed.contains(event) {
            subscribed.insert(event)
            context.on(event) { [self] e in
                // A handler throwing (a delegate that force-unwraps nil crashes; nothing throws
                // here) would be the host's pluginError; the delegate's methods do not throw.
                run { deliver(e) }
            }
        }
    }

    private func deliver(_ event: LifecycleEvent) {
        let app = application
        switch event.name {
        case .didFinishLaunching:
            _ = delegate?.application(app, willFinishLaunchingWithOptions: nil)
            _ = delegate?.application(app, didFinishLaunchingWithOptions: nil)
        case .didBecomeActive: delegate?.applicationDidBecomeActive(app)
        case .willResignActive: delegate?.applicationWillResignActive(app)
        case .didEnterBackground: delegate?.applicationDidEnterBackground(app)
        case .willEnterForeground: delegate?.applicationWillEnterForeground(app)
        case .willTerminate: delegate?.applicationWillTerminate(app)
        case .didReceiveMemoryWarning: delegate?.applicationDidReceiveMemoryWarning(app)
        case .performFetch:
            delegate?.application(app, performFetchWithCompletionHandler: completion(for: event))
            return
        case .didReceiveRemoteNotification:
            let userInfo = event.payload.flatMap { text in
                (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
            }.map { dict in Dictionary(uniqueKeysWithValues: dict.map { (AnyHashable($0.key), $0.value) }) } ?? [:]
            delegate?.application(app, didReceiveRemoteNotification: userInfo, fetchCompletionHandler: completion(for: event))
            return
        default: return
        }
        // As UIKit does: the delegate first, then the notification.
        if let name = UIApplication.notificationName(for: event.name) {
            notificationCenter.post(name: name, object: app)
        }
    }

    /// The completion handler UIKit hands a fetch or a push: the host's completion of this event.
    private func completion(for event: LifecycleEvent) -> (UIBackgroundFetchResult) -> Void {
        { [weak context] result in _ = try? context?.complete(event, result.fetchResult) }
    }

    /// Runs `work` on a later turn of the main executor, with this app current. Until it has run,
    /// the app is not suspended (it is a slice of a Swift task, which holds the app awake, T7), as
    /// an iOS app's main queue runs what was dispatched to it before the app is suspended.
    func soon(_ work: @escaping () -> Void) {
        guard let context else { return }
        let job = Unchecked((app: self, work: work))
        context.task { job.value.app.run(job.value.work) }
    }

    // MARK: - Which app is current

    /// The app whose plugin's code is running on this thread, if any. Per thread: a process may
    /// run several hosts at once (the tests do), each on its own thread.
    static var current: AppleApp? {
        get { currentSlot.value }
        set { currentSlot.value = newValue }
    }
    private static let currentSlot = ThreadSlot<AppleApp>()

    /// Each context's app, made on first use. A launch that ended leaves its app behind, and the
    /// entry is dropped the next time one is made. Locked: hosts on other threads share it.
    private static let apps = Locked<[ObjectIdentifier: AppleApp]>([:])

    static func of(_ context: PluginContext) -> AppleApp {
        let key = ObjectIdentifier(context)
        return apps.withLock { apps in
            if let app = apps[key], app.context === context { return app }
            apps = apps.filter { $0.value.context != nil }
            let app = AppleApp(context: context)
            apps[key] = app
            return app
        }
    }

    /// The current app's context, if its launch is still on.
    static var currentContext: PluginContext? { current?.context }
}

extension PluginContext {
    /// Runs `body` with Apple's names bound to this plugin: `UIApplication.shared`,
    /// `BGTaskScheduler.shared`, `NotificationCenter.default`, `DispatchQueue` and `OperationQueue`
    /// act for it, there and in every handler they register. The app's lifecycle is posted on
    /// `NotificationCenter.default` from here on.
    ///
    /// ```swift
    /// func load(_ context: PluginContext) throws {
    ///     context.withAppleNames {
    ///         NotificationCenter.default.addObserver(
    ///             forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
    ///         ) { _ in self.save() }
    ///     }
    /// }
    /// ```
    public func withAppleNames<T>(_ body: () throws -> T) rethrows -> T {
        let app = AppleApp.of(self)
        app.listen(withDelegate: app.delegate != nil)
        return try app.run(body)
    }
}

/// Prints to the running plugin's log (a `log` event in the report, as `lifeline.log` writes),
/// or to standard output when no plugin's code is running. It shadows the standard library's
/// `print`, so an iOS app's `print("Could not schedule app refresh: \(error)")` lands where the
/// host keeps a plugin's words, not in the middle of a report written to standard output.
public func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    let text = items.map { "\($0)" }.joined(separator: separator)
    if let context = AppleApp.currentContext {
        context.logger.info("\(text)")
    } else {
        Swift.print(text, terminator: terminator)
    }
}

/// A value that only ever runs on the main executor, handed through a `@Sendable` closure.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// A reference per thread, not retained: whoever sets it keeps the object alive meanwhile.
final class ThreadSlot<T: AnyObject>: @unchecked Sendable {
    private var key = pthread_key_t()

    init() { pthread_key_create(&key, nil) }

    var value: T? {
        get { pthread_getspecific(key).map { Unmanaged<T>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) }) }
    }
}

/// A value behind a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
