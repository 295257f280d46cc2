import Testing

#if canImport(UIKit)
import UIKit
import BackgroundTasks
#else
import LifelineBackgroundTasks
#endif
import Lifeline
import LifelineTesting

// Background code as an iOS developer writes it from Apple's documentation, not from Lifeline's:
// each class below is written against UIKit's and BackgroundTasks' names only, and each test runs
// it under a scenario and checks what iOS would do.

// MARK: - Observers as Apple's documentation writes them

/// A saver that observes the app leaving, with `queue: .main` as most sample code has it.
private final class Saver {
    var observer: NSObjectProtocol?
    var backgroundTask: UIBackgroundTaskIdentifier = .invalid
    let heard: Shared<[String]>

    init(heard: Shared<[String]>) {
        self.heard = heard
        observer = NotificationCenter.default.addObserver(
            forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: .main
        ) { [weak self] _ in
            self?.save()
        }
    }

    func save() {
        backgroundTask = UIApplication.shared.beginBackgroundTask(withName: "Save") { [weak self] in
            guard let self else { return }
            UIApplication.shared.endBackgroundTask(self.backgroundTask)
            self.backgroundTask = .invalid
        }
        OperationQueue.main.addOperation { [weak self] in
            guard let self else { return }
            heard.append("saved, state \(UIApplication.shared.applicationState == .background)")
            UIApplication.shared.endBackgroundTask(backgroundTask)
            backgroundTask = .invalid
        }
    }

    func stop() {
        if let observer { NotificationCenter.default.removeObserver(observer) }
        observer = nil
    }
}

@Test func observerOnTheMainOperationQueue_runs_andItsMainQueueWorkEndsTheTask() throws {
    let heard = Shared<[String]>([])
    let kept = Shared<[Saver]>([])
    let recorder = try simulate("0s launch\n1s background\n2s foreground\n3s background", [
        applePlugin { _ in
            let saver = Saver(heard: heard)
            kept.append(saver)
            NotificationCenter.default.addObserver(
                forName: UIApplication.willEnterForegroundNotification, object: nil, queue: OperationQueue.main
            ) { _ in saver.stop() }
        }
    ])
    // The observer is gone after the first return: only one save.
    #expect(heard.value == ["saved, state true"])
    #expect(lines(recorder, only: ["taskBegan", "taskEnded", "endUnknownTask"]) == [
        "1 taskBegan plugin=p task=1 name=Save", "1 taskEnded plugin=p task=1 expired=false",
    ])
    #expect(recorder.pluginErrorCount == 0)
}

@Test func operationQueueMain_isThePluginsOwn_andCurrentIsSeenInsideIt() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch", [
        applePlugin("a") { _ in
            OperationQueue.main.addOperation {
                heard.append("a on \(UIApplication.shared.pluginContext?.pluginName ?? "none") main \(OperationQueue.current === OperationQueue.main)")
            }
        },
        applePlugin("b") { _ in
            OperationQueue.main.addOperation {
                heard.append("b on \(UIApplication.shared.pluginContext?.pluginName ?? "none")")
            }
        },
    ])
    #expect(heard.value == ["a on a main true", "b on b"])
}

@Test func removeObserver_withAnotherName_leavesTheObserver() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            let token = NotificationCenter.default.addObserver(
                forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
            ) { _ in heard.append("background") }
            // Foundation removes an observer's entries only for the name given.
            NotificationCenter.default.removeObserver(token, name: UIApplication.willTerminateNotification, object: nil)
        }
    ])
    #expect(heard.value == ["background"])
}

// MARK: - UIApplication

@Test func applicationState_inEverySwitch_andTimeRemainingInTheForeground() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background\n2s foreground", [
        applePlugin { _ in
            func describe() -> String {
                switch UIApplication.shared.applicationState {
                case .active: return "active"
                case .inactive: return "inactive"
                case .background: return "background"
                @unknown default: return "unknown"
                }
            }
            for name in [
                UIApplication.didBecomeActiveNotification, UIApplication.didEnterBackgroundNotification,
                UIApplication.willEnterForegroundNotification,
            ] {
                NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
                    let remaining = UIApplication.shared.backgroundTimeRemaining
                    heard.append("\(describe()) \(remaining == .greatestFiniteMagnitude ? "max" : "\(remaining)")")
                }
            }
        }
    ])
    #expect(heard.value == ["active max", "background 30.0", "inactive max", "active max"])
}

@Test func endBackgroundTask_twice_isTheHostsWarning_asOnIOS() throws {
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil) { _ in
                let id = UIApplication.shared.beginBackgroundTask(withName: nil, expirationHandler: nil)
                UIApplication.shared.endBackgroundTask(id)
                UIApplication.shared.endBackgroundTask(id)
            }
        }
    ])
    #expect(lines(recorder, only: ["endUnknownTask"]) == ["1 endUnknownTask plugin=p task=1"])
}

/// Background fetch as iOS 7–12 code writes it: the interval is set at launch, or no fetch comes.
private final class FetchingDelegate: UIResponder, UIApplicationDelegate {
    func application(
        _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
    ) -> Bool {
        application.setMinimumBackgroundFetchInterval(UIApplication.backgroundFetchIntervalMinimum)
        // Launch code reads its options by UIKit's keys; Lifeline gives none.
        if launchOptions?[.remoteNotification] != nil || launchOptions?[.url] != nil { return false }
        return application.backgroundRefreshStatus == .available
    }

    func application(
        _ application: UIApplication, performFetchWithCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) {
        completionHandler(.newData)
    }
}

