/// What plugin code runs, as the watchdog's events and error messages name it: an event name,
/// "timer", "background task 12", "operation 'upload'".
///
/// A window is opened for every task slice and every operation, and its name is read only when
/// something goes wrong (the watchdog fires, the code raises) or calls are noted for the pictures.
/// So a name made of a kind and a number or a name is kept as its parts, and written out only when
/// read: making the text each time cost more than the rest of a slice's window.
public struct HandlerName: Sendable, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
    // Inlinable where a name is made, on every window: the core makes them across the module
    // boundary.
    @usableFromInline enum Form: Sendable, Equatable {
        case text(String)
        /// "background task 12"
        case numbered(String, Int)
        /// "background task 'upload'"
        case named(String, String)
    }

    @usableFromInline let form: Form

    @inlinable public init(_ text: String) { form = .text(text) }
    @inlinable public init(stringLiteral text: String) { form = .text(text) }

    /// `kind number`: "operation 3".
    @inlinable public static func numbered(_ kind: String, _ number: Int) -> HandlerName { HandlerName(form: .numbered(kind, number)) }
    /// `kind 'name'`: "operation 'upload'".
    @inlinable public static func named(_ kind: String, _ name: String) -> HandlerName { HandlerName(form: .named(kind, name)) }

    @inlinable init(form: Form) { self.form = form }

    public var description: String {
        switch form {
        case .text(let text): return text
        case .numbered(let kind, let number): return "\(kind) \(number)"
        case .named(let kind, let name): return "\(kind) '\(name)'"
        }
    }
}
