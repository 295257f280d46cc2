/// Whether an object is still there, for what may outlive it: a plugin's function references and
/// charges, a queue's operations and jobs, the executor's gate for the session's app jobs.
///
/// They hold this, not a weak reference to the object: a weak reference gives its object a side
/// table, and then every retain of the object takes the runtime's slow path, several in each call
/// into plugin code. The object sets itself when it is made and clears it in its `deinit`;
/// nothing else does.
package final class Link<Object: AnyObject> {
    /// Read on hot paths (a timer's call, a queue's turn), from other modules too; no access calls
    /// out, so the runtime's exclusivity check is skipped. Behind a getter, because a module that
    /// reads a stored property makes that check itself.
    @exclusivity(unchecked) private unowned(unsafe) var stored: Object?

    package init() {}

    /// The object, while it is there.
    package var object: Object? { stored }

    /// Called by the object only: with itself when it is made, with nil in its `deinit`.
    package func set(_ object: Object?) { stored = object }
}
