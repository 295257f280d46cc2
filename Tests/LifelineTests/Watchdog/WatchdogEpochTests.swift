import Foundation
import Synchronization
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// Windows armed by their first call (`Watchdog.open(span:)`): the thread stamps a window's
// deadline when it first sees the call, or the call stamps it when it finds the thread parked.
// On a clock moved by hand with a sampling period, each move is one look of the thread, so every
// stamp falls at a known instant and nothing here sleeps.

private let ms: UInt64 = 1_000_000

/// Records the clock's time at each preempt() call.
private final class StampPreemptor: Preemptible {
    let clock: any WatchdogClock
    let calls = Shared<[UInt64]>([])
    init(_ clock: any WatchdogClock) { self.clock = clock }
    func preempt() { calls.append(clock.nanoseconds()) }
    var count: Int { calls.value.count }
}

@Suite struct WatchdogEpochTests {
    @Test func epoch_aCallThatFindsTheThreadParked_stampsItsWindowExactly() {
        let clock = ManualWatchdogClock(samplingPeriod: 1 * ms)
        let preemptor = StampPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
        clock.advance(to: 5 * ms)
        #expect(clock.watchdogWaits(until: nil), "nothing to guard: parked until woken")
        dog.open(span: 20 * ms, handler: "timer", limit: 0.02, time: .zero)
        dog.enter(slot)
        clock.advance(to: 25 * ms - 1)
        #expect(preemptor.count == 0, "not before the span has passed since the call")
        clock.advance(to: 25 * ms)
        #expect(preemptor.calls.value == [25 * ms], "once, at the span after the call")
        #expect(dog.leave())
    }

    @Test(arguments: [1, 2, 3, 7, 10, 50, 999, 5000] as [UInt64])
    func epoch_deadlines_fallAtTheSpanToTheNanosecond_atMillisecondSpans(milliseconds: UInt64) {
        let clock = ManualWatchdogClock(start: 3 * ms, samplingPeriod: 1 * ms)
        let preemptor = StampPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
        let start = clock.nanoseconds()
        dog.open(span: milliseconds * ms, handler: "timer", limit: Double(milliseconds) / 1000, time: .zero)
        dog.enter(slot)
        // Whether the call stamped its window or the thread did, it saw the call at `start`.
        clock.settle()
        clock.advance(to: start + milliseconds * ms - 1)
        #expect(preemptor.count == 0, "1 ns before the deadline")
        clock.advance(to: start + milliseconds * ms)
        #expect(preemptor.calls.value == [start + milliseconds * ms])
        #expect(dog.leave())
    }

    /// Leaves the thread sampling at the clock's time: it last saw a call leave, so calls come and go.
    private func sampling(_ dog: Watchdog, _ clock: ManualWatchdogClock, slot: Int) {
        dog.open(span: 60_000 * ms, handler: "warm-up", limit: 60, time: .zero)
        dog.enter(slot)
        clock.settle()
        _ = dog.leave()
        clock.settle()
    }

    @Test func epoch_aSamplingThread_stampsAWindowAtItsFirstLook_lateByUpToAPeriod_neverEarly() {
        let clock = ManualWatchdogClock(samplingPeriod: 1 * ms)
        let first = StampPreemptor(clock), second = StampPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let a = dog.register(WatchdogSubject(plugin: "a", preemptor: first))
        let b = dog.register(WatchdogSubject(plugin: "b", preemptor: second))
        sampling(dog, clock, slot: a)
        #expect(clock.watchdogWaits(until: 1 * ms), "it looks again within a period")
        // Entered at 0 with the thread asleep until its next look: no clock read, no wake-up.
        dog.open(span: 10 * ms, handler: "operation 1", limit: 0.01, time: .zero)
        dog.enter(b)
        clock.advance(to: 1 * ms)  // the look that sees it
        clock.advance(to: 10 * ms)
        #expect(second.count == 0, "the stamp is late, never early: the call keeps its whole limit")
        clock.advance(to: 11 * ms - 1)
        #expect(second.count == 0)
        clock.advance(to: 11 * ms)
        #expect(second.calls.value == [11 * ms], "a period late at most")
        #expect(first.count == 0)
        #expect(dog.leave())
    }

