/// The BackgroundTasks framework's scheduler: `BGTaskScheduler.shared` acts for the plugin whose
/// code is running, through its `PluginContext` (`registerTask`, `submitTask`, `cancelTask`).
/// The identifiers a plugin may use are plugin.toml's `[background] identifiers`, as iOS's
/// `BGTaskSchedulerPermittedIdentifiers`.
public final class BGTaskScheduler: @unchecked Sendable {
    /// Holds nothing: every call acts for the running plugin.
    public static let shared = BGTaskScheduler()
    private init() {}

    /// Why `submit` refused, with Apple's codes.
    public struct Error: CustomNSError, Equatable, Sendable, CustomStringConvertible {
        public enum Code: Int, Sendable {
            /// The app cannot schedule background work: the profile has no task scheduler (before
            /// iOS 13), no plugin's code is running, or the app is not running it.
            case unavailable = 1
            /// The plugin has as many requests of the kind pending as it may: 1 refresh, 10
            /// processing.
            case tooManyPendingTaskRequests = 2
            /// The identifier is not in plugin.toml's `[background] identifiers`.
            case notPermitted = 3
        }
        public let code: Code
        /// The host's words for the refusal.
        public let message: String

        public init(_ code: Code, message: String = "") {
            self.code = code
            self.message = message
        }

        public static let errorDomain = BGTaskSchedulerErrorDomain
        public var errorCode: Int { code.rawValue }
        /// The host's words, as the error's localized description (`error.localizedDescription`).
        public var errorUserInfo: [String: Any] { message.isEmpty ? [:] : [NSLocalizedDescriptionKey: message] }
        public var description: String {
            "BGTaskScheduler.Error(\(code), code \(code.rawValue))" + (message.isEmpty ? "" : ": \(message)")
        }

        public static var unavailable: Code { .unavailable }
        public static var tooManyPendingTaskRequests: Code { .tooManyPendingTaskRequests }
        public static var notPermitted: Code { .notPermitted }


        init(_ error: SystemTaskError) {
            switch error.reason {
            case .notPermitted: self.init(.notPermitted, message: error.message)
            case .tooManyPending: self.init(.tooManyPendingTaskRequests, message: error.message)
            case .unavailable, .other: self.init(.unavailable, message: error.message)
            }
        }
    }

    /// Registers the launch handler for `identifier`: only while the app launches (while the
    /// plugin loads, or in `application(_:didFinishLaunchingWithOptions:)`), once, for a permitted
    /// identifier. Returns false otherwise, with the host's reason in the plugin's log (iOS raises an
    /// exception; a Swift plugin cannot catch one). The handler runs on the main executor, whatever
    /// `queue` is, with a `BGAppRefreshTask` or a `BGProcessingTask` as the request's kind says.
    @discardableResult
    public func register(
        forTaskWithIdentifier identifier: String, using queue: DispatchQueue?,
        launchHandler: @escaping (BGTask) -> Void
    ) -> Bool {
        guard let app = AppleApp.current, let context = app.context else { return false }
        do {
            try context.registerTask(identifier) { systemTask in
                let task: BGTask = systemTask.kind == .refresh
                    ? BGAppRefreshTask(systemTask, app: app) : BGProcessingTask(systemTask, app: app)
                app.run { launchHandler(task) }
            }
            return true
        } catch {
            context.logger.error("BGTaskScheduler could not register '\(identifier)': \(error.message)")
            return false
        }
    }

    /// Schedules `taskRequest`; one pending under the same identifier is replaced. Throws
    /// `BGTaskScheduler.Error` with the host's refusal mapped onto Apple's code.
    public func submit(_ taskRequest: BGTaskRequest) throws {
        guard let context = AppleApp.currentContext else {
            throw Error(.unavailable, message: "no plugin's code is running")
        }
        do {
            try context.submitTask(taskRequest.systemRequest)
        } catch {
            throw Error(error)
        }
    }

    /// Cancels the pending request for `identifier`, if there is one.
    public func cancel(taskRequestWithIdentifier identifier: String) {
        _ = try? AppleApp.currentContext?.cancelTask(identifier)
    }

    /// Cancels every pending request of the plugin.
    public func cancelAllTaskRequests() {
        guard let context = AppleApp.currentContext, let pending = try? context.pendingTasks() else { return }
        for task in pending { _ = try? context.cancelTask(task.request.identifier) }
    }

