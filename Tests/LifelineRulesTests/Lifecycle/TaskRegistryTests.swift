import Testing

@testable import LifelineRules

// SPEC 4, T1–T8, on the pure TaskRegistry: plain numbers in, decisions out.

private func t(_ seconds: Double) -> HostTime { .seconds(seconds) }

/// The id of a begin that must succeed.
private func began(_ decision: TaskRegistry.BeginDecision, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    guard case .began(let id, _) = decision else {
        Issue.record("expected a task, got \(decision)", sourceLocation: sourceLocation)
        return 0
    }
    return id
}

@Test func registry_begin_returnsIncreasingPositiveUniqueIDs() {
    var r = TaskRegistry(taskLimit: 1000)
    let ids = (0..<5).map { _ in began(r.begin(plugin: "p", name: nil)) }
    #expect(ids.allSatisfy { $0 > 0 })
    #expect(Set(ids).count == 5)
    #expect(ids == ids.sorted())
}

@Test func registry_endedIDs_areNeverReused() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "p", name: nil))
    _ = r.end(id: a)
    let b = began(r.begin(plugin: "p", name: nil))
    #expect(b != a)
    #expect(b > a)
}

@Test func registry_afterReset_idsKeepCounting() {
    var r = TaskRegistry(taskLimit: 1000)
    let first = [began(r.begin(plugin: "p", name: nil)), began(r.begin(plugin: "p", name: nil))]
    r.reset()
    #expect(r.active.isEmpty)
    #expect(r.period == nil)
    let next = began(r.begin(plugin: "p", name: nil))
    #expect(!first.contains(next))
    #expect(next > first.max()!)
}

@Test func registry_begin_keepsPluginAndNameInBeginOrder() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "a", name: "save"))
    let b = began(r.begin(plugin: "b", name: nil))
    #expect(
        r.active == [
            .init(id: a, plugin: "a", name: "save", expiring: false),
            .init(id: b, plugin: "b", name: nil, expiring: false),
        ])
}

@Test func registry_beginInForeground_costsNothingUntilBackground() {
    var r = TaskRegistry(taskLimit: 1000)
    #expect(r.begin(plugin: "p", name: nil) == .began(id: 1, expireNow: false))
    #expect(r.remaining(at: t(100)) == nil, "no budget counts in the foreground")
    let period = r.enterBackground(at: t(100), budget: 30, expirationLead: 5)
    // The budget starts at the entry into the background, not when the task began.
    #expect(period.start == t(100))
    #expect(period.expiresAt == t(125))
    #expect(period.endsAt == t(130))
    #expect(r.remaining(at: t(100)) == 30)
}

@Test func registry_enterBackground_setsExpirationAtBudgetMinusLead() {
    var r = TaskRegistry(taskLimit: 1000)
    let period = r.enterBackground(at: t(2), budget: 600, expirationLead: 5)
    #expect(period == .init(start: t(2), expiresAt: t(597), endsAt: t(602), expired: false))
    #expect(r.period == period)
}

@Test func registry_remaining_countsDownAndStopsAtZero() {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.enterBackground(at: t(10), budget: 30, expirationLead: 5)
    #expect(r.remaining(at: t(10)) == 30)
    #expect(r.remaining(at: t(22.5)) == 17.5)
    #expect(r.remaining(at: t(40)) == 0)
    #expect(r.remaining(at: t(99)) == 0)
}

@Test func registry_leaveBackground_stopsTheBudget() {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    r.leaveBackground()
    #expect(r.period == nil)
    #expect(r.remaining(at: t(5)) == nil)
}

@Test func registry_reenteringBackground_restartsTheBudgetFull() {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    r.leaveBackground()
    let second = r.enterBackground(at: t(20), budget: 30, expirationLead: 5)
    #expect(second.expiresAt == t(45))
    #expect(second.endsAt == t(50))
    #expect(r.remaining(at: t(20)) == 30)
}

@Test func registry_expire_returnsActiveTasksInBeginOrderOnce() {
    var r = TaskRegistry(taskLimit: 1000)
    let ids = (0..<3).map { _ in began(r.begin(plugin: "p", name: nil)) }
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    let due = r.expire()
    #expect(due.map(\.id) == ids)
    #expect(due.allSatisfy { $0.expiring })
    #expect(r.period?.expired == true)
    #expect(r.expire().isEmpty, "each task is signalled once")
}

@Test func registry_expire_skipsEndedTasks() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "p", name: nil))
    let b = began(r.begin(plugin: "p", name: nil))
    let c = began(r.begin(plugin: "p", name: nil))
    _ = r.end(id: b)
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    #expect(r.expire().map(\.id) == [a, c])
}

@Test func registry_beginAfterExpiration_returnsExpireNow() {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    #expect(r.begin(plugin: "p", name: nil) == .began(id: 1, expireNow: false))
    _ = r.expire()
    #expect(r.begin(plugin: "p", name: nil) == .began(id: 2, expireNow: true))
}

@Test func registry_expireLate_signalsTheLateTaskOnceAndNotAnEndedOne() {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    _ = r.expire()
    let late = began(r.begin(plugin: "p", name: "late"))
    let other = began(r.begin(plugin: "p", name: nil))
    #expect(r.expireLate(id: late)?.id == late)
    #expect(r.expireLate(id: late) == nil)
    _ = r.end(id: other)
    #expect(r.expireLate(id: other) == nil)
}

