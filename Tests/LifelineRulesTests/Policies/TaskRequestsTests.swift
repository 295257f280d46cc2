import Testing

@testable import LifelineRules

// The pending task requests' rules as a pure value: times and conditions in, decisions out.

private let open = TaskRequests.Conditions(foreground: false, userQuit: false, networkAvailable: true, charging: true)

@Test func taskRequests_takeOneReadyAtATime_inSubmissionOrder_andSayWhenTheNextIsDue() throws {
    var requests = TaskRequests()
    _ = try requests.submit(SystemTaskRequest(identifier: "a", kind: .processing, earliestBegin: 10), plugin: "p", now: .zero)
    _ = try requests.submit(SystemTaskRequest(identifier: "b", kind: .processing, earliestBegin: 10), plugin: "p", now: .zero)
    _ = try requests.submit(SystemTaskRequest(identifier: "c", kind: .refresh, earliestBegin: 60), plugin: "p", now: .zero)
    var taken = requests.takeReady(now: .seconds(5), policy: .earliest, conditions: open)
    #expect(taken.ready == nil && !taken.more && taken.next == .seconds(10))
    taken = requests.takeReady(now: .seconds(10), policy: .earliest, conditions: open)
    #expect(taken.ready?.request.identifier == "a" && taken.more && taken.next == .seconds(60))
    taken = requests.takeReady(now: .seconds(10), policy: .earliest, conditions: open)
    #expect(taken.ready?.request.identifier == "b" && !taken.more)
    // Held by a condition: due, but not taken, and no wake-up for it.
    var unplugged = open
    unplugged.foreground = true
    taken = requests.takeReady(now: .seconds(60), policy: .earliest, conditions: unplugged)
    #expect(taken.ready == nil && taken.next == nil)
    #expect(requests.all.map(\.request.identifier) == ["c"])
}

@Test func taskRequests_replaceKeepsThePlace_andLimitsCountPerPluginAndKind() throws {
    var requests = TaskRequests()
    _ = try requests.submit(SystemTaskRequest(identifier: "r", kind: .refresh), plugin: "p", now: .zero)
    _ = try requests.submit(SystemTaskRequest(identifier: "x", kind: .processing), plugin: "p", now: .zero)
    let again = try requests.submit(SystemTaskRequest(identifier: "r", kind: .refresh, earliestBegin: 5), plugin: "p", now: .zero)
    #expect(again.replaced)
    #expect(requests.all.map(\.request.identifier) == ["r", "x"])
    #expect(throws: SystemTaskError.self) {
        try requests.submit(SystemTaskRequest(identifier: "r2", kind: .refresh), plugin: "p", now: .zero)
    }
    // Another plugin has limits of its own.
    _ = try requests.submit(SystemTaskRequest(identifier: "r2", kind: .refresh), plugin: "q", now: .zero)
    #expect(requests.cancel(plugin: "p", identifier: "r")?.request.earliestBegin == 5)
    #expect(requests.cancel(plugin: "p", identifier: "r") == nil)
}

@Test func taskRequests_policies_andForcing() throws {
    var requests = TaskRequests()
    _ = try requests.submit(SystemTaskRequest(identifier: "a", kind: .refresh, earliestBegin: 100), plugin: "p", now: .zero)
    let r = requests.all[0]
    #expect(TaskRequests.due(r, now: .zero, policy: .earliest) == .seconds(100))
    #expect(TaskRequests.due(r, now: .zero, policy: .delayed(50)) == .seconds(150))
    #expect(TaskRequests.due(r, now: .zero, policy: .manual) == nil)
    #expect(requests.force(.kind(.processing)) == 0)
    #expect(requests.force(.identifier("a")) == 1)
    // Forced: due now, but never at the instant it was submitted.
    #expect(TaskRequests.due(requests.all[0], now: .zero, policy: .manual) == .seconds(0.001))
    #expect(requests.takeReady(now: .seconds(2), policy: .manual, conditions: open).ready?.request.identifier == "a")
}