    @Test func epoch_theStop_reachesTheCallRunningPastItsWindow_notOneThatLeft() {
        let clock = ManualWatchdogClock(samplingPeriod: 1 * ms)
        let first = StampPreemptor(clock), second = StampPreemptor(clock)
        let gaveUp = Shared(0)
        let dog = Watchdog(clock: clock) { _ in gaveUp.mutate { $0 += 1 } }
        defer { dog.shutdown() }
        let a = dog.register(WatchdogSubject(plugin: "a", preemptor: first))
        let b = dog.register(WatchdogSubject(plugin: "b", preemptor: second))
        // a's window: 5 ms; it returns after 4.
        dog.open(span: 5 * ms, handler: "timer", limit: 0.005, time: .zero)
        dog.enter(a)
        clock.settle()
        clock.advance(to: 4 * ms)
        #expect(!dog.leave())
        // b's window, opened at 4 ms: 3 ms; b runs past it while a's old deadline passes.
        dog.open(span: 3 * ms, handler: "timer", limit: 0.003, time: .zero)
        dog.enter(b)
        clock.settle()
        clock.advance(to: 5 * ms)
        #expect(first.count == 0 && second.count == 0, "a's deadline is no longer anyone's")
        clock.advance(to: 7 * ms)
        #expect(second.calls.value == [7 * ms])
        #expect(first.count == 0, "a had left")
        #expect(dog.leave())
        #expect(gaveUp.value == 0)
    }

    @Test func epoch_aCallOfAWindowPastItsDeadline_isStoppedAtOnce() {
        // The handlers of one event share its window (W1): the second, entering after the
        // deadline passed with no call running, is late from its first instruction.
        let clock = ManualWatchdogClock(samplingPeriod: 1 * ms)
        let first = StampPreemptor(clock), second = StampPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let a = dog.register(WatchdogSubject(plugin: "a", preemptor: first))
        let b = dog.register(WatchdogSubject(plugin: "b", preemptor: second))
        dog.open(span: 10 * ms, handler: "didEnterBackground", limit: 0.01, time: .zero)
        dog.enter(a)
        clock.settle()
        clock.advance(to: 6 * ms)
        #expect(!dog.leave())
        clock.advance(to: 12 * ms)
        clock.advance(to: 13 * ms)
        #expect(clock.watchdogWaits(until: nil), "expired with no call running: parked until a call comes")
        dog.enter(b)
        clock.settle()
        #expect(second.calls.value == [13 * ms])
        #expect(first.count == 0)
        #expect(dog.leave())
    }

    @Test func epoch_windowsThatComeAndGo_keepTheThreadSampling_andAQuietPeriodParksIt() {
        let clock = ManualWatchdogClock(samplingPeriod: 1 * ms)
        let preemptor = StampPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
        sampling(dog, clock, slot: slot)
        for i in 1...50 {
            // Many windows between two looks: none wakes the thread.
            for _ in 0..<20 {
                dog.open(span: 10 * ms, handler: "operation", limit: 0.01, time: .zero)
                dog.enter(slot)
                #expect(!dog.leave())
            }
            clock.advance(to: UInt64(i) * ms)
            #expect(clock.watchdogWaits(until: UInt64(i + 1) * ms), "still sampling at look \(i)")
        }
        clock.advance(to: 51 * ms)
        #expect(clock.watchdogWaits(until: 60 * ms), "a quiet period: parked until the last window's deadline")
        clock.advance(to: 60 * ms)
        #expect(clock.watchdogWaits(until: nil), "then until a call comes")
        #expect(preemptor.count == 0)
    }