@Test func setMinimumBackgroundFetchInterval_compiles_andFetchesStillCome() throws {
    let delegate = FetchingDelegate()
    let recorder = try simulate("0s launch\n1s background\n10s fetch", [
        swiftPlugin("p") { context in UIApplication.adopt(delegate, in: context) }
    ], profile: .ios7)
    #expect(lines(recorder, only: ["fetchCompleted"]) == ["10 fetchCompleted plugin=p result=newData"])
    #expect(UIApplication.backgroundFetchIntervalNever > UIApplication.backgroundFetchIntervalMinimum)
}

// MARK: - BGTaskScheduler

@Test func submitErrors_readAsAppleCodeReadsThem() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch", [
        applePlugin { _ in
            do {
                try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: "com.example.unlisted"))
            } catch let error as BGTaskScheduler.Error {
                switch error.code {
                case .notPermitted: heard.append("not permitted")
                case .tooManyPendingTaskRequests: heard.append("too many")
                case .unavailable: heard.append("unavailable")
                @unknown default: heard.append("unknown")
                }
            } catch {
                heard.append("other \(error)")
            }
            do {
                try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: "com.example.unlisted"))
            } catch {
                let ns = error as NSError
                heard.append("\(ns.domain == BGTaskSchedulerErrorDomain) \(ns.code == BGTaskScheduler.Error.Code.notPermitted.rawValue)")
            }
        }
    ])
    #expect(heard.value == ["not permitted", "true true"])
}

@Test func earliestBeginDate_inThePast_runsAtOnce_andInTheFuture_waits() throws {
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { task in
                task.setTaskCompleted(success: true)
                task.setTaskCompleted(success: false)
            }
            BGTaskScheduler.shared.register(forTaskWithIdentifier: cleanID, using: DispatchQueue.global()) { task in
                task.setTaskCompleted(success: true)
            }
            let refresh = BGAppRefreshTaskRequest(identifier: refreshID)
            refresh.earliestBeginDate = Date(timeIntervalSinceNow: -3600)
            try BGTaskScheduler.shared.submit(refresh)
            let clean = BGProcessingTaskRequest(identifier: cleanID)
            clean.earliestBeginDate = Date(timeIntervalSinceNow: 15 * 60)
            try BGTaskScheduler.shared.submit(clean)
        }
    ])
    #expect(lines(recorder, only: ["systemTaskStarted", "systemTaskCompleted"]) == [
        "1 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
        "1 systemTaskCompleted plugin=p identifier=com.example.refresh kind=refresh task=1 success=true",
        "900 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=2",
        "900 systemTaskCompleted plugin=p identifier=com.example.clean kind=processing task=2 success=true",
    ])
    #expect(recorder.pluginErrorCount == 0)
}

@Test func aTaskNeverCompleted_endsTheApp_asIOSDoes() throws {
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { task in
                task.expirationHandler = { /* forgets to complete */ }
            }
            try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
        }
    ])
    #expect(recorder.termination != nil)
    #expect(lines(recorder, only: ["terminated"]).first?.contains("completionTimeout") == true, "\(lines(recorder, only: ["terminated"]))")
}

// MARK: - Push

/// Silent-push code as iOS apps write it: register at launch, complete by the app's state.
private final class PushDelegate: NSObject, UIApplicationDelegate {
    let heard: Shared<[String]>
    init(heard: Shared<[String]>) { self.heard = heard }

    func application(
        _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]? = nil
    ) -> Bool {
        application.registerForRemoteNotifications()
        heard.append("registered \(application.isRegisteredForRemoteNotifications)")
        return true
    }

    func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
        heard.append("token")
    }

    func application(
        _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
        fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) {
        guard let aps = userInfo["aps"] as? [String: Any], aps["content-available"] as? Int == 1 else {
            completionHandler(.noData)
            return
        }
        let queue = OperationQueue()
        queue.qualityOfService = .utility
        let operation = BlockOperation { self.heard.append("fetched") }
        operation.qualityOfService = .utility
        operation.completionBlock = { completionHandler(application.applicationState == .background ? .newData : .failed) }
        queue.addOperation(operation)
    }
}

@Test func silentPush_registeredAtLaunch_completesFromAnOperationsCompletionBlock() throws {
    let heard = Shared<[String]>([])
    let delegate = PushDelegate(heard: heard)
    let recorder = try simulate(
        "0s launch\n1s background\n10s push {\"aps\": {\"content-available\": 1}}\n20s push {\"aps\": {}}", [
            swiftPlugin("p") { context in UIApplication.adopt(delegate, in: context) }
        ])
    #expect(heard.value == ["registered true", "fetched"])
    #expect(lines(recorder, only: ["pushCompleted"]) == [
        "10 pushCompleted plugin=p result=newData", "20 pushCompleted plugin=p result=noData",
    ])
}

@Test func registeringTwice_isRefused_andCancellingARunningTasksIdentifier_leavesItRunning() throws {
    let heard = Shared<[String]>([])
    let logs = Shared<[String]>([])
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            let first = BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { task in
                // iOS cancels pending requests only; the running task is the app's to complete.
                BGTaskScheduler.shared.cancel(taskRequestWithIdentifier: refreshID)
                BGTaskScheduler.shared.cancelAllTaskRequests()
                DispatchQueue.global().asyncAfter(deadline: .now() + 2) { task.setTaskCompleted(success: true) }
            }
            let second = BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { _ in heard.append("second ran") }
            heard.append("\(first) \(second)")
            try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
        }
    ], logger: capturingLogger(logs))
    #expect(heard.value == ["true false"])
    #expect(lines(recorder, only: ["systemTaskStarted", "systemTaskCompleted", "systemTaskCancelled"]) == [
        "1 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
        "3 systemTaskCompleted plugin=p identifier=com.example.refresh kind=refresh task=1 success=true",
    ])
    #expect(lines(recorder, only: ["log"]).contains { $0.contains("could not register 'com.example.refresh'") })
}
