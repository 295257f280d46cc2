import Testing

@testable import LifelineRules

/// The watchdog's decisions (W1–W4), driven with plain numbers: no thread, no clock. A token is
/// a call's number in its upper bits and its plugin's slot below; `WatchdogPolicy.firedBit` marks a call
/// the watchdog acted on.
@Suite struct WatchdogPolicyTests {
    private let a: UInt64 = 1 << 32 | 2, b: UInt64 = 2 << 32 | 4
    private let fired = WatchdogPolicy.firedBit

    private func next(_ policy: inout WatchdogPolicy, _ now: UInt64, _ running: UInt64) -> WatchdogPolicy.Action {
        policy.next(now: now, running: running)
    }

    private func open(_ policy: inout WatchdogPolicy, _ deadline: UInt64, _ sleepingUntil: UInt64?) -> Bool {
        policy.open(deadline: deadline, sleepingUntil: sleepingUntil)
    }

    @Test func w4_beforeTheDeadline_theWatchdogOnlyWaits() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.open(deadline: 500, sleepingUntil: nil)
        let r1 = next(&policy, 0, a)
        #expect(r1 == .wait(until: 500))
        let r2 = next(&policy, 499, a)
        #expect(r2 == .wait(until: 500))
    }

    @Test func w2_atTheDeadline_theCallRunningIsFiredOn_thenGivenUpOnAfterTheGrace() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.open(deadline: 500, sleepingUntil: nil)
        let r3 = next(&policy, 500, a)
        #expect(r3 == .fire(token: a))
        policy.stopping(a, now: 500)
        let r4 = next(&policy, 1499, a | fired)
        #expect(r4 == .wait(until: 1500))
        let r5 = next(&policy, 1500, a | fired)
        #expect(r5 == .giveUp(token: a))
        let r6 = next(&policy, 9999, a | fired)
        #expect(r6 == .idle, "once only")
    }

    @Test func w2_aStoppedCallThatUnwindsWithinTheGrace_isNotGivenUpOn() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.open(deadline: 500, sleepingUntil: nil)
        let r7 = next(&policy, 500, a)
        #expect(r7 == .fire(token: a))
        policy.stopping(a, now: 500)
        let r8 = next(&policy, 700, 0)
        #expect(r8 == .idle)
        let r9 = next(&policy, 5000, 0)
        #expect(r9 == .idle)
    }

    @Test func theDeadlinePassingWithNoCallRunning_firesOnTheNextCallOfTheWindow() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.open(deadline: 500, sleepingUntil: nil)
        let r10 = next(&policy, 600, 0)
        #expect(r10 == .idle)
        let r11 = next(&policy, 650, b)
        #expect(r11 == .fire(token: b), "a call of an expired window is late at once")
    }

    @Test func aNewWindow_forgetsThatTheOldOneExpired() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.open(deadline: 500, sleepingUntil: nil)
        let r12 = next(&policy, 600, 0)
        #expect(r12 == .idle)
        _ = policy.open(deadline: 5000, sleepingUntil: nil)
        let r13 = next(&policy, 700, b)
        #expect(r13 == .wait(until: 5000))
    }

    @Test func w1_windowsThatFollowOneAnother_wakeTheThreadOnlyWhenItSleepsPastTheirDeadline() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        let r14 = open(&policy, 500, nil)
        #expect(r14, "a thread asleep until woken")
        let same = open(&policy, 500, 500), later = open(&policy, 900, 500)
        #expect(!same, "the same deadline")
        #expect(!later, "a later one: the thread reads it at 500")
        let r15 = open(&policy, 400, 500)
        #expect(r15, "an earlier one")
        let r16 = next(&policy, 500, a)
        #expect(r16 == .fire(token: a), "the call running at the deadline")
    }
}
