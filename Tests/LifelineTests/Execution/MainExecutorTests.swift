import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The main executor on a virtual clock: jobs by time, then by scheduling order.

private func t(_ seconds: Double) -> HostTime { .seconds(seconds) }

/// An executor on a fresh virtual clock, and a log of what ran when.
private final class Fixture {
    let clock = VirtualClock()
    lazy var executor = MainExecutor(clock: clock)
    var log: [String] = []

    @discardableResult
    func job(_ name: String, at seconds: Double, owner: MainExecutor.Owner = .host) -> MainExecutor.JobID {
        executor.schedule(at: t(seconds), owner: owner) { [unowned self] in
            log.append("\(name)@\(ReportNumber.seconds(executor.now))")
        }
    }

    func run(until seconds: Double? = nil) {
        executor.run(until: seconds.map(t), shouldStop: { false })
    }
}

@Test func executor_runsJobsByTimeThenSchedulingOrder() {
    let f = Fixture()
    f.job("c", at: 2)
    f.job("a1", at: 1)
    f.job("a2", at: 1)
    f.job("z", at: 0)
    f.job("a3", at: 1)
    f.run()
    #expect(f.log == ["z@0", "a1@1", "a2@1", "a3@1", "c@2"])
}

@Test func executor_manyJobsAtOneTime_keepSchedulingOrder() {
    let f = Fixture()
    for i in 0..<50 { f.job("\(i)", at: Double(i % 3)) }
    f.run()
    let expected = [0, 1, 2].flatMap { r in (0..<50).filter { $0 % 3 == r }.map { "\($0)@\(r)" } }
    #expect(f.log == expected)
}

@Test func executor_virtualClock_jumpsToEachJobsTime() {
    let f = Fixture()
    f.job("late", at: 600)
    f.run()
    #expect(f.log == ["late@600"])
    #expect(f.clock.now == t(600))
}

@Test func executor_jobScheduledInThePast_runsNextWithoutMovingTheClockBack() {
    let f = Fixture()
    f.executor.schedule(at: t(5)) { [unowned f] in
        f.log.append("first@\(ReportNumber.seconds(f.executor.now))")
        f.job("past", at: 1)
    }
    f.job("later", at: 5)
    f.run()
    // By time first: the job dated 1 s comes before the one dated 5 s, but runs at 5 s.
    #expect(f.log == ["first@5", "past@5", "later@5"])
    #expect(f.clock.now == t(5))
}

@Test func executor_jobScheduledByAJobAtTheSameTime_runsAfterTheOnesAlreadyQueued() {
    let f = Fixture()
    f.executor.schedule(at: t(1)) { [unowned f] in
        f.log.append("a@1")
        f.job("nested", at: 1)
    }
    f.job("b", at: 1)
    f.run()
    #expect(f.log == ["a@1", "b@1", "nested@1"])
}

@Test func executor_cancelledJob_neverRuns() {
    let f = Fixture()
    f.job("a", at: 1)
    let b = f.job("b", at: 2)
    f.job("c", at: 3)
    f.executor.cancel(b)
    f.run()
    #expect(f.log == ["a@1", "c@3"])
}

@Test func executor_cancelAfterRunning_isHarmless() {
    let f = Fixture()
    let a = f.job("a", at: 1)
    f.run()
    f.executor.cancel(a)
    f.job("b", at: 2)
    f.run()
    #expect(f.log == ["a@1", "b@2"])
}

@Test func executor_jobCancelledByAnEarlierJob_neverRuns() {
    let f = Fixture()
    var victim: MainExecutor.JobID?
    f.executor.schedule(at: t(1)) { [unowned f] in
        f.log.append("canceller")
        f.executor.cancel(victim!)
    }
    victim = f.job("victim", at: 2)
    f.run()
    #expect(f.log == ["canceller"])
}

