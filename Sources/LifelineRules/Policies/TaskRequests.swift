/// The pending task requests as a pure value, as `TaskRegistry` is for background tasks: the
/// limits, the replacement of a request under the same identifier, and which request may run
/// when. It takes the time and the device's conditions, and calls nothing out; `SystemWork` does
/// what it decides.
package struct TaskRequests {
    package struct Request: Equatable {
        package var plugin: String
        package var request: SystemTaskRequest
        package var earliest: HostTime
        /// When it was submitted: it runs one clock tick later at the soonest.
        package var submitted: HostTime
        /// A `run-tasks` step picked it: it runs once its conditions hold, whatever the policy.
        package var forced = false
        /// Why it was last held back, as the report was told (`taskDeferred`); nil since it was
        /// submitted, or since it was last found ready.
        package var deferral: Deferral?

        package init(
            plugin: String, request: SystemTaskRequest, earliest: HostTime, submitted: HostTime, forced: Bool = false,
            deferral: Deferral? = nil
        ) {
            self.plugin = plugin
            self.request = request
            self.earliest = earliest
            self.submitted = submitted
            self.forced = forced
            self.deferral = deferral
        }
    }

    /// Why a request was evaluated and not started: the report's `taskDeferred` reasons.
    package enum Deferral: String, CaseIterable {
        /// Its earliestBegin has not come.
        case earliestBegin
        /// The policy holds it: `delay:` after its earliestBegin, or `manual` until a `run-tasks`.
        case taskPolicy
        /// It asked for a network, and the device has none.
        case requiresNetworkConnectivity
        /// It asked for power, and the device is not charging.
        case requiresExternalPower
        /// The app is in the foreground: the system runs its tasks only in the background.
        case appInForeground
        /// The user force-quit the app: the system launches it for nothing until the user does.
        case userForceQuit
    }

    /// A request held back for a reason other than the one the report was last told.
    package struct Deferred {
        package var request: Request
        package var reason: Deferral
        /// When the time holds it (`earliestBegin`, a `delay:` policy): when it falls due.
        package var until: HostTime?
    }

    /// What may stop a due request from starting now.
    package struct Conditions {
        package var foreground: Bool
        package var userQuit: Bool
        package var networkAvailable: Bool
        package var charging: Bool

        package init(foreground: Bool, userQuit: Bool, networkAvailable: Bool, charging: Bool) {
            self.foreground = foreground
            self.userQuit = userQuit
            self.networkAvailable = networkAvailable
            self.charging = charging
        }

        package func allow(_ r: Request) -> Bool { holdBack(r) == nil }

        /// What holds `r` back, if anything: its own requirements first, as they outlast the app's
        /// state, then the app's.
        package func holdBack(_ r: Request) -> Deferral? {
            if r.request.requiresNetwork && !networkAvailable { return .requiresNetworkConnectivity }
            if r.request.requiresPower && !charging { return .requiresExternalPower }
            if foreground { return .appInForeground }
            if userQuit { return .userForceQuit }
            return nil
        }
    }

    /// In the order they were submitted (a replaced one keeps its place).
    package private(set) var all: [Request] = []

    package init() {}

    package var isEmpty: Bool { all.isEmpty }

    /// Adds a request kept from an earlier host, in its order.
    package mutating func restore(_ r: Request) { all.append(r) }

    /// Adds `request` for `plugin` at `now`, replacing one under the same identifier; otherwise the
    /// plugin may have `SystemTaskRequest.pendingLimit` of its kind pending. Returns the entry and
    /// whether it replaced one.
    package mutating func submit(
        _ request: SystemTaskRequest, plugin: String, now: HostTime
    ) throws(SystemTaskError) -> (entry: Request, replaced: Bool) {
        guard request.earliestBegin.isFinite, request.earliestBegin >= 0,
            request.earliestBegin <= SystemTaskRequest.maximumEarliestBegin
        else {
            throw SystemTaskError("earliestBegin must be a number of seconds, from 0 to 10 years")
        }
        let existing = all.firstIndex { $0.plugin == plugin && $0.request.identifier == request.identifier }
        if existing.map({ all[$0].request.kind != request.kind }) ?? true {
            let limit = SystemTaskRequest.pendingLimit(request.kind)
            guard all.count(where: { $0.plugin == plugin && $0.request.kind == request.kind }) < limit else {
                throw SystemTaskError(
                    "too many pending \(request.kind.rawValue) requests: a plugin may have \(limit) pending at once",
                    reason: .tooManyPending)
            }
        }
        let entry = Request(
            plugin: plugin, request: request, earliest: now.adding(seconds: request.earliestBegin), submitted: now)
        if let existing { all[existing] = entry } else { all.append(entry) }
        return (entry, existing != nil)
    }

    /// Removes the plugin's request for `identifier`, if one is pending.
    package mutating func cancel(plugin: String, identifier: String) -> Request? {
        guard let i = all.firstIndex(where: { $0.plugin == plugin && $0.request.identifier == identifier }) else {
            return nil
        }
        return all.remove(at: i)
    }

    /// Makes the requests `filter` picks due now, whatever the policy; returns how many.
    package mutating func force(_ filter: TaskFilter) -> Int {
        var picked = 0
        for i in all.indices where filter.matches(kind: all[i].request.kind, identifier: all[i].request.identifier) {
            all[i].forced = true
            picked += 1
        }
        return picked
    }

    /// When a request may run at the soonest under `policy`, or nil when only `run-tasks` can
    /// start it. Never at the instant it was submitted: a handler that submits its own identifier
    /// again with no delay still moves virtual time on, as a zero-delay timer does, so `--until`
    /// ends the loop.
    package static func due(_ r: Request, now: HostTime, policy: TaskPolicy) -> HostTime? {
        let soonest = r.submitted.adding(seconds: Units.clockResolution)
        if r.forced { return max(now, soonest) }
        switch policy {
        case .earliest: return max(r.earliest, soonest)
        case .delayed(let seconds): return max(r.earliest.adding(seconds: seconds), soonest)
        case .manual: return nil
        }
    }

    /// Takes out the first request that may start at `now`, and says whether another may too and
    /// when the next one falls due. One at a time: the handler of the one taken may cancel or
    /// replace the others, and each is picked only as the requests stand after it.
    ///
    /// `deferred` lists the requests held back now for another reason than the last one given
    /// for them, in the order they were submitted: each reason is told once per request until it
    /// changes, however often the requests are evaluated. The one clock tick every request waits
    /// after its submission is no reason.
    ///
    /// `now` is one reading of the clock: on the real clock a second reading is later, and a
    /// request due "now" would then never be due.
    package mutating func takeReady(
        now: HostTime, policy: TaskPolicy, conditions: Conditions
    ) -> (ready: Request?, more: Bool, next: HostTime?, deferred: [Deferred]) {
        var ready: Int?
        var more = false
        var next: HostTime?
        var deferred: [Deferred] = []
        for i in all.indices {
            let r = all[i]
            let reason: Deferral
            var until: HostTime?
            if let due = Self.due(r, now: now, policy: policy) {
                if due > now {
                    next = next.map { min($0, due) } ?? due
                    if due == r.submitted.adding(seconds: Units.clockResolution) { continue }
                    reason = now < r.earliest ? .earliestBegin : .taskPolicy
                    until = due
                } else if let held = conditions.holdBack(r) {
                    reason = held
                } else {
                    all[i].deferral = nil
                    if ready == nil { ready = i } else { more = true }
                    continue
                }
            } else {
                reason = .taskPolicy
            }
            guard r.deferral != reason else { continue }
            all[i].deferral = reason
            deferred.append(Deferred(request: all[i], reason: reason, until: until))
        }
        return (ready.map { all.remove(at: $0) }, more, next, deferred)
    }
}
