import Testing

@testable import LifelineRules

/// How windows armed by their first call are told apart and stamped, with plain numbers.
@Suite struct WatchdogEpochPolicyTests {
    private let ms: UInt64 = 1_000_000

    @Test func token_namesTheWindowAndTheSlot_andTheGapBetweenCallsKeepsTheWindow() {
        let gap = WatchdogPolicy.idle(window: 41, lazy: true)
        let call = WatchdogPolicy.call(slot: 9, in: gap)
        #expect(WatchdogPolicy.window(of: call) == 41)
        #expect(WatchdogPolicy.window(of: gap) == 41)
        #expect(WatchdogPolicy.slot(of: call) == 9)
        #expect(WatchdogPolicy.isCall(call))
        #expect(!WatchdogPolicy.isCall(gap))
        #expect(call & WatchdogPolicy.firedBit == 0)
        let last = WatchdogPolicy.call(slot: WatchdogPolicy.maxSlots - 1, in: WatchdogPolicy.idle(window: WatchdogPolicy.maxWindow, lazy: true))
        #expect(WatchdogPolicy.window(of: last) == WatchdogPolicy.maxWindow)
        #expect(WatchdogPolicy.slot(of: last) == WatchdogPolicy.maxSlots - 1)
    }

    @Test func aLazyWindow_needsAStampOnce_andAWindowOpenedWithItsDeadlineNever() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        let lazy = WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 1, lazy: true))
        #expect(policy.needsStamp(lazy))
        policy.stamp(lazy, span: 10 * ms, now: 3 * ms, lastLook: 2 * ms)
        #expect(!policy.needsStamp(lazy))
        #expect(!policy.needsStamp(WatchdogPolicy.idle(window: 1, lazy: true)), "the gap after its call")
        let exact = WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 2, lazy: false))
        #expect(!policy.needsStamp(exact))
        #expect(policy.needsStamp(WatchdogPolicy.idle(window: 3, lazy: true)), "a later lazy window")
    }

    @Test func aStamp_countsTheSpanFromTheLookThatSawTheCall_neverFromBefore() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        let call = WatchdogPolicy.call(slot: 2, in: WatchdogPolicy.idle(window: 5, lazy: true))
        policy.stamp(call, span: 10 * ms, now: 3 * ms, lastLook: 2 * ms)
        let r1 = policy.next(now: 13 * ms - 1, running: call)
        #expect(r1 == .wait(until: 13 * ms))
        let r2 = policy.next(now: 13 * ms, running: call)
        #expect(r2 == .fire(token: call))
        #expect(policy.earliestDeadline == 12 * ms, "how late it fired is told from the look before")
    }

    @Test func aWindowOpenedWithItsDeadline_isItsOwnEarliest() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        let wake = policy.open(window: 7, deadline: 500, sleepingUntil: nil)
        #expect(wake)
        #expect(policy.window == 7)
        #expect(policy.earliestDeadline == 500)
    }

    @Test func parking_tellsCallersWhichWindowTheThreadWakesInTimeFor() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        #expect(policy.parkedWord == WatchdogPolicy.parkedUntilWoken, "no deadline yet")
        let call = WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 4, lazy: true))
        policy.stamp(call, span: 100, now: 0, lastLook: 0)
        #expect(policy.parkedWord == WatchdogPolicy.knows(4))
        let r1 = policy.next(now: 100, running: 0)
        #expect(r1 == .idle)
        #expect(policy.parkedWord == WatchdogPolicy.parkedUntilWoken, "expired: any call of it is late at once")
        policy.stamp(WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 5, lazy: true)), span: 100, now: 200, lastLook: 150)
        let r2 = policy.next(now: 300, running: WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 5, lazy: true)))
        #expect(r2 == .fire(token: WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 5, lazy: true))))
        policy.stopping(WatchdogPolicy.call(slot: 0, in: WatchdogPolicy.idle(window: 5, lazy: true)), now: 300)
        #expect(policy.parkedWord == WatchdogPolicy.parkedUntilWoken, "watching a stopped call")
    }

    @Test(arguments: [
        // parked, the entering call's window, whether it must wake the thread
        (0 as UInt64, 9 as UInt64, false),  // sampling: it sees the call within a period
        (WatchdogPolicy.knows(9), 9, false),  // it wakes at window 9's deadline, in time for it
        (WatchdogPolicy.knows(8), 9, true),  // a window it does not know
        (WatchdogPolicy.parkedUntilWoken, 9, true),  // asleep until woken
    ])
    func aCall_wakesTheThreadOnlyWhenItIsParkedAndDoesNotKnowItsWindow(parked: UInt64, window: UInt64, wakes: Bool) {
        let call = WatchdogPolicy.call(slot: 3, in: WatchdogPolicy.idle(window: window, lazy: true))
        #expect(WatchdogPolicy.mustWake(parked: parked, entering: call) == wakes)
    }
}
