import Testing

import AppleSamplesPlugin
import Lifeline
import LifelineBackgroundTasks
import LifelineTesting

// Apple's names on a real host on the virtual clock: each test runs a scenario through
// `Simulation` and asserts what the report and the plugin's code saw.

/// An app delegate whose callbacks are closures.
private final class Delegate: UIResponder, UIApplicationDelegate {
    var didFinishLaunching: () -> Void = {}
    var log: (String) -> Void = { _ in }
    var fetch: (@escaping (UIBackgroundFetchResult) -> Void) -> Void = { $0(.noData) }
    var push: ([AnyHashable: Any], @escaping (UIBackgroundFetchResult) -> Void) -> Void = { $1(.noData) }

    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        log("delegate didFinishLaunching")
        didFinishLaunching()
        return true
    }
    func applicationDidBecomeActive(_ application: UIApplication) { log("delegate didBecomeActive") }
    func applicationWillResignActive(_ application: UIApplication) { log("delegate willResignActive") }
    func applicationDidEnterBackground(_ application: UIApplication) { log("delegate didEnterBackground") }
    func applicationWillEnterForeground(_ application: UIApplication) { log("delegate willEnterForeground") }
    func applicationWillTerminate(_ application: UIApplication) { log("delegate willTerminate") }
    func applicationDidReceiveMemoryWarning(_ application: UIApplication) { log("delegate didReceiveMemoryWarning") }
    func application(
        _ application: UIApplication, performFetchWithCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) { fetch(completionHandler) }
    func application(
        _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
        fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
    ) { push(userInfo, completionHandler) }
}

private let systemShown: Set<String> = [
    "systemTaskSubmitted", "systemTaskStarted", "systemTaskExpiring", "systemTaskCompleted", "systemTaskCancelled",
    "terminated", "suspended", "fetchCompleted", "pushCompleted",
]

// MARK: - BGTaskScheduler

@Test func bgTask_expirationHandler_isCalled_andTheTaskEnds() throws {
    let heard = Shared<[String]>([])
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            let registered = BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { task in
                heard.append("launched \(task.identifier) \(task is BGAppRefreshTask)")
                task.expirationHandler = {
                    heard.append("expiring, state \(UIApplication.shared.applicationState)")
                    task.setTaskCompleted(success: false)
                }
            }
            heard.append("registered \(registered)")
            let request = BGAppRefreshTaskRequest(identifier: refreshID)
            request.earliestBeginDate = Date(timeIntervalSinceNow: 60)
            try BGTaskScheduler.shared.submit(request)
        }
    ])
    #expect(heard.value == ["registered true", "launched com.example.refresh true", "expiring, state background"])
    // A refresh has 30 s; its expiration handler is called 5 s before the end, and completes it.
    #expect(
        lines(recorder, only: systemShown) == [
            "0 systemTaskSubmitted plugin=p identifier=com.example.refresh kind=refresh earliestBegin=60 requiresNetwork=false requiresPower=false replaced=false",
            "1 suspended",
            "60 systemTaskStarted plugin=p identifier=com.example.refresh kind=refresh task=1",
            "85 systemTaskExpiring plugin=p identifier=com.example.refresh kind=refresh task=1",
            "85 systemTaskCompleted plugin=p identifier=com.example.refresh kind=refresh task=1 success=false",
            "85 suspended",
        ])
    #expect(recorder.termination == nil)
}

@Test func bgProcessingTaskRequest_carriesItsConditions_andCompletes() throws {
    let heard = Shared<[String]>([])
    let recorder = try simulate("0s launch\n1s background\n10s charging on", [
        applePlugin { _ in
            BGTaskScheduler.shared.register(forTaskWithIdentifier: cleanID, using: nil) { task in
                heard.append("\(type(of: task))")
                DispatchQueue.global().asyncAfter(deadline: .now() + 3) { task.setTaskCompleted(success: true) }
            }
            let request = BGProcessingTaskRequest(identifier: cleanID)
            request.requiresNetworkConnectivity = true
            request.requiresExternalPower = true
            try BGTaskScheduler.shared.submit(request)
        }
    ])
    #expect(heard.value == ["BGProcessingTask"])
    #expect(
        lines(recorder, only: systemShown) == [
            "0 systemTaskSubmitted plugin=p identifier=com.example.clean kind=processing earliestBegin=0 requiresNetwork=true requiresPower=true replaced=false",
            "1 suspended",
            "10 systemTaskStarted plugin=p identifier=com.example.clean kind=processing task=1",
            "13 systemTaskCompleted plugin=p identifier=com.example.clean kind=processing task=1 success=true",
            "13 suspended",
        ])
}