@Test func executor_heldAppJobs_runWhenReleasedInTheirOrder() {
    let f = Fixture()
    var policy = MainExecutor.AppJobPolicy.hold
    f.executor.appJobsAllowed = { _ in policy }
    f.job("app1", at: 1, owner: .app(generation: 1))
    f.job("app2", at: 2, owner: .app(generation: 1))
    f.job("host", at: 3)
    f.job("app3", at: 2, owner: .app(generation: 1))
    f.run()
    #expect(f.log == ["host@3"], "app jobs are held, host jobs run")
    #expect(!f.executor.hasPendingJobs, "held jobs do not count as pending")

    f.clock.advance(to: t(10))
    policy = .run
    f.executor.releaseHeld()
    f.run()
    #expect(f.log == ["host@3", "app1@10", "app2@10", "app3@10"])
}

@Test func executor_heldJobs_areReleasedInTheOrderTheyFellDue() {
    let f = Fixture()
    var policy = MainExecutor.AppJobPolicy.hold
    f.executor.appJobsAllowed = { _ in policy }
    // Scheduled in the opposite order to their times.
    f.job("due3", at: 3, owner: .app(generation: 1))
    f.job("due2", at: 2, owner: .app(generation: 1))
    f.job("due1", at: 1, owner: .app(generation: 1))
    f.job("wake", at: 10)
    f.run(until: 10)
    policy = .run
    f.executor.releaseHeld()
    f.run()
    #expect(f.log == ["wake@10", "due1@10", "due2@10", "due3@10"])
}

@Test func executor_releasedJobs_runAtTheReleaseTime() {
    let f = Fixture()
    var policy = MainExecutor.AppJobPolicy.hold
    f.executor.appJobsAllowed = { _ in policy }
    f.job("early", at: 1, owner: .app(generation: 1))
    f.job("switch", at: 2)
    f.run(until: 2)
    policy = .run
    f.executor.releaseHeld()
    f.job("future", at: 8, owner: .app(generation: 1))
    f.run()
    #expect(f.log == ["switch@2", "early@2", "future@8"])
}

@Test func executor_appJobsOfAnOldGeneration_areDropped() {
    let f = Fixture()
    f.executor.appJobsAllowed = { generation in generation == 2 ? .run : .drop }
    f.job("old", at: 1, owner: .app(generation: 1))
    f.job("new", at: 2, owner: .app(generation: 2))
    f.run()
    #expect(f.log == ["new@2"])
    // Dropped for good: a later release does not bring it back.
    f.executor.releaseHeld()
    f.run()
    #expect(f.log == ["new@2"])
}

@Test func executor_runUntil_stopsAtTheLimit() {
    let f = Fixture()
    f.job("a", at: 1)
    f.job("b", at: 5)
    f.job("c", at: 10)
    f.run(until: 5)
    #expect(f.log == ["a@1", "b@5"])
    #expect(f.executor.hasPendingJobs)
    #expect(f.clock.now <= t(5))
    f.run(until: 20)
    #expect(f.log == ["a@1", "b@5", "c@10"])
}

@Test func executor_runUntil_withNothingQueued_returns() {
    let f = Fixture()
    f.run(until: 5)
    #expect(f.log.isEmpty)
    #expect(!f.executor.hasPendingJobs)
}

@Test func executor_shouldStop_isCheckedBeforeEveryJob() {
    let f = Fixture()
    for i in 1...5 { f.job("\(i)", at: Double(i)) }
    f.executor.run(until: nil, shouldStop: { [unowned f] in f.log.count == 2 })
    #expect(f.log == ["1@1", "2@2"])
}

@Test func executor_afterJob_runsAfterEveryJob() {
    let f = Fixture()
    f.job("a", at: 1)
    f.job("b", at: 1)
    f.executor.run(until: nil, shouldStop: { false }, afterJob: { [unowned f] in f.log.append("after") })
    #expect(f.log == ["a@1", "after", "b@1", "after"])
}