    @Test func epoch_stress_3000CallsWithRandomDeadlines_loseNoStopAndMakeNoneUp() {
        let period = 1 * ms
        let clock = ManualWatchdogClock(samplingPeriod: period)
        let gaveUp = Shared(0)
        let dog = Watchdog(clock: clock) { _ in gaveUp.mutate { $0 += 1 } }
        defer { dog.shutdown() }
        let preemptors = (0..<7).map { _ in StampPreemptor(clock) }
        let slots = preemptors.enumerated().map { i, p in dog.register(WatchdogSubject(plugin: "p\(i)", preemptor: p)) }
        var generator = SystemRandomNumberGenerator()
        var lost = 0, madeUp = 0, wrongCall = 0, fired = 0, either = 0
        var span: UInt64 = 0
        var opened: UInt64 = 0  // when the window's first call entered
        for call in 0..<3000 {
            // Now and then, a second call in the same window, as the handlers of one event.
            let sameWindow = call > 0 && Int.random(in: 0..<5, using: &generator) == 0
            if !sameWindow {
                // Between windows: nothing, or quiet long enough for the thread to park.
                for _ in 0..<Int.random(in: 0...3, using: &generator) { clock.advance(by: Double(period) / 1e9) }
                span = UInt64.random(in: 1...20, using: &generator) * ms
                dog.open(span: span, handler: "stress", limit: Double(span) / 1e9, time: .zero)
                opened = clock.nanoseconds()
            }
            let i = Int.random(in: 0..<slots.count, using: &generator)
            let before = preemptors.map(\.count)
            let entered = clock.nanoseconds()
            dog.enter(slots[i])
            // The call runs in steps of at most a period, so that the thread looks at least once
            // a period, as it does in real time. Each step is a look.
            let steps = Int.random(in: 0...30, using: &generator)
            for _ in 0..<steps {
                clock.advance(by: Double(UInt64.random(in: 1...period, using: &generator)) / 1e9)
            }
            let left = clock.nanoseconds()
            let acted = dog.leave()
            let after = preemptors.map(\.count)
            let stopped = after[i] - before[i]
            if (0..<slots.count).contains(where: { $0 != i && after[$0] != before[$0] }) { wrongCall += 1 }
            if acted != (stopped == 1) || stopped > 1 { wrongCall += 1 }
            if acted { fired += 1 }
            if left < opened + span {
                if acted { madeUp += 1 }  // the whole call before its window's deadline
            } else if steps > 0 && left >= opened + span + period && left > entered {
                if !acted { lost += 1 }  // the thread looked during the call, a period past the deadline
            } else {
                either += 1
            }
        }
        #expect(lost == 0, "stops lost")
        #expect(madeUp == 0, "stops before the deadline")
        #expect(wrongCall == 0, "stops that reached another call, or none")
        #expect(gaveUp.value == 0)
        #expect(fired > 300, "only \(fired) calls overran: the test proves little")
        print("epoch stress: 3000 calls, \(fired) stopped, \(either) within a period of their deadline")
    }
}

/// The same arming on CLOCK_MONOTONIC: calls that spin until they are stopped, with spans of a
/// fraction of the sampling period and gaps that let the thread park between them, so that calls
/// keep entering as the thread parks. Each must be stopped: a stop lost would leave its call
/// spinning until the test gives up on it. Nothing is timed.
@Suite(.serialized) struct WatchdogEpochRealClockTests {
    private final class FlagPreemptor: Preemptible {
        let stops = Atomic<Int>(0)
        func preempt() { stops.add(1, ordering: .sequentiallyConsistent) }
    }

    @Test func epoch_callsEnteringWhileTheThreadParks_areAllStopped() {
        let dog = Watchdog()
        defer { dog.shutdown() }
        let preemptor = FlagPreemptor()
        let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
        var generator = SystemRandomNumberGenerator()
        var unstopped = 0, notFired = 0
        for _ in 0..<3000 {
            let before = preemptor.stops.load(ordering: .sequentiallyConsistent)
            dog.open(span: UInt64.random(in: 0...100_000, using: &generator), handler: "spin", limit: 0, time: .zero)
            dog.enter(slot)
            let giveUpAt = Monotonic.nanoseconds() + 5_000_000_000
            while preemptor.stops.load(ordering: .sequentiallyConsistent) == before {
                if Monotonic.nanoseconds() > giveUpAt {
                    unstopped += 1
                    break
                }
            }
            if !dog.leave() { notFired += 1 }
            // Quiet for 0 to 2 periods: the thread parks in some gaps and not in others.
            let gap = UInt32.random(in: 0...2 * UInt32(MonotonicWatchdogClock.samplingPeriod / 1000), using: &generator)
            if gap > 0 { usleep(gap) }
        }
        #expect(unstopped == 0, "calls never stopped")
        #expect(notFired == 0)
    }
}
