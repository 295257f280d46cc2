import Testing

@testable import Lifeline
import LifelineTesting

/// The watchdog's decisions (W1–W4), driven with plain numbers: no thread, no clock.
@Suite struct WatchdogPolicyTests {
    final class Stopper: Preemptible {
        func preempt() {}
    }

    private func lua(_ plugin: String = "p") -> WatchdogTarget {
        WatchdogTarget(plugin: plugin, handler: "didEnterBackground", limit: 5, preemptor: Stopper(), time: .zero)
    }

    private func swift(_ plugin: String = "p") -> WatchdogTarget {
        WatchdogTarget(plugin: plugin, handler: "didEnterBackground", limit: 5, preemptor: nil, time: .zero)
    }

    private func describe(_ action: WatchdogPolicy.Action) -> String {
        switch action {
        case .wait(let until): return "wait \(until.map(String.init) ?? "-")"
        case .preempt(let t): return "preempt \(t.plugin)"
        case .giveUp(let t): return "giveUp \(t.plugin)"
        }
    }

    @Test func w4_beforeTheDeadline_theWatchdogOnlyWaits() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.arm(deadline: 500, target: lua())
        let early = describe(policy.next(now: 0)), late = describe(policy.next(now: 499))
        #expect(early == "wait 500")
        #expect(late == "wait 500")
        #expect(!policy.fired)
    }

    @Test func w2_atTheDeadline_luaIsAskedToStop_thenGivenUpOnAfterTheGrace() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.arm(deadline: 500, target: lua("spinner"))
        let r1 = describe(policy.next(now: 500))
        #expect(r1 == "preempt spinner")
        let r2 = describe(policy.next(now: 1499))
        #expect(r2 == "wait 1500")
        let r3 = describe(policy.next(now: 1500))
        #expect(r3 == "giveUp spinner")
        let r4 = describe(policy.next(now: 9999))
        #expect(r4 == "wait -")
        let fired = policy.disarm()
        #expect(fired)
    }

    @Test func w3_atTheDeadline_swiftIsGivenUpOnAtOnce() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.arm(deadline: 500, target: swift("blocked"))
        let r5 = describe(policy.next(now: 600))
        #expect(r5 == "giveUp blocked")
        let r6 = describe(policy.next(now: 700))
        #expect(r6 == "wait -")
    }

    @Test func disarmBeforeTheDeadline_nothingHappensAtIt() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.arm(deadline: 500, target: lua())
        let fired = policy.disarm()
        #expect(!fired)
        let r7 = describe(policy.next(now: 500))
        #expect(r7 == "wait -")
        #expect(!policy.fired)
    }

    @Test func w1_handlersOfOneEvent_shareADeadline_andWakeTheThreadOnce() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        let first = policy.arm(deadline: 500, target: lua("a"))
        #expect(first)
        _ = policy.disarm()
        let second = policy.arm(deadline: 500, target: lua("b"))
        #expect(!second, "same deadline: no wake-up")
        let r8 = describe(policy.next(now: 500))
        #expect(r8 == "preempt b", "the plugin running at the deadline")
        let earlier = policy.arm(deadline: 400, target: lua("c"))
        #expect(earlier, "an earlier deadline wakes the thread")
    }

    @Test func rearming_forgetsThatTheWatchdogFired() {
        var policy = WatchdogPolicy(stopGrace: 1000)
        _ = policy.arm(deadline: 500, target: lua())
        _ = policy.next(now: 500)
        #expect(policy.fired)
        _ = policy.arm(deadline: 5000, target: lua())
        #expect(!policy.fired)
        let r9 = describe(policy.next(now: 4000))
        #expect(r9 == "wait 5000", "the grace of the old arming is gone")
    }
}