@Test func executor_jobsScheduledWhileRunning_keepTheOrderOfTimeThenScheduling() {
    // Work for the next turn goes to a fast lane; a job due earlier than the lane's last still
    // runs first, and the lane and the heap merge in (time, scheduling) order.
    let f = Fixture()
    f.job("x", at: 1)
    f.executor.schedule(at: t(1)) { [unowned f] in
        f.log.append("a")
        f.job("b", at: 1)  // now: after x, which was scheduled first
        f.job("c", at: 0.5)  // in the past: before everything due at 1
        f.job("d", at: 1)
        f.job("e", at: 2)
    }
    f.job("y", at: 1)
    f.run()
    #expect(f.log == ["x@1", "a", "c@1", "y@1", "b@1", "d@1", "e@2"])
}

@Test func executor_manyJobsForTheNextTurn_runInOrder_andCancelledOnesNever() {
    let f = Fixture()
    var ids: [MainExecutor.JobID] = []
    f.executor.schedule(at: t(0)) { [unowned f] in
        for i in 0..<3000 { ids.append(f.job("\(i)", at: 0)) }
        for i in stride(from: 1, to: 3000, by: 2) { f.executor.cancel(ids[i]) }
    }
    f.run()
    #expect(f.log == stride(from: 0, to: 3000, by: 2).map { "\($0)@0" })
    #expect(!f.executor.hasPendingJobs)
}

// The live clock polls its inbox for a moment before it sleeps. Work posted during the poll, and
// work posted once it sleeps, must both be handed over, each exactly once and in order.
@Test func monotonicClock_workPostedBeforeOrAfterTheWaitSleeps_isHandedOverOnceInOrder() {
    let clock = MonotonicClock()
    let counter = Locked(0)
    for delay: UInt32 in [0, 20, 5_000] {  // µs: during the poll, and well after it
        let thread = Thread {
            usleep(delay)
            for _ in 0..<3 { clock.post { counter.withLock { $0 += 1 } } }
        }
        thread.start()
        var got = 0
        while got < 3 {
            guard let work = clock.wait(until: nil) else { break }
            for w in work { w() }
            got += work.count
        }
        #expect(got == 3, "after \(delay) µs")
    }
    #expect(counter.withLock { $0 } == 9)
    // A deadline sooner than the poll still ends the wait with nothing.
    let deadline = clock.now.adding(seconds: 0.00001)
    #expect(clock.wait(until: deadline)?.isEmpty == true)
}

@Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
func executor_randomSchedules_runInTimeThenSchedulingOrder_acrossLanesAndHeap(seed: UInt64) {
    // Jobs scheduled up front (as a scenario's steps are) and from inside jobs, some a fixed delay
    // after the one running (as timers are), some at times drawn at random, some cancelled: each
    // runs exactly in (time, scheduling) order, whichever of the executor's queues held it.
    var rng = SplitMix64(seed: seed)
    let f = Fixture()
    var scheduled: [(time: Double, seq: Int, cancelled: Bool)] = []
    var ids: [MainExecutor.JobID] = []
    var ran: [Int] = []
    func add(at time: Double) {
        let seq = scheduled.count
        scheduled.append((time, seq, false))
        ids.append(f.executor.schedule(at: t(time)) { [unowned f] in
            ran.append(seq)
            let now = f.executor.now.seconds
            guard scheduled.count < 3_000 else { return }
            for _ in 0..<Int(1 + rng.next() % 3) {
                switch rng.next() % 4 {
                case 0: add(at: now + 1)
                case 1: add(at: now)
                case 2: add(at: now + Double(rng.next() % 50))
                default:
                    let victim = Int(rng.next() % UInt64(scheduled.count))
                    if !ran.contains(victim) { scheduled[victim].cancelled = true }
                    f.executor.cancel(ids[victim])
                }
            }
        })
    }
    for step in 0..<40 { add(at: Double(step * 10)) }
    f.run()
    // The reference: a job runs when its time comes; of jobs at one time, the one scheduled first.
    // Jobs that ran are exactly those not cancelled before they ran, and their order is sorted.
    let expected = ran.sorted { a, b in
        scheduled[a].time != scheduled[b].time ? scheduled[a].time < scheduled[b].time : a < b
    }
    #expect(ran == expected)
    #expect(Set(ran) == Set(scheduled.filter { !$0.cancelled }.map(\.seq)))
    #expect(ran.count > 500)
}
