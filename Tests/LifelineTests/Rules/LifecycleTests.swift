import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 2.2 (the action table) and 3: the lifecycle state machine as a pure value, then the
// notifications the host sends for each action.

/// A lifecycle in `state`, reached the way an app gets there.
private func lifecycle(in state: AppState) -> Lifecycle {
    var l = Lifecycle()
    let path: [Step]
    switch state {
    case .notRunning: path = []
    case .inactive: path = [.launch, .resign]
    case .active: path = [.launch]
    case .background, .suspended: path = [.launch, .background]
    case .ended: path = [.launch, .terminate]
    }
    for step in path { _ = try! l.apply(step) }
    if state == .suspended { l.suspend() }
    #expect(l.state == state)
    return l
}

struct AllowedTransition: Sendable, CustomTestStringConvertible {
    var from: AppState
    var step: Step
    var actions: [Lifecycle.Action]
    var to: AppState
    var testDescription: String { "\(step) from \(from.rawValue)" }
}

private let launchActions: [Lifecycle.Action] = [
    .startApp(inBackground: false), .notify(.didFinishLaunching, state: .inactive),
    .notify(.didBecomeActive, state: .active),
]
private let launchInBackgroundActions: [Lifecycle.Action] = [
    .startApp(inBackground: true), .notify(.didFinishLaunching, state: .background),
]
private let foregroundActions: [Lifecycle.Action] = [
    .stopBudget, .notify(.willEnterForeground, state: .inactive), .notify(.didBecomeActive, state: .active),
]

private let allowedTransitions: [AllowedTransition] = [
    .init(from: .notRunning, step: .launch, actions: launchActions, to: .active),
    .init(from: .ended, step: .launch, actions: launchActions, to: .active),
    .init(from: .notRunning, step: .launchInBackground, actions: launchInBackgroundActions, to: .background),
    .init(from: .ended, step: .launchInBackground, actions: launchInBackgroundActions, to: .background),
    .init(from: .active, step: .resign, actions: [.notify(.willResignActive, state: .inactive)], to: .inactive),
    .init(from: .inactive, step: .activate, actions: [.notify(.didBecomeActive, state: .active)], to: .active),
    .init(
        from: .active, step: .background,
        actions: [
            .notify(.willResignActive, state: .inactive), .startBudget,
            .notify(.didEnterBackground, state: .background),
        ], to: .background),
    .init(
        from: .inactive, step: .background,
        actions: [.startBudget, .notify(.didEnterBackground, state: .background)], to: .background),
    .init(from: .background, step: .foreground, actions: foregroundActions, to: .active),
    .init(from: .suspended, step: .foreground, actions: foregroundActions, to: .active),
    .init(
        from: .inactive, step: .memoryWarning, actions: [.notify(.didReceiveMemoryWarning, state: .inactive)],
        to: .inactive),
    .init(
        from: .active, step: .memoryWarning, actions: [.notify(.didReceiveMemoryWarning, state: .active)],
        to: .active),
    .init(
        from: .background, step: .memoryWarning,
        actions: [.notify(.didReceiveMemoryWarning, state: .background)], to: .background),
    .init(from: .suspended, step: .memoryWarning, actions: [], to: .suspended),
    .init(
        from: .inactive, step: .terminate, actions: [.notify(.willTerminate, state: .inactive), .endApp], to: .ended),
    .init(from: .active, step: .terminate, actions: [.notify(.willTerminate, state: .active), .endApp], to: .ended),
    .init(
        from: .background, step: .terminate, actions: [.notify(.willTerminate, state: .background), .endApp],
        to: .ended),
    .init(from: .suspended, step: .terminate, actions: [.endApp], to: .ended),
    .init(from: .inactive, step: .kill, actions: [.endApp], to: .ended),
    .init(from: .active, step: .kill, actions: [.endApp], to: .ended),
    .init(from: .background, step: .kill, actions: [.endApp], to: .ended),
    .init(from: .suspended, step: .kill, actions: [.endApp], to: .ended),
]

@Test(arguments: allowedTransitions)
func lifecycle_allowedStep_returnsNotificationsInIOSOrder(_ t: AllowedTransition) throws {
    var l = lifecycle(in: t.from)
    let actions = try l.apply(t.step)
    #expect(actions == t.actions)
    #expect(l.state == t.to)
}

struct RefusedTransition: Sendable, CustomTestStringConvertible {
    var from: AppState
    var step: Step
    var testDescription: String { "\(step) refused while \(from.rawValue)" }
}

