/// Who listens to which event: the bus's table. Handlers of one event run in the order their
/// subscriptions were made.
///
/// Threading: main executor only.
final class SubscriptionTable {
    final class Subscription {
        let id: Int
        let event: LifecycleEventName
        let plugin: Int
        let handler: EventHandler
        var cancelled = false
        init(id: Int, event: LifecycleEventName, plugin: Int, handler: @escaping EventHandler) {
            self.id = id
            self.event = event
            self.plugin = plugin
            self.handler = handler
        }
    }

    /// Subscriptions by event ordinal, each list in the order the subscriptions were made.
    private var byEvent = [[Subscription]](repeating: [], count: LifecycleEventName.allCases.count)
    private var byID: [Int: Subscription] = [:]
    /// Ids are unique for the host's life, so a stale id never cancels a newer subscription.
    private var nextID = 1

    func subscribe(plugin: Int, event: LifecycleEventName, handler: @escaping EventHandler) -> Int {
        let id = nextID
        nextID += 1
        let s = Subscription(id: id, event: event, plugin: plugin, handler: handler)
        byEvent[event.ordinal].append(s)
        byID[id] = s
        return id
    }

    /// Harmless if the subscription is gone already.
    func unsubscribe(_ id: Int) {
        guard let s = byID.removeValue(forKey: id) else { return }
        s.cancelled = true
        byEvent[s.event.ordinal].removeAll { $0 === s }
    }

    /// The event's subscriptions, a snapshot: a handler that cancels a later one marks it
    /// `cancelled`, which the caller checks before each call.
    func subscriptions(to event: LifecycleEventName) -> [Subscription] { byEvent[event.ordinal] }

    /// One plugin's live subscriptions to the event.
    func subscriptions(to event: LifecycleEventName, plugin: Int) -> [Subscription] {
        byEvent[event.ordinal].filter { $0.plugin == plugin && !$0.cancelled }
    }

    /// Cancels a plugin's subscriptions (it failed to load).
    func remove(plugin: Int) {
        for list in byEvent { for s in list where s.plugin == plugin { s.cancelled = true } }
        byEvent = byEvent.map { $0.filter { !$0.cancelled } }
        byID = byID.filter { !$0.value.cancelled }
    }

    /// Forgets every subscription (the app ended).
    func removeAll() {
        byEvent = byEvent.map { _ in [] }
        byID.removeAll()
    }
}
