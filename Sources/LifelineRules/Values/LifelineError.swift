/// An error that a user can act on, with the exit code the CLI gives it (SPEC 2.4, 7).
///
/// One error type for the host's domain: a private code plus a message that says what to fix.
public struct LifelineError: Error, Equatable, Sendable, CustomStringConvertible {
    private enum Code: Equatable, Sendable {
        case usage
        case badInput
        case internalError
        case unavailable
        case cannotCreate
    }

    private let code: Code
    /// What went wrong, with file:line where there is one.
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Bad command-line usage (exit 64).
    public static func usage(_ message: String) -> LifelineError { .init(.usage, message) }
    /// A scenario, a plugin or a plugin.toml that could not be read or loaded (exit 65).
    public static func badInput(_ message: String) -> LifelineError { .init(.badInput, message) }
    /// A service the command needs cannot be had: an address to listen on is taken (exit 69,
    /// sysexits' EX_UNAVAILABLE).
    public static func unavailable(_ message: String) -> LifelineError { .init(.unavailable, message) }
    /// What the command would write is already there, or cannot be made: `lifeline new` never
    /// writes over a folder (exit 73, sysexits' EX_CANTCREAT).
    public static func cannotCreate(_ message: String) -> LifelineError { .init(.cannotCreate, message) }
    /// A fault of the host itself (exit 70).
    public static func internalError(_ message: String) -> LifelineError { .init(.internalError, message) }

    /// The exit code of SPEC 2.4.
    public var exitCode: Int32 {
        switch code {
        case .usage: return 64
        case .badInput: return 65
        case .internalError: return 70
        case .unavailable: return 69
        case .cannotCreate: return 73
        }
    }

    public var description: String { message }
}

/// Why the host refused a plugin's call: to its store, its files, its transfers or a queue. The message is
/// what the plugin sees (Lua raises it as the call's error), so it says what to change.
public struct PluginCallError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A store call the host refused.
public typealias StoreError = PluginCallError
/// A transfer call the host refused.
public typealias TransferError = PluginCallError
/// A call on the plugin's files that the host refused.
public typealias FileError = PluginCallError
/// A queue the host could not give.
public typealias QueueError = PluginCallError
