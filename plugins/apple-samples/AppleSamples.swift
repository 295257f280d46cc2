import LifelineBackgroundTasks

/// The bundled Swift plugin that runs Apple's documented examples unchanged: ColorFeed's app
/// delegate (AppDelegate.swift), adopted as `UIApplicationMain` would adopt it, and the
/// `sendDataToServer` example of "Extending your app's background execution time"
/// (DataSender.swift), called whenever the app enters the background.
public final class AppleSamples: SwiftPlugin {
    public static let name = "apple-samples"

    private let appDelegate = AppDelegate()

    public init() {}

    public func load(_ context: PluginContext) throws {
        UIApplication.adopt(appDelegate, in: context) {
            // The article leaves the caller to the app: here, the app's entering the background,
            // with a sender of its own for each send. The article's method keeps one
            // `backgroundTaskID` per object, so a second send on the same object while the first
            // is in flight (the user back and gone again within it) overwrites the first task's
            // id, and that task is never ended: iOS would end the app. `lifeline explore` found
            // it in 16 runs, with one sender for the plugin (scenarios/leave-twice.scenario).
            NotificationCenter.default.addObserver(
                forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
            ) { _ in
                DataSender().sendDataToServer(data: NSData(data: Data("the day's changes".utf8)))
            }
        }
    }
}