    /// Calls `completionHandler` with the plugin's pending requests, in the order they were
    /// submitted, on a later turn of the main executor (iOS calls it on a queue of its own).
    public func getPendingTaskRequests(completionHandler: @escaping ([BGTaskRequest]) -> Void) {
        guard let app = AppleApp.current, let context = app.context else { return }
        let requests = ((try? context.pendingTasks()) ?? []).map { pending -> BGTaskRequest in
            let r = pending.request
            let request: BGTaskRequest
            if r.kind == .refresh {
                request = BGAppRefreshTaskRequest(identifier: r.identifier)
            } else {
                let processing = BGProcessingTaskRequest(identifier: r.identifier)
                processing.requiresNetworkConnectivity = r.requiresNetwork
                processing.requiresExternalPower = r.requiresPower
                request = processing
            }
            request.earliestBeginDate = Date(timeIntervalSinceNow: max(0, pending.earliestBegin - context.now))
            return request
        }
        app.soon { completionHandler(requests) }
    }
}

/// The domain of `BGTaskScheduler.Error`, as `(error as NSError).domain` reads it.
public let BGTaskSchedulerErrorDomain = "BGTaskSchedulerErrorDomain"

extension BGTaskScheduler.Error.Code {
    /// `catch BGTaskScheduler.Error.notPermitted { … }`, as with Apple's error codes.
    public static func ~= (code: Self, error: any Swift.Error) -> Bool {
        (error as? BGTaskScheduler.Error)?.code == code
    }
}

/// A request to launch the app in the background.
public class BGTaskRequest: CustomStringConvertible {
    public let identifier: String
    /// The soonest the task may begin; nil for no delay. Read when the request is submitted, as its
    /// distance from the wall clock's now, to the millisecond: the host runs the task that long
    /// after the submit on its own clock (virtual in simulate).
    public var earliestBeginDate: Date?

    init(identifier: String) { self.identifier = identifier }

    var kind: SystemTaskKind { .refresh }

    var systemRequest: SystemTaskRequest {
        var seconds = 0.0
        if let date = earliestBeginDate {
            seconds = max(0, (date.timeIntervalSinceNow * 1000).rounded() / 1000)
        }
        return SystemTaskRequest(identifier: identifier, kind: kind, earliestBegin: seconds)
    }

    public var description: String { "<\(type(of: self)) \(identifier)>" }
}

/// A request for a short refresh (30 s in the ios13 profile).
public final class BGAppRefreshTaskRequest: BGTaskRequest {
    public override init(identifier: String) { super.init(identifier: identifier) }
}

/// A request for minutes of deferrable work (180 s in the ios13 profile), which may wait for a
/// network or a charger.
public final class BGProcessingTaskRequest: BGTaskRequest {
    public var requiresNetworkConnectivity = false
    public var requiresExternalPower = false

    public override init(identifier: String) { super.init(identifier: identifier) }

    override var kind: SystemTaskKind { .processing }

    override var systemRequest: SystemTaskRequest {
        var request = super.systemRequest
        request.requiresNetwork = requiresNetworkConnectivity
        request.requiresPower = requiresExternalPower
        return request
    }
}

/// A task the system runs: the launch handler gets one, and must call `setTaskCompleted(success:)`
/// before its time runs out, or the app is terminated (`completionTimeout`).
public class BGTask: CustomStringConvertible {
    private let task: SystemTask
    private weak var app: AppleApp?

    public var identifier: String { task.identifier }

    /// Called on the main executor, with this plugin current, shortly before the task's time runs
    /// out (the profile's `expirationLead`, 5 s): it should stop the work and complete the task.
    public var expirationHandler: (() -> Void)?

    init(_ task: SystemTask, app: AppleApp) {
        self.task = task
        self.app = app
        // Strong: the host keeps the task until it is completed, and the app need not. The cycle
        // is broken when the task is completed.
        task.expirationHandler = { [self, weak app] in
            guard let handler = expirationHandler else { return }
            if let app { app.run(handler) } else { handler() }
        }
    }

    /// Ends the task. A second call, or one after the time ran out, does nothing.
    public func setTaskCompleted(success: Bool) {
        task.setTaskCompleted(success: success)
        task.expirationHandler = nil
    }

    public var description: String { "<\(type(of: self)) \(identifier)>" }
}

/// The task of a `BGAppRefreshTaskRequest`.
public final class BGAppRefreshTask: BGTask {}

/// The task of a `BGProcessingTaskRequest`.
public final class BGProcessingTask: BGTask {}
