/// Foundation's `NotificationCenter`, as a plugin sees it: `NotificationCenter.default` is the
/// center of the plugin whose code is running, one per plugin and launch, on which the host's
/// lifecycle is posted as UIKit's notifications. It shadows Foundation's class for code that
/// imports LifelineBackgroundTasks (which re-exports Foundation), for two reasons:
///
/// - Foundation's `.default` is one per process: every plugin of every host in it would hear every
///   other's notifications, and with the wrong plugin current.
/// - Foundation's observer blocks are `@Sendable`, so a block that touches the app's own objects
///   does not compile under Swift 6. Here, as everything of a plugin, observers run on the main
///   executor, so they need not be.
///
/// Read outside plugin code, `.default` is a new center that nothing posts to.
///
/// Threading: main executor only.
public final class NotificationCenter: @unchecked Sendable {
    private struct Observer {
        var id: Int
        var name: Notification.Name?
        var object: AnyObject?
        var block: (Notification) -> Void
    }
    private var observers: [Observer] = []
    private var nextID = 1

    init(detached: Bool) {}

    /// A center of one's own, that only its owner posts to.
    public convenience init() { self.init(detached: true) }

    /// The running plugin's center.
    public static var `default`: NotificationCenter {
        AppleApp.current?.notificationCenter ?? NotificationCenter(detached: true)
    }

    /// Calls `block` for each notification named `name` (every name when nil) from `object` (any
    /// object when nil). The block runs at once, inside `post`, on the main executor, whatever
    /// `queue` is: a plugin has one thread. Returns the token for `removeObserver`.
    @discardableResult
    public func addObserver(
        forName name: Notification.Name?, object obj: Any?, queue: OperationQueue?,
        using block: @escaping (Notification) -> Void
    ) -> NSObjectProtocol {
        let id = nextID
        nextID += 1
        observers.append(Observer(id: id, name: name, object: obj.map { $0 as AnyObject }, block: block))
        return ObserverToken(id: id)
    }

    /// Stops the observer `addObserver` returned.
    public func removeObserver(_ observer: Any) {
        guard let token = observer as? ObserverToken else { return }
        observers.removeAll { $0.id == token.id }
    }

    /// Stops the observer, for `name` and `object` only when given (all of its when nil): as in
    /// Foundation, an observer of another name, or of another object, stays.
    public func removeObserver(_ observer: Any, name aName: Notification.Name?, object anObject: Any?) {
        guard let token = observer as? ObserverToken else { return }
        let object = anObject.map { $0 as AnyObject }
        observers.removeAll { entry in
            guard entry.id == token.id else { return false }
            if let aName, entry.name != aName { return false }
            if let object, entry.object !== object { return false }
            return true
        }
    }

    /// Calls every observer that matches, in the order they were added.
    public func post(_ notification: Notification) {
        // Observers added or removed by a block take effect from the next post, as in Foundation.
        for observer in observers {
            if let name = observer.name, name != notification.name { continue }
            if let wanted = observer.object, let sender = notification.object.map({ $0 as AnyObject }), wanted !== sender {
                continue
            }
            if observer.object != nil, notification.object == nil { continue }
            observer.block(notification)
        }
    }

    public func post(name aName: Notification.Name, object anObject: Any?, userInfo aUserInfo: [AnyHashable: Any]? = nil) {
        post(Notification(name: aName, object: anObject, userInfo: aUserInfo))
    }
}

/// What `addObserver` returns.
final class ObserverToken: NSObject {
    let id: Int
    init(id: Int) { self.id = id }
}
