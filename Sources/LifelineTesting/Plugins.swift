import Foundation
import Lifeline

// Plugins whose behaviour is a closure, for tests that drive the core without Lua. Every test
// builds its own plugins and state: tests run in parallel, so nothing here is a shared mutable
// global.

/// A value shared between a test and the code it drives. Locked, because the watchdog calls back
/// on its own thread.
public final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    public init(_ value: Value) { stored = value }

    public var value: Value {
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
    public func mutate<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&stored)
    }
}

extension Shared where Value: RangeReplaceableCollection {
    public func append(_ element: Value.Element) { mutate { $0.append(element) } }
}

/// Lets a closure that only ever runs on the test's thread (the main executor) into a `@Sendable`
/// plugin descriptor.
public struct Unchecked<T>: @unchecked Sendable {
    public let value: T
    public init(value: T) { self.value = value }
}

/// A plugin instance whose behaviour is a closure: `start` is whatever the test passes.
public final class ClosurePlugin: PluginInstance {
    public let name: String
    public let kind: PluginKind
    public let preemptor: (any Preemptible)?
    private let body: (PluginContext) -> CallOutcome
    private let onClose: () -> Void

    public init(
        name: String, kind: PluginKind, preemptor: (any Preemptible)?,
        start: @escaping (PluginContext) -> CallOutcome, onClose: @escaping () -> Void
    ) {
        self.name = name
        self.kind = kind
        self.preemptor = preemptor
        self.body = start
        self.onClose = onClose
    }

    public func start(_ context: PluginContext) -> CallOutcome { body(context) }
    public func resetPreemption() {}
    public func close() { onClose() }
}

/// A plugin whose start runs `start` and reports its outcome as is (the bridge's form).
public func rawPlugin(
    _ name: String, kind: PluginKind = .swift, preemptor: (any Preemptible)? = nil,
    onClose: @escaping () -> Void = {}, start: @escaping (PluginContext) -> CallOutcome
) -> PluginDescriptor {
    let start = Unchecked(value: start)
    let onClose = Unchecked(value: onClose)
    return PluginDescriptor(name: name, kind: kind) {
        ClosurePlugin(name: name, kind: kind, preemptor: preemptor, start: start.value, onClose: onClose.value)
    }
}

/// A Swift plugin whose load is `setup`; a thrown error is a load failure, reported as a Swift
/// plugin's is (`SwiftPlugin`'s load: the error's text, and no traceback).
public func swiftPlugin(_ name: String, _ setup: @escaping (PluginContext) throws -> Void) -> PluginDescriptor {
    rawPlugin(name) { context in
        do {
            try setup(context)
            return .returned
        } catch {
            return .raised(message: "\(error)", traceback: "(Swift code: no traceback)")
        }
    }
}

/// A test failure thrown from plugin code.
public struct PluginFailure: Error, CustomStringConvertible {
    public var text: String
    public var description: String { text }
    public init(text: String) { self.text = text }
}

/// The ios13 profile with some figures changed.
public func profile(_ base: Profile = .ios13, _ edit: (inout Profile) -> Void) -> Profile {
    var p = base
    edit(&p)
    return p
}

/// A profile with every watchdog limit as in ios13 except the ones given.
public func profile(
    launch: Double? = nil, background: Double? = nil, transition: Double? = nil, expiration: Double? = nil
) -> Profile {
    profile { p in
        if let launch { p.launchLimit = launch }
        if let background { p.backgroundLimit = background }
        if let transition { p.transitionLimit = transition }
        if let expiration { p.expirationHandlerLimit = expiration }
    }
}
