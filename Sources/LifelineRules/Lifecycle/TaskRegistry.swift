/// The background-task rules T1–T8 (SPEC 4) as a pure value: it takes the time and returns what
/// to do. The host carries out its decisions; tests drive it with plain numbers.
public struct TaskRegistry: Sendable {
    /// One active background task.
    public struct Task: Equatable, Sendable {
        public var id: Int
        /// The owning plugin's name.
        public var plugin: String
        public var name: String?
        /// Whether `taskExpiring` was signalled for it in this background period.
        public var expiring: Bool

        @inlinable public init(id: Int, plugin: String, name: String?, expiring: Bool) {
            self.id = id
            self.plugin = plugin
            self.name = name
            self.expiring = expiring
        }
    }

    /// The budget of one stay in the background (T2).
    public struct BackgroundPeriod: Equatable, Sendable {
        /// When the app entered the background.
        public var start: HostTime
        /// When the expiration handlers are called: budget - expirationLead (T3).
        public var expiresAt: HostTime
        /// When the budget is gone (T5).
        public var endsAt: HostTime
        /// Whether the expiration moment has passed.
        public var expired: Bool
    }

    /// What `begin` decided.
    public enum BeginDecision: Equatable, Sendable {
        /// The task is active; when `expireNow`, the expiration moment has passed, so its handler
        /// must be called on the next turn of the executor (T3).
        case began(id: Int, expireNow: Bool)
        /// More than `taskLimit` tasks would be active (T8): terminate the app.
        case limitExceeded(limit: Int)
    }

    /// What `end` decided.
    public enum EndDecision: Equatable, Sendable {
        /// The task ended; `expired` if its expiration had been signalled.
        case ended(Task, expired: Bool)
        /// No such active task (T6): harmless, warn.
        case unknown
    }

    // Inlinable where every task's begin and end passes, as the core calls them across the
    // module boundary; the rest is called a few times a run.
    @usableFromInline let taskLimit: Int
    /// The next id. Ids are unique for the host's life and never reused (T1).
    @usableFromInline var nextID = 1
    /// The active tasks, by id: the order they began.
    @usableFromInline var slots = IDSlots<Task>()
    /// How many tasks are active.
    @inlinable public var activeCount: Int { slots.count }
    /// Active tasks in the order they began.
    public var active: [Task] { slots.values }
    /// The current stay in the background, if the app is in the background.
    public private(set) var period: BackgroundPeriod?

    public init(taskLimit: Int) { self.taskLimit = taskLimit }

    /// T1, T3, T8: begins a task.
    @inlinable public mutating func begin(plugin: String, name: String?) -> BeginDecision {
        if activeCount >= taskLimit { return .limitExceeded(limit: taskLimit) }
        let id = nextID
        nextID += 1
        let expireNow = period?.expired ?? false
        slots.append(id, Task(id: id, plugin: plugin, name: name, expiring: false))
        return .began(id: id, expireNow: expireNow)
    }

    /// T6: ends a task, or says it is unknown.
    @inlinable public mutating func end(id: Int) -> EndDecision {
        guard let task = slots.remove(id) else { return .unknown }
        return .ended(task, expired: task.expiring)
    }

    /// Whether task `id` is active.
    @inlinable public func isActive(_ id: Int) -> Bool { slots.contains(id) }

    /// The active task `id`, or nil.
    @inlinable public func task(id: Int) -> Task? { slots.value(id) }

    /// Whether an active task has had its expiration signalled.
    public var anyExpiring: Bool { slots.contains { $0.expiring } }

    /// T2: the app entered the background at `now`; the budget starts again, full.
    public mutating func enterBackground(at now: HostTime, budget: Double, expirationLead: Double) -> BackgroundPeriod {
        let p = BackgroundPeriod(
            start: now, expiresAt: now.adding(seconds: max(0, budget - expirationLead)),
            endsAt: now.adding(seconds: budget), expired: false)
        period = p
        clearExpiring()
        return p
    }

    /// The app left the background: the budget stops counting.
    public mutating func leaveBackground() {
        period = nil
        clearExpiring()
    }

    private mutating func clearExpiring() {
        slots.updateAll { $0.expiring = false }
    }

    /// T2: seconds of budget left at `now`; nil in the foreground (read as infinite).
    public func remaining(at now: HostTime) -> Double? {
        guard let p = period else { return nil }
        return max(0, Double(p.endsAt.nanoseconds - now.nanoseconds) / 1e9)
    }

    /// T3: the expiration moment came. Returns the active tasks whose handlers to call, in the
    /// order they began, and marks them expiring.
    public mutating func expire() -> [Task] {
        period?.expired = true
        var due: [Task] = []
        slots.updateAll { task in
            guard !task.expiring else { return }
            task.expiring = true
            due.append(task)
        }
        return due
    }

    /// T3: a task begun after the expiration moment is signalled on its own. Returns it, or nil
    /// if it ended meanwhile.
    public mutating func expireLate(id: Int) -> Task? {
        slots.update(id) { task -> Task? in
            guard !task.expiring else { return nil }
            task.expiring = true
            return task
        } ?? nil
    }

    /// The app ended: its tasks are gone. Ids keep counting (T1).
    public mutating func reset() {
        slots.removeAll()
        period = nil
    }
}
