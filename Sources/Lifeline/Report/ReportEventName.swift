/// The name of an event in a report's timeline (docs/report.md), declared once here so that the
/// compiler holds every place that records or reads one: a misspelt `.relanch` does not build,
/// where a misspelt string reached the report and was caught only by a test run under
/// LIFELINE_CHECK_EVENTS.
///
/// The lifecycle notifications are report events too; their names come from
/// `LifecycleEventName`, not a second spelling. `ReportEvents.fields` gives each name its fields,
/// and ReportEventNameTests holds every name declared here to that table and back.
///
/// A value, not an enum: a report read back (the pictures, `expect` lines, an older report) may
/// hold a name this version does not know, and `init(rawValue:)` keeps it. Each name is a computed
/// property, so a use folds to its string literal: nothing is initialized or looked up when an
/// event is recorded.
public struct ReportEventName: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// The name as a report holds it, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A lifecycle notification, recorded under its own name.
    public init(_ name: LifecycleEventName) { rawValue = name.rawValue }

    /// The declarations below only: elsewhere a name is one of them, or read from a report.
    fileprivate init(_ name: String) { rawValue = name }

    public var description: String { rawValue }

    /// Every name in `ReportEvents.fields`, sorted.
    public static var all: [ReportEventName] { ReportEvents.names.map(ReportEventName.init(rawValue:)) }
}

// Each name is declared on a line of its own as `public static var NAME: Self { Self(…) }`, with
// the property named as the event: ReportEventNameTests reads these lines.
extension ReportEventName {
    // MARK: Lifecycle notifications (`LifecycleEventName`)
    public static var didFinishLaunching: Self { Self(LifecycleEventName.didFinishLaunching) }
    public static var didBecomeActive: Self { Self(LifecycleEventName.didBecomeActive) }
    public static var willResignActive: Self { Self(LifecycleEventName.willResignActive) }
    public static var didEnterBackground: Self { Self(LifecycleEventName.didEnterBackground) }
    public static var willEnterForeground: Self { Self(LifecycleEventName.willEnterForeground) }
    public static var willTerminate: Self { Self(LifecycleEventName.willTerminate) }
    public static var didReceiveMemoryWarning: Self { Self(LifecycleEventName.didReceiveMemoryWarning) }
    public static var transferProgress: Self { Self(LifecycleEventName.transferProgress) }
    public static var transferDidFinish: Self { Self(LifecycleEventName.transferDidFinish) }
    public static var transferDidFail: Self { Self(LifecycleEventName.transferDidFail) }
    public static var didFinishTransferEvents: Self { Self(LifecycleEventName.didFinishTransferEvents) }
    public static var performFetch: Self { Self(LifecycleEventName.performFetch) }
    public static var didReceiveRemoteNotification: Self { Self(LifecycleEventName.didReceiveRemoteNotification) }
    public static var willUnload: Self { Self(LifecycleEventName.willUnload) }

    // MARK: The app's state and the device
    public static var suspended: Self { Self("suspended") }
    public static var killed: Self { Self("killed") }
    public static var forceQuit: Self { Self("forceQuit") }
    public static var endedWhileSuspended: Self { Self("endedWhileSuspended") }
    public static var memoryWarning: Self { Self("memoryWarning") }
    public static var relaunch: Self { Self("relaunch") }
    public static var resumed: Self { Self("resumed") }
    public static var reloaded: Self { Self("reloaded") }
    public static var unloaded: Self { Self("unloaded") }
    public static var charging: Self { Self("charging") }
    public static var network: Self { Self("network") }
    public static var terminated: Self { Self("terminated") }

    // MARK: Work the system gives the app
    public static var runTasks: Self { Self("runTasks") }
    public static var fetchCompleted: Self { Self("fetchCompleted") }
    public static var pushCompleted: Self { Self("pushCompleted") }
    public static var transferEventsCompleted: Self { Self("transferEventsCompleted") }
    public static var transferEventsTimedOut: Self { Self("transferEventsTimedOut") }
    public static var systemTaskSubmitted: Self { Self("systemTaskSubmitted") }
    public static var systemTaskCancelled: Self { Self("systemTaskCancelled") }
    public static var systemTaskDropped: Self { Self("systemTaskDropped") }
    public static var taskDeferred: Self { Self("taskDeferred") }
    public static var systemTaskStarted: Self { Self("systemTaskStarted") }
    public static var systemTaskExpiring: Self { Self("systemTaskExpiring") }
    public static var systemTaskCompleted: Self { Self("systemTaskCompleted") }

    // MARK: Background tasks
    public static var taskBegan: Self { Self("taskBegan") }
    public static var taskExpiring: Self { Self("taskExpiring") }
    public static var taskEnded: Self { Self("taskEnded") }
    public static var endUnknownTask: Self { Self("endUnknownTask") }

    // MARK: Plugins' code
    public static var log: Self { Self("log") }
    public static var pluginError: Self { Self("pluginError") }
    public static var watchdog: Self { Self("watchdog") }

    // MARK: HTTP
    public static var httpRequest: Self { Self("httpRequest") }
    public static var httpResponse: Self { Self("httpResponse") }

    // MARK: Queue operations
    public static var opStarted: Self { Self("opStarted") }
    public static var opFinished: Self { Self("opFinished") }
    public static var opDropped: Self { Self("opDropped") }
    public static var opReplaced: Self { Self("opReplaced") }

    // MARK: Background transfers
    public static var transferQueued: Self { Self("transferQueued") }
    public static var transferStarted: Self { Self("transferStarted") }
    public static var transferResumed: Self { Self("transferResumed") }
    public static var transferRestarted: Self { Self("transferRestarted") }
    public static var transferRetrying: Self { Self("transferRetrying") }
    public static var transferEnded: Self { Self("transferEnded") }
    public static var transferError: Self { Self("transferError") }
}
