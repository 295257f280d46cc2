import Foundation
import Logging
import Testing

@testable import Lifeline

// Helpers for driving the core without Lua. Every test builds its own plugins and state: tests
// run in parallel, so nothing here is a shared mutable global.

/// A value shared between a test and the code it drives. Locked, because the watchdog calls back
/// on its own thread.
final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }

    @discardableResult
    func mutate<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&stored)
    }
}

extension Shared where Value: RangeReplaceableCollection {
    func append(_ element: Value.Element) { mutate { $0.append(element) } }
}

/// Lets a closure that only ever runs on the test's thread (the main executor) into a `@Sendable`
/// plugin descriptor.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
}

/// A plugin instance whose behaviour is a closure: `start` is whatever the test passes.
final class ClosurePlugin: PluginInstance {
    let name: String
    let kind: PluginKind
    let preemptor: (any Preemptible)?
    private let body: (PluginContext) -> CallOutcome
    private let onClose: () -> Void

    init(
        name: String, kind: PluginKind, preemptor: (any Preemptible)?,
        start: @escaping (PluginContext) -> CallOutcome, onClose: @escaping () -> Void
    ) {
        self.name = name
        self.kind = kind
        self.preemptor = preemptor
        self.body = start
        self.onClose = onClose
    }

    func start(_ context: PluginContext) -> CallOutcome { body(context) }
    func resetPreemption() {}
    func close() { onClose() }
}

/// A plugin whose start runs `start` and reports its outcome as is (the bridge's form).
func rawPlugin(
    _ name: String, kind: PluginKind = .swift, preemptor: (any Preemptible)? = nil,
    onClose: @escaping () -> Void = {}, start: @escaping (PluginContext) -> CallOutcome
) -> PluginDescriptor {
    let start = Unchecked(value: start)
    let onClose = Unchecked(value: onClose)
    return PluginDescriptor(name: name, kind: kind) {
        ClosurePlugin(name: name, kind: kind, preemptor: preemptor, start: start.value, onClose: onClose.value)
    }
}

/// A Swift plugin whose load is `setup`; a thrown error is a load failure.
func swiftPlugin(_ name: String, _ setup: @escaping (PluginContext) throws -> Void) -> PluginDescriptor {
    rawPlugin(name) { context in SwiftCall.outcome { try setup(context) } }
}

/// The ios13 profile with some figures changed.
func profile(_ base: Profile = .ios13, _ edit: (inout Profile) -> Void) -> Profile {
    var p = base
    edit(&p)
    return p
}

/// A test failure thrown from plugin code.
struct PluginFailure: Error, CustomStringConvertible {
    var text: String
    var description: String { text }
}

/// Runs `scenario` (the text of a scenario file) in virtual time.
func simulate(
    _ scenario: String, _ plugins: [PluginDescriptor], profile: Profile = .ios13, watchdogScale: Double = 1,
    until: HostTime? = nil, logger: Logger? = nil,
    onOverrun: (@Sendable (UnpreemptibleOverrun) -> Void)? = nil
) throws -> Recorder {
    let configuration = HostConfiguration(
        profile: profile, watchdogScale: watchdogScale, logger: logger ?? quietLogger(),
        onUnpreemptibleOverrun: onOverrun)
    return try Simulation.run(
        scenario: Scenario.parse(scenario, fileName: "t.scenario"), plugins: plugins, configuration: configuration,
        until: until)
}

/// One timeline event as a line: `27 taskEnded plugin=p task=1 expired=true`. A task's name is
/// shown where it begins only: the rules under test are about ids, and ReportTests checks that the
/// report names the task on every task event.
func line(_ event: TimelineEvent) -> String {
    let shownFields = event.event == "taskEnded" || event.event == "taskExpiring"
        ? event.fields.filter { $0.0 != "name" } : event.fields
    let fields = shownFields.map { key, value -> String in
        if case .string(let s) = value { return "\(key)=\(s)" }
        return "\(key)=\(value.serialized())"
    }
    return ([ReportNumber.seconds(event.time), event.event] + fields).joined(separator: " ")
}

/// The timeline as lines, keeping only the events named in `only` (all of them when nil).
func lines(_ recorder: Recorder, only: Set<String>? = nil) -> [String] {
    recorder.timeline.filter { only?.contains($0.event) ?? true }.map(line)
}

/// The names of the timeline's events, in order.
func eventNames(_ recorder: Recorder) -> [String] { recorder.timeline.map(\.event) }

let lifecycleEvents: Set<String> = Set(LifecycleEventName.allCases.map(\.rawValue)).union(["suspended"])
let taskEvents: Set<String> = ["taskBegan", "taskExpiring", "taskEnded", "endUnknownTask", "suspended", "terminated"]

/// Busy-waits (no sleep) for `seconds` of real time, as runaway plugin code would.
func spin(seconds: Double) {
    let end = Monotonic.nanoseconds() + UInt64(seconds * 1e9)
    while Monotonic.nanoseconds() < end {}
}

/// Seconds of real time since `start` (Monotonic nanoseconds).
func elapsed(since start: UInt64) -> Double { Double(Monotonic.nanoseconds() &- start) / 1e9 }

// MARK: - Logs

/// Collects what the host logs, for checking iOS's warnings.
struct CapturingLogHandler: LogHandler {
    let sink: Shared<[String]>
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        sink.append("\(event.level): \(event.message)")
    }
}

/// A logger whose lines land in `sink`.
func capturingLogger(_ sink: Shared<[String]>) -> Logger {
    Logger(label: "lifeline-test") { _ in CapturingLogHandler(sink: sink) }
}

/// A logger that drops everything, so test output stays readable.
func quietLogger() -> Logger {
    Logger(label: "lifeline-test") { _ in SwiftLogNoOpLogHandler() }
}

// MARK: - Driving a host by hand

/// A host on a virtual clock, driven step by step, for tests that need to look past the point
/// where `Simulation` stops (T9) or to inspect the host between steps.
final class Harness {
    let clock = VirtualClock()
    let executor: MainExecutor
    let host: LifelineHost
    var refused: [Lifecycle.TransitionError] = []

    init(
        _ plugins: [PluginDescriptor], profile: Profile = .ios13, watchdogScale: Double = 1,
        loadFailurePolicy: HostConfiguration.LoadFailurePolicy = .abort
    ) {
        executor = MainExecutor(clock: clock)
        host = LifelineHost(
            configuration: HostConfiguration(
                profile: profile, watchdogScale: watchdogScale, loadFailurePolicy: loadFailurePolicy,
                logger: quietLogger()),
            plugins: plugins, executor: executor)
    }

    deinit { host.shutdown() }

    /// Schedules a step at `seconds`, as a scenario line would.
    func at(_ seconds: Double, _ step: Step) {
        executor.schedule(at: .seconds(seconds)) { [unowned self] in
            do throws(Lifecycle.TransitionError) {
                try host.perform(step)
            } catch {
                refused.append(error)
            }
        }
    }

    /// Runs until `seconds`. With `stopWhenStopped`, stops as `Simulation` does once the host has
    /// stopped; without, keeps going, to show that nothing runs after a termination.
    func run(until seconds: Double, stopWhenStopped: Bool = true) {
        executor.run(
            until: .seconds(seconds), shouldStop: { [unowned self] in stopWhenStopped && host.isStopped },
            afterJob: host.afterJob)
    }

    var recorder: Recorder { host.recorder }
}