@Test func submit_ofANonPermittedIdentifier_throwsNotPermitted() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch", [
        applePlugin { _ in
            do {
                try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: "com.example.unlisted"))
                heard.append("submitted")
            } catch BGTaskScheduler.Error.notPermitted {
                heard.append("notPermitted")
            }
            do {
                try BGTaskScheduler.shared.submit(BGProcessingTaskRequest(identifier: "com.example.unlisted"))
            } catch let error as BGTaskScheduler.Error {
                heard.append("\(error.code) \(error.errorCode) \(error.message.contains("not a permitted identifier"))")
            }
            heard.append("register \(BGTaskScheduler.shared.register(forTaskWithIdentifier: "com.example.unlisted", using: nil) { _ in })")
        }
    ])
    #expect(heard.value == ["notPermitted", "notPermitted 3 true", "register false"])
}

@Test func submit_tooManyPending_throwsTooManyPendingTaskRequests() throws {
    let heard = Shared<[String]>([])
    let ids = (1...11).map { "com.example.p\($0)" }
    _ = try simulate("0s launch", [
        applePlugin(identifiers: ids + [refreshID, "com.example.refresh2"]) { _ in
            // One refresh may be pending; a second under another identifier is one too many.
            try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
            do {
                try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: "com.example.refresh2"))
            } catch let error as BGTaskScheduler.Error {
                heard.append("refresh: \(error.code) \(error.errorCode)")
            }
            // The same identifier again replaces, and is no refusal.
            try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
            // Ten processing requests may be pending; the eleventh is refused.
            for id in ids {
                do {
                    try BGTaskScheduler.shared.submit(BGProcessingTaskRequest(identifier: id))
                } catch BGTaskScheduler.Error.tooManyPendingTaskRequests {
                    heard.append("processing: \(id) refused")
                }
            }
        }
    ])
    #expect(heard.value == ["refresh: tooManyPendingTaskRequests 2", "processing: com.example.p11 refused"])
}

@Test func submit_withoutTheScheduler_orOutsidePluginCode_throwsUnavailable() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch", [
        applePlugin { _ in
            do {
                try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
            } catch BGTaskScheduler.Error.unavailable {
                heard.append("unavailable")
            }
        }
    ], profile: .ios7)
    #expect(heard.value == ["unavailable"])
    // No plugin's code is running here.
    #expect(throws: BGTaskScheduler.Error(.unavailable, message: "no plugin's code is running")) {
        try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
    }
    #expect(BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { _ in } == false)
}

@Test func cancel_andCancelAll_removeThePendingRequests_andRegisteringLate_isRefused() throws {
    let heard = Shared<[String]>([])
    let recorder = try simulate("0s launch\n1s background\n2s foreground", [
        applePlugin { _ in
            BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { _ in heard.append("ran") }
            try BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
            try BGTaskScheduler.shared.submit(BGProcessingTaskRequest(identifier: cleanID))
            BGTaskScheduler.shared.getPendingTaskRequests { requests in
                heard.append("pending \(requests.map(\.identifier))")
                BGTaskScheduler.shared.cancel(taskRequestWithIdentifier: cleanID)
                BGTaskScheduler.shared.cancelAllTaskRequests()
                BGTaskScheduler.shared.getPendingTaskRequests { heard.append("then \($0.map(\.identifier))") }
            }
            NotificationCenter.default.addObserver(forName: UIApplication.didBecomeActiveNotification, object: nil, queue: nil) { _ in
                let late = BGTaskScheduler.shared.register(forTaskWithIdentifier: cleanID, using: nil) { _ in }
                heard.append("late register \(late)")
            }
        }
    ])
    // The pending list comes on a later turn: after the launch's didBecomeActive.
    #expect(heard.value == [
        "late register false", "pending [\"com.example.refresh\", \"com.example.clean\"]", "then []", "late register false",
    ])
    #expect(
        lines(recorder, only: ["systemTaskCancelled", "systemTaskStarted"]) == [
            "0 systemTaskCancelled plugin=p identifier=com.example.clean",
            "0 systemTaskCancelled plugin=p identifier=com.example.refresh",
        ])
}

// MARK: - UIApplication