private let refusedTransitions: [RefusedTransition] =
    [
        .init(from: .active, step: .foreground),
        .init(from: .inactive, step: .foreground),
        .init(from: .inactive, step: .resign),
        .init(from: .background, step: .resign),
        .init(from: .suspended, step: .resign),
        .init(from: .active, step: .activate),
        .init(from: .background, step: .activate),
        .init(from: .suspended, step: .activate),
        .init(from: .background, step: .background),
        .init(from: .suspended, step: .background),
        .init(from: .active, step: .launch),
        .init(from: .background, step: .launch),
        .init(from: .suspended, step: .launchInBackground),
        .init(from: .notRunning, step: .background),
        .init(from: .notRunning, step: .terminate),
        .init(from: .notRunning, step: .kill),
    ]
    // Anything but launch after the app ended.
    + [Step.resign, .activate, .background, .foreground, .memoryWarning, .terminate, .kill].map {
        RefusedTransition(from: .ended, step: $0)
    }

@Test(arguments: refusedTransitions)
func lifecycle_refusedStep_throwsAndKeepsState(_ t: RefusedTransition) {
    var l = lifecycle(in: t.from)
    #expect(throws: Lifecycle.TransitionError(step: t.step, state: t.from)) { try l.apply(t.step) }
    #expect(l.state == t.from)
}

@Test func lifecycle_stepAfterEnd_messageSaysOnlyLaunchCanStartItAgain() {
    var l = lifecycle(in: .ended)
    do {
        _ = try l.apply(.foreground)
        Issue.record("foreground after the end was allowed")
    } catch {
        #expect(error.description.contains("only 'launch'"))
    }
}

@Test func lifecycle_suspendedStaysSuspendedAfterDroppedMemoryWarning() throws {
    var l = lifecycle(in: .suspended)
    _ = try l.apply(.memoryWarning)
    #expect(l.state == .suspended)
}

// MARK: - Notifications through the host

/// Every lifecycle notification a plugin sees: `name state=… visible=…`, where `state` is the
/// event's and `visible` is what `context.state` reads inside the handler.
private func observer(_ seen: Shared<[String]>) -> PluginDescriptor {
    swiftPlugin("observer") { context in
        for name in LifecycleEventName.allCases {
            context.on(name) { event in
                seen.append(
                    "\(ReportNumber.seconds(event.time)) \(event.name.rawValue) "
                        + "state=\(event.state.rawValue) visible=\(context.state.rawValue)")
            }
        }
    }
}

struct NotificationCase: Sendable, CustomTestStringConvertible {
    var scenario: String
    var timeline: [String]
    var testDescription: String { scenario.split(separator: "\n").last.map(String.init) ?? scenario }
}

private let notificationCases: [NotificationCase] = [
    .init(scenario: "0s launch", timeline: ["0 didFinishLaunching", "0 didBecomeActive"]),
    .init(scenario: "0s launch background", timeline: ["0 didFinishLaunching", "0 suspended"]),
    .init(
        scenario: "0s launch\n1s resign",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive"]),
    .init(
        scenario: "0s launch\n1s resign\n2s activate",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "2 didBecomeActive"]),
    .init(
        scenario: "0s launch\n1s background",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "1 didEnterBackground", "1 suspended"]
    ),
    .init(
        scenario: "0s launch\n1s resign\n2s background",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "2 didEnterBackground", "2 suspended"]
    ),
    .init(
        scenario: "0s launch\n1s background\n2s foreground",
        timeline: [
            "0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "1 didEnterBackground", "1 suspended",
            "2 willEnterForeground", "2 didBecomeActive",
        ]),
    .init(
        scenario: "0s launch\n1s memory-warning",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 didReceiveMemoryWarning"]),
    .init(
        scenario: "0s launch\n1s resign\n2s memory-warning",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "2 didReceiveMemoryWarning"]),
    .init(
        scenario: "0s launch\n1s background\n2s memory-warning",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "1 didEnterBackground", "1 suspended"]
    ),
    .init(
        scenario: "0s launch\n1s terminate",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willTerminate"]),
    .init(
        scenario: "0s launch\n1s resign\n2s terminate",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "2 willTerminate"]),
    .init(
        scenario: "0s launch\n1s background\n2s terminate",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "1 willResignActive", "1 didEnterBackground", "1 suspended"]
    ),
    .init(scenario: "0s launch\n1s kill", timeline: ["0 didFinishLaunching", "0 didBecomeActive"]),
    .init(
        scenario: "0s launch\n1s terminate\n2s launch",
        timeline: [
            "0 didFinishLaunching", "0 didBecomeActive", "1 willTerminate", "2 didFinishLaunching", "2 didBecomeActive",
        ]),
    .init(
        scenario: "0s launch\n1s kill\n2s launch background",
        timeline: ["0 didFinishLaunching", "0 didBecomeActive", "2 didFinishLaunching", "2 suspended"]),
]

