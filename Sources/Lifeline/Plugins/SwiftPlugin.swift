/// A plugin written in Swift and compiled into the host (SPEC 6.5). It sees the same operations
/// as a Lua plugin, through its `PluginContext`.
///
/// ```swift
/// public final class Heartbeat: SwiftPlugin {
///     public static let name = "heartbeat"
///     public init() {}
///     public func load(_ context: PluginContext) throws {
///         context.on(.didEnterBackground) { _ in
///             let id = context.beginBackgroundTask("flush")
///             context.after(1) { context.endBackgroundTask(id) }
///         }
///     }
/// }
/// ```
public protocol SwiftPlugin: AnyObject, SendableMetatype {
    /// The plugin's name, unique among all plugins.
    static var name: String { get }
    /// A fresh instance, made at every launch of the app.
    init()
    /// Registers handlers; runs once per launch, under the launch watchdog.
    func load(_ context: PluginContext) throws
}

extension SwiftPlugin {
    /// The descriptor that lets a host load this plugin.
    public static var descriptor: PluginDescriptor {
        PluginDescriptor(name: name, kind: .swift) { SwiftPluginInstance(Self()) }
    }
}

/// Adapts a `SwiftPlugin` to the core's `PluginInstance`.
final class SwiftPluginInstance: PluginInstance {
    private var plugin: (any SwiftPlugin)?
    let name: String

    init(_ plugin: any SwiftPlugin) {
        self.plugin = plugin
        self.name = type(of: plugin).name
    }

    var kind: PluginKind { .swift }
    var preemptor: (any Preemptible)? { nil }  // Swift code cannot be stopped (W3)

    func start(_ context: PluginContext) -> CallOutcome {
        guard let plugin else { return .returned }
        return SwiftCall.outcome { try plugin.load(context) }
    }

    func resetPreemption() {}
    func close() { plugin = nil }
}

/// Turns a throwing Swift call into a `CallOutcome`.
enum SwiftCall {
    static func outcome(_ body: () throws -> Void) -> CallOutcome {
        do {
            try body()
            return .returned
        } catch {
            return .raised(message: "\(error)", traceback: "(Swift code: no traceback)")
        }
    }
}

extension PluginContext {
    /// Subscribes a Swift handler; a thrown error is recorded as a `pluginError`.
    @discardableResult
    public func on(_ event: LifecycleEventName, perform handler: @escaping (LifecycleEvent) throws -> Void) -> Int {
        subscribe(event, handler: { e in SwiftCall.outcome { try handler(e) } })
    }

    /// Begins a background task with a Swift expiration handler.
    public func beginBackgroundTask(_ name: String? = nil, expirationHandler: (() throws -> Void)? = nil) -> Int {
        beginBackgroundTask(
            name: name, expirationHandler: expirationHandler.map { h in { SwiftCall.outcome(h) } })
    }

    /// A one-shot timer running Swift code.
    @discardableResult
    public func after(_ seconds: Double, perform callback: @escaping () throws -> Void) -> Int {
        startTimer(after: seconds, callback: { SwiftCall.outcome(callback) })
    }
}