@Test func endBackgroundTask_invalid_isHarmless_andBeginOutsidePluginCode_isInvalid() throws {
    let heard = Shared<[String]>([])
    let recorder = try simulate("0s launch\n1s background", [
        applePlugin { _ in
            NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil) { _ in
                UIApplication.shared.endBackgroundTask(.invalid)
                UIApplication.shared.endBackgroundTask(UIBackgroundTaskInvalid)
                var id = UIBackgroundTaskIdentifier.invalid
                id = UIApplication.shared.beginBackgroundTask(withName: "save") {
                    UIApplication.shared.endBackgroundTask(id)
                    id = .invalid
                }
                heard.append("began \(id != .invalid)")
                UIApplication.shared.endBackgroundTask(id)
                id = .invalid
                UIApplication.shared.endBackgroundTask(id)
            }
        }
    ])
    #expect(heard.value == ["began true"])
    #expect(!eventNames(recorder).contains("endUnknownTask"))
    #expect(recorder.pluginErrorCount == 0)
    #expect(lines(recorder, only: ["taskBegan", "taskEnded"]) == [
        "1 taskBegan plugin=p task=1 name=save", "1 taskEnded plugin=p task=1 expired=false",
    ])
    // Outside plugin code the app may do nothing.
    #expect(UIApplication.shared.beginBackgroundTask(withName: "x") {} == .invalid)
    #expect(UIApplication.shared.backgroundTimeRemaining == 0)
    #expect(UIApplication.shared.pluginContext == nil)
}

@Test func notifications_arriveInOrder_withUIKitsNames_afterTheDelegate() throws {
    let heard = Shared<[String]>([])
    let descriptor = swiftPlugin("p") { context in
        let delegate = Delegate()
        delegate.log = { heard.append($0) }
        UIApplication.adopt(delegate, in: context) {
            NotificationCenter.default.addObserver(forName: nil, object: nil, queue: nil) { note in
                heard.append("\(note.name.rawValue) from shared \(note.object as AnyObject === UIApplication.shared)")
            }
        }
    }
    _ = try simulate("0s launch\n1s background\n2s foreground\n3s memory-warning\n4s terminate", [descriptor])
    #expect(
        heard.value == [
            "delegate didFinishLaunching", "UIApplicationDidFinishLaunchingNotification from shared true",
            "delegate didBecomeActive", "UIApplicationDidBecomeActiveNotification from shared true",
            "delegate willResignActive", "UIApplicationWillResignActiveNotification from shared true",
            "delegate didEnterBackground", "UIApplicationDidEnterBackgroundNotification from shared true",
            "delegate willEnterForeground", "UIApplicationWillEnterForegroundNotification from shared true",
            "delegate didBecomeActive", "UIApplicationDidBecomeActiveNotification from shared true",
            "delegate didReceiveMemoryWarning", "UIApplicationDidReceiveMemoryWarningNotification from shared true",
            "delegate willTerminate", "UIApplicationWillTerminateNotification from shared true",
        ])
    // Every host event with a UIKit notification has one, under UIKit's name.
    let named = LifecycleEventName.allCases.compactMap { event in UIApplication.notificationName(for: event).map { (event, $0) } }
    #expect(named.count == 7)
    for (event, name) in named {
        #expect(name.rawValue.lowercased() == "uiapplication\(event.rawValue)notification".lowercased())
    }
}

@Test func backgroundTimeRemaining_andApplicationState_areTheHosts() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background", [
        applePlugin { context in
            heard.append("load \(UIApplication.shared.applicationState) \(UIApplication.shared.backgroundTimeRemaining == .greatestFiniteMagnitude)")
            NotificationCenter.default.addObserver(forName: UIApplication.didBecomeActiveNotification, object: nil, queue: nil) { _ in
                heard.append("active \(UIApplication.shared.applicationState) \(UIApplication.shared.backgroundTimeRemaining == .greatestFiniteMagnitude)")
            }
            NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil) { _ in
                let id = UIApplication.shared.beginBackgroundTask(withName: "t")
                heard.append("background \(UIApplication.shared.applicationState) \(UIApplication.shared.backgroundTimeRemaining) \(context.backgroundTimeRemaining)")
                DispatchQueue.main.asyncAfter(deadline: .now() + 10) {
                    heard.append("later \(UIApplication.shared.backgroundTimeRemaining) \(context.backgroundTimeRemaining)")
                    UIApplication.shared.endBackgroundTask(id)
                }
            }
        }
    ])
    // ios13's budget is 30 s; ten seconds into it, 20 are left.
    #expect(heard.value == ["load inactive true", "active active true", "background background 30.0 30.0", "later 20.0 20.0"])
}