@Test(arguments: notificationCases)
func host_scenarioAction_recordsNotificationsInIOSOrder(_ c: NotificationCase) throws {
    let recorder = try simulate(c.scenario, [observer(Shared([]))])
    #expect(lines(recorder, only: lifecycleEvents) == c.timeline)
    #expect(recorder.termination == nil)
}

@Test func host_handlers_seeEventStateAndContextStateOfEachNotification() throws {
    let seen = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background\n2s foreground\n3s terminate", [observer(seen)])
    #expect(
        seen.value == [
            "0 didFinishLaunching state=inactive visible=inactive",
            "0 didBecomeActive state=active visible=active",
            "1 willResignActive state=inactive visible=inactive",
            "1 didEnterBackground state=background visible=background",
            "2 willEnterForeground state=inactive visible=inactive",
            "2 didBecomeActive state=active visible=active",
            "3 willTerminate state=active visible=active",
        ])
}

@Test func host_launchInBackground_handlersSeeBackgroundState() throws {
    let seen = Shared<[String]>([])
    _ = try simulate("0s launch background", [observer(seen)])
    #expect(seen.value == ["0 didFinishLaunching state=background visible=background"])
}

@Test func host_memoryWarningInBackgroundWithTask_isDelivered() throws {
    let seen = Shared<[String]>([])
    let keepAwake = swiftPlugin("keeper") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("work")
            context.after(10) { context.endBackgroundTask(id) }
        }
    }
    let recorder = try simulate("0s launch\n1s background\n5s memory-warning", [keepAwake, observer(seen)])
    #expect(seen.value.last == "5 didReceiveMemoryWarning state=background visible=background")
    #expect(lines(recorder, only: ["suspended"]) == ["11 suspended"])
}

@Test func host_terminateFromSuspended_sendsNoWillTerminate() throws {
    let seen = Shared<[String]>([])
    _ = try simulate("0s launch\n1s background\n2s terminate", [observer(seen)])
    #expect(!seen.value.contains { $0.contains("willTerminate") })
    #expect(seen.value.last == "1 didEnterBackground state=background visible=background", "the observer was called")
    // Positive control: the same terminate from the foreground does send it.
    let control = Shared<[String]>([])
    _ = try simulate("0s launch\n2s terminate", [observer(control)])
    #expect(control.value.last == "2 willTerminate state=active visible=active")
}

@Test func host_relaunch_makesEveryPluginAfreshAndClosesTheOldOne() throws {
    let made = Shared(0)
    let loads = Shared<[String]>([])
    let closed = Shared(0)
    let descriptor = PluginDescriptor(name: "counter", kind: .swift) {
        let number = made.mutate { n -> Int in
            n += 1
            return n
        }
        return ClosurePlugin(
            name: "counter", kind: .swift, preemptor: nil,
            start: { context in
                loads.append("instance \(number) at \(ReportNumber.seconds(HostTime.seconds(context.now)))")
                return .returned
            }, onClose: { closed.mutate { $0 += 1 } })
    }
    _ = try simulate("0s launch\n1s terminate\n2s launch\n3s kill", [descriptor])
    #expect(made.value == 2)
    #expect(loads.value == ["instance 1 at 0", "instance 2 at 2"])
    #expect(closed.value == 2)
}

@Test func host_plugins_areLoadedAndNotifiedInNameOrder() throws {
    let order = Shared<[String]>([])
    func named(_ name: String) -> PluginDescriptor {
        swiftPlugin(name) { context in
            order.append("load \(name)")
            context.on(.didBecomeActive) { _ in order.append("active \(name)") }
        }
    }
    let recorder = try simulate("0s launch", [named("zeta"), named("alpha"), named("mid")])
    #expect(
        order.value == [
            "load alpha", "load mid", "load zeta", "active alpha", "active mid", "active zeta",
        ])
    guard case .array(let plugins)? = recorder.report()["plugins"] else {
        Issue.record("no plugins array")
        return
    }
    #expect(plugins.map { $0["name"] } == [.string("alpha"), .string("mid"), .string("zeta")])
}

@Test func host_cancelledSubscription_isNotCalled() throws {
    let seen = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        let id = context.on(.didBecomeActive) { _ in seen.append("called") }
        context.on(.didBecomeActive) { _ in seen.append("kept@\(context.now)") }
        context.cancelSubscription(id)
    }
    _ = try simulate("0s launch\n1s resign\n2s activate", [p])
    // Only the subscription left in place is called, at both activations.
    #expect(seen.value == ["kept@0.0", "kept@2.0"])
}