@Test func registry_reenteringBackground_resetsExpiring() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "p", name: nil))
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    _ = r.expire()
    r.leaveBackground()
    #expect(r.active.map(\.expiring) == [false])
    _ = r.enterBackground(at: t(40), budget: 30, expirationLead: 5)
    #expect(r.begin(plugin: "p", name: nil) == .began(id: a + 1, expireNow: false))
    #expect(r.expire().map(\.id) == [a, a + 1])
}

@Test func registry_end_reportsWhetherTheTaskHadExpired() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "p", name: "a"))
    let b = began(r.begin(plugin: "p", name: "b"))
    #expect(r.end(id: a) == .ended(.init(id: a, plugin: "p", name: "a", expiring: false), expired: false))
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    _ = r.expire()
    #expect(r.end(id: b) == .ended(.init(id: b, plugin: "p", name: "b", expiring: true), expired: true))
    #expect(r.active.isEmpty)
}

@Test(arguments: [0, -1, 7, 999])
func registry_endUnknownID_isUnknown(_ id: Int) {
    var r = TaskRegistry(taskLimit: 1000)
    _ = r.begin(plugin: "p", name: nil)
    #expect(r.end(id: id) == .unknown)
    #expect(r.active.count == 1)
}

@Test func registry_endTwice_secondIsUnknown() {
    var r = TaskRegistry(taskLimit: 1000)
    let a = began(r.begin(plugin: "p", name: nil))
    _ = r.end(id: a)
    #expect(r.end(id: a) == .unknown)
}

@Test(arguments: [1, 3, 1000])
func registry_beyondTaskLimit_limitExceeded(_ limit: Int) {
    var r = TaskRegistry(taskLimit: limit)
    for _ in 0..<limit { _ = began(r.begin(plugin: "p", name: nil)) }
    #expect(r.begin(plugin: "p", name: nil) == .limitExceeded(limit: limit))
    #expect(r.active.count == limit)
}

@Test func registry_taskLimit_countsActiveTasksOnly() {
    var r = TaskRegistry(taskLimit: 3)
    let ids = (0..<3).map { _ in began(r.begin(plugin: "p", name: nil)) }
    _ = r.end(id: ids[1])
    guard case .began = r.begin(plugin: "p", name: nil) else {
        Issue.record("a task ended, so there is room for one more")
        return
    }
    #expect(r.active.count == 3)
}

@Test func registry_endingInAnyOrder_keepsTheRestInBeginOrder() {
    var r = TaskRegistry(taskLimit: 1000)
    let ids = (0..<600).map { i in began(r.begin(plugin: "p\(i)", name: nil)) }
    // End every third from the back, then the first half from the front: holes and compactions.
    var ended = Set<Int>()
    for i in stride(from: ids.count - 1, through: 0, by: -3) {
        guard case .ended(let task, _) = r.end(id: ids[i]) else { Issue.record("task \(ids[i]) not ended"); return }
        #expect(task.id == ids[i])
        ended.insert(ids[i])
    }
    for id in ids.prefix(300) where !ended.contains(id) {
        #expect(r.end(id: id) != .unknown)
        ended.insert(id)
    }
    let left = ids.filter { !ended.contains($0) }
    #expect(r.active.map(\.id) == left)
    #expect(r.activeCount == left.count)
    #expect(left.allSatisfy { r.isActive($0) })
    #expect(ended.allSatisfy { !r.isActive($0) && r.end(id: $0) == .unknown })
    // The expiration moment signals what is left, in begin order.
    _ = r.enterBackground(at: t(0), budget: 30, expirationLead: 5)
    #expect(r.expire().map(\.id) == left)
    #expect(r.anyExpiring)
}

@Test(arguments: [1, 2, 3, 4])
func registry_beginsAndEndsInterleaved_matchAPlainList(seed: UInt64) {
    // Ending the newest drops it and the holes before it at once; ending another leaves a hole
    // until a compaction. Whatever the mix, the registry must agree with a plain list.
    var state = seed
    func next(_ n: Int) -> Int {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(n))
    }
    var r = TaskRegistry(taskLimit: 1000)
    var model: [Int] = []
    var ended: [Int] = []
    for _ in 0..<5000 {
        switch next(10) {
        case 0..<4:
            model.append(began(r.begin(plugin: "p", name: nil)))
        case 4..<6 where !model.isEmpty:
            let id = model.removeLast()  // the newest
            #expect(r.end(id: id) != .unknown)
            ended.append(id)
        case 6..<9 where !model.isEmpty:
            let id = model.remove(at: next(model.count))
            #expect(r.end(id: id) != .unknown)
            ended.append(id)
        default:
            if let id = ended.last { #expect(r.end(id: id) == .unknown, "ended twice") }
        }
        #expect(r.activeCount == model.count)
    }
    #expect(r.active.map(\.id) == model)
    #expect(model.allSatisfy { r.isActive($0) })
    #expect(ended.allSatisfy { !r.isActive($0) })
}