@Test func fetchAndPush_completeThroughUIBackgroundFetchResult() throws {
    let heard = Shared<[String]>([])
    let descriptor = swiftPlugin("p") { context in
        let delegate = Delegate()
        delegate.fetch = { completion in completion(.newData) }
        delegate.push = { userInfo, completion in
            heard.append("push n=\(userInfo["n"] as? Int ?? -1)")
            DispatchQueue.global().asyncAfter(deadline: .now() + 2) { completion(.failed) }
        }
        UIApplication.adopt(delegate, in: context)
    }
    let recorder = try simulate("0s launch\n1s background\n10s fetch\n20s push {\"n\": 7}", [descriptor])
    #expect(heard.value == ["push n=7"])
    #expect(
        lines(recorder, only: ["fetchCompleted", "pushCompleted"]) == [
            "10 fetchCompleted plugin=p result=newData", "22 pushCompleted plugin=p result=failed",
        ])
}

@Test func twoPlugins_eachGetTheirOwnSingletons() throws {
    let heard = Shared<[String]>([])
    func plugin(_ name: String) -> PluginDescriptor {
        applePlugin(name) { context in
            NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil) { _ in
                heard.append("\(name) hears, shared is \(UIApplication.shared.pluginContext?.pluginName ?? "none")")
                DispatchQueue.main.async { heard.append("\(name) later, shared is \(UIApplication.shared.pluginContext?.pluginName ?? "none")") }
            }
        }
    }
    _ = try simulate("0s launch\n1s background", [plugin("a"), plugin("b")])
    #expect(heard.value == ["a hears, shared is a", "b hears, shared is b", "a later, shared is a", "b later, shared is b"])
}

// MARK: - Dispatch and operations

@Test func globalQueueBlock_waitingOnASemaphore_takesHostTime_andRunsInTurns() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background", [
        applePlugin { context in
            NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil) { _ in
                var id = UIBackgroundTaskIdentifier.invalid
                DispatchQueue.global().async {
                    id = UIApplication.shared.beginBackgroundTask(withName: "work")
                    heard.append("worker begins at \(context.now) as \(UIApplication.shared.pluginContext?.pluginName ?? "none")")
                    let answer = DispatchSemaphore(value: 0)
                    DispatchQueue.main.asyncAfter(deadline: .now() + 4) { answer.signal() }
                    answer.wait()
                    heard.append("worker resumes at \(context.now)")
                    UIApplication.shared.endBackgroundTask(id)
                }
                heard.append("dispatcher continues at \(context.now)")
            }
        }
    ])
    #expect(heard.value == ["worker begins at 1.0 as p", "dispatcher continues at 1.0", "worker resumes at 5.0"])
}

@Test func operationQueue_runsDependenciesInOrder_andCancelledOperationsStillComplete() throws {
    let heard = Shared<[String]>([])
    _ = try simulate("0s launch", [
        applePlugin { _ in
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            let first = BlockOperation { heard.append("first") }
            let second = BlockOperation { heard.append("second") }
            let never = BlockOperation { heard.append("never") }
            second.addDependency(first)
            never.addDependency(second)
            second.completionBlock = { heard.append("second completed, cancelled \(second.isCancelled)") }
            never.completionBlock = { heard.append("never completed, cancelled \(never.isCancelled)") }
            queue.addOperations([never, second, first], waitUntilFinished: false)
            never.cancel()
        }
    ])
    #expect(heard.value.contains("never") == false)
    #expect(heard.value.firstIndex(of: "first")! < heard.value.firstIndex(of: "second")!)
    #expect(heard.value.contains("second completed, cancelled false"))
    #expect(heard.value.contains("never completed, cancelled true"))
}

// MARK: - Apple's examples

/// The bundled plugin, as plugins/apple-samples/plugin.toml describes it.
private func appleSamples() throws -> PluginDescriptor {
    var descriptor = AppleSamples.descriptor
    descriptor.taskIdentifiers = [
        "com.example.apple-samplecode.ColorFeed.refresh", "com.example.apple-samplecode.ColorFeed.db_cleaning",
    ]
    descriptor.network = try NetworkPermissions(["127.0.0.1:*"])
    return descriptor
}

