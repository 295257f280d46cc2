import Foundation
import Lifeline
import Logging

/// Runs `scenario` (the text of a scenario file) in virtual time.
public func simulate(
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

/// A host on a virtual clock with the given plugins; the caller drives it step by step.
public func makeHost(_ descriptors: [PluginDescriptor], profile: Profile = .ios13) -> LifelineHost {
    LifelineHost(
        configuration: HostConfiguration(profile: profile), plugins: descriptors,
        executor: MainExecutor(clock: VirtualClock()))
}

/// A host on a virtual clock, driven step by step, for tests that need to look past the point
/// where `Simulation` stops (T9) or to inspect the host between steps.
public final class Harness {
    public let clock = VirtualClock()
    public let executor: MainExecutor
    public let host: LifelineHost
    public var refused: [Lifecycle.TransitionError] = []

    public init(
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
    public func at(_ seconds: Double, _ step: Step) {
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
    public func run(until seconds: Double, stopWhenStopped: Bool = true) {
        executor.run(
            until: .seconds(seconds), shouldStop: { [unowned self] in stopWhenStopped && host.isStopped },
            afterJob: host.afterJob)
    }

    public var recorder: Recorder { host.recorder }
}

// MARK: - Folders

/// Writes `files` (paths relative to a fresh temporary folder) and calls `body` with the folder's
/// path. The folder is removed afterwards, whatever happens.
public func withPluginFolder<T>(
    _ files: [String: String], binary: [String: [UInt8]] = [:], _ body: (String) throws -> T
) throws -> T {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("lifeline-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    for (path, text) in files {
        try write(Data(text.utf8), to: root.appendingPathComponent(path))
    }
    for (path, bytes) in binary {
        try write(Data(bytes), to: root.appendingPathComponent(path))
    }
    return try body(root.path)
}

private func write(_ data: Data, to url: URL) throws {
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url)
}

/// A state database in a fresh folder, removed afterwards.
public func withDatabase<T>(_ body: (StateDatabase) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(try StateDatabase.open(stateDirectory: dir))
}

// MARK: - Real time

/// Busy-waits (no sleep) for `seconds` of real time, as runaway plugin code would.
public func spin(seconds: Double) {
    let end = Monotonic.nanoseconds() + UInt64(seconds * 1e9)
    while Monotonic.nanoseconds() < end {}
}

/// Seconds of real time since `start` (Monotonic nanoseconds).
public func elapsed(since start: UInt64) -> Double { Double(Monotonic.nanoseconds() &- start) / 1e9 }
