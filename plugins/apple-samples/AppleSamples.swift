import LifelineBackgroundTasks

/// The bundled Swift plugin that runs Apple's documented examples unchanged: ColorFeed's app
/// delegate (AppDelegate.swift), adopted as `UIApplicationMain` would adopt it, and the
/// `sendDataToServer` example of "Extending your app's background execution time"
/// (DataSender.swift), called whenever the app enters the background.
public final class AppleSamples: SwiftPlugin {
    public static let name = "apple-samples"

    private let appDelegate = AppDelegate()
    private let sender = DataSender()

    public init() {}

    public func load(_ context: PluginContext) throws {
        UIApplication.adopt(appDelegate, in: context) {
            // The article leaves the caller to the app: here, the app's entering the background.
            NotificationCenter.default.addObserver(
                forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
            ) { [sender] _ in
                sender.sendDataToServer(data: NSData(data: Data("the day's changes".utf8)))
            }
        }
    }
}