@Test func applesExamples_refreshAndSend_runAsWritten() throws {
    let recorder = try simulate(
        """
        0s http GET 127.0.0.1:8080/entries -> 200 [{"title": "red"}] in 2s
        0s http POST 127.0.0.1:8080/data -> 200 in 1s
        0s launch
        10s background
        20m foreground
        """, [try appleSamples()])
    #expect(recorder.pluginErrorCount == 0)
    #expect(
        lines(recorder, only: ["systemTaskStarted", "systemTaskCompleted", "taskBegan", "taskEnded", "httpResponse"]) == [
            "10 taskBegan plugin=apple-samples task=1 name=Finish Network Tasks",
            "11 httpResponse plugin=apple-samples method=POST url=http://127.0.0.1:8080/data status=200",
            "11 taskEnded plugin=apple-samples task=1 expired=false",
            "910 systemTaskStarted plugin=apple-samples identifier=com.example.apple-samplecode.ColorFeed.refresh kind=refresh task=1",
            "912 httpResponse plugin=apple-samples method=GET url=http://127.0.0.1:8080/entries status=200",
            "912 systemTaskCompleted plugin=apple-samples identifier=com.example.apple-samplecode.ColorFeed.refresh kind=refresh task=1 success=true",
        ])
}

@Test func applesExamples_expire_andEndOnTheExpirationPath() throws {
    let recorder = try simulate(
        """
        0s http GET 127.0.0.1:8080/entries -> hang
        0s http POST 127.0.0.1:8080/data -> 200 in 10m
        0s launch
        10s background
        20m foreground
        """, [try appleSamples()])
    #expect(recorder.pluginErrorCount == 0)
    #expect(recorder.termination == nil)
    // The send's task expires and its handler ends it; the refresh's handler cancels the queue, and
    // the operation's completion block completes the task unsuccessfully.
    #expect(
        lines(recorder, only: ["taskExpiring", "taskEnded", "systemTaskExpiring", "systemTaskCompleted", "endUnknownTask"]) == [
            "35 taskExpiring plugin=apple-samples task=1",
            "35 taskEnded plugin=apple-samples task=1 expired=true",
            "935 systemTaskExpiring plugin=apple-samples identifier=com.example.apple-samplecode.ColorFeed.refresh kind=refresh task=1",
            "935 systemTaskCompleted plugin=apple-samples identifier=com.example.apple-samplecode.ColorFeed.refresh kind=refresh task=1 success=false",
        ])
}

/// An app delegate that is the plugin itself, as docs/swift-api.md shows.
private final class SelfAdopting: UIResponder, ApplicationDelegatePlugin {
    static let name = "self-adopting"
    nonisolated(unsafe) static var heard: [String] = []
    func application(
        _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
    ) -> Bool {
        let registered = BGTaskScheduler.shared.register(forTaskWithIdentifier: refreshID, using: nil) { task in
            SelfAdopting.heard.append("ran \(task.identifier)")
            task.setTaskCompleted(success: true)
        }
        SelfAdopting.heard.append("registered \(registered) as \(application.pluginContext?.pluginName ?? "none")")
        try? BGTaskScheduler.shared.submit(BGAppRefreshTaskRequest(identifier: refreshID))
        return true
    }
}

@Test func applicationDelegatePlugin_adoptsItself_andRegistersInDidFinishLaunching() throws {
    var descriptor = SelfAdopting.descriptor
    descriptor.taskIdentifiers = [refreshID]
    SelfAdopting.heard = []
    let recorder = try simulate("0s launch\n1s background", [descriptor])
    #expect(SelfAdopting.heard == ["registered true as self-adopting", "ran com.example.refresh"])
    #expect(lines(recorder, only: ["systemTaskCompleted"]) == [
        "1 systemTaskCompleted plugin=self-adopting identifier=com.example.refresh kind=refresh task=1 success=true",
    ])
}

@Test func print_inPluginCode_isAPluginLogLine() throws {
    // ColorFeed's `print("Could not schedule app refresh: \(error)")`, on a profile from before
    // BGTaskScheduler: the line is the plugin's, in the report, not standard output's.
    let recorder = try simulate(
        "0s launch\n1s background", [try appleSamples()], profile: .ios7, logger: capturingLogger(Shared([])))
    let logs = lines(recorder, only: ["log"])
    #expect(logs.contains {
        $0.contains("plugin=apple-samples level=info message=Could not schedule app refresh: BGTaskScheduler.Error(unavailable, code 1)")
    }, "\(logs)")
    #expect(logs.contains { $0.contains("level=error message=BGTaskScheduler could not register 'com.example.apple-samplecode.ColorFeed.refresh'") })
}
