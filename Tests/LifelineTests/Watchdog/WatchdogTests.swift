import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The Watchdog type on its own, on a clock the test moves by hand: each deadline is crossed at a
// known instant, so nothing here sleeps or depends on how loaded the machine is.

/// Records the clock's time at each preempt() call, as the Lua bridge's stop would be asked.
private final class ClockPreemptor: Preemptible {
    let clock: ManualWatchdogClock
    let calls = Shared<[UInt64]>([])
    init(_ clock: ManualWatchdogClock) { self.clock = clock }
    func preempt() { calls.append(clock.nanoseconds()) }
    var count: Int { calls.value.count }
}

/// Opens a window until `deadline` and enters a call of plugin "p" with `preemptor` in it.
private func arm(_ dog: Watchdog, deadline: UInt64, _ preemptor: (any Preemptible)?, handler: HandlerName = "timer") {
    let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
    dog.open(deadline: deadline, handler: handler, limit: 1, time: .zero)
    dog.enter(slot)
}

private let ms: UInt64 = 1_000_000

@Suite struct WatchdogTests {
    @Test func watchdog_deadlinePassesWhileArmed_preemptsOnceAtTheDeadline() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        arm(dog, deadline: 20 * ms, preemptor)
        clock.advance(to: 20 * ms - 1)
        #expect(preemptor.count == 0, "not before the deadline")
        clock.advance(to: 20 * ms)
        #expect(preemptor.calls.value == [20 * ms], "once, at the deadline")
        clock.advance(by: 0.5)  // within the one-second stop grace
        #expect(preemptor.count == 1)
        #expect(dog.leave(), "leave says the watchdog acted")
    }

    @Test func watchdog_disarmedBeforeDeadline_neverActs() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let unpreemptible = Shared(0)
        let dog = Watchdog(clock: clock) { _ in unpreemptible.mutate { $0 += 1 } }
        defer { dog.shutdown() }
        arm(dog, deadline: 500 * ms, preemptor)
        #expect(!dog.leave())
        arm(dog, deadline: 500 * ms, nil)
        #expect(!dog.leave())
        clock.advance(by: 10)
        #expect(preemptor.count == 0)
        #expect(unpreemptible.value == 0)
        // Positive control: the same watchdog, armed and left armed past a deadline, acts.
        arm(dog, deadline: clock.nanoseconds() + 500 * ms, nil)
        clock.advance(by: 0.5)
        #expect(unpreemptible.value == 1)
        #expect(dog.leave())
    }

    @Test func watchdog_swiftTarget_callsOnUnpreemptibleWithIt() {
        let clock = ManualWatchdogClock()
        let seen = Shared<[String]>([])
        let dog = Watchdog(clock: clock) { t in seen.append("\(t.plugin) \(t.handler) at \(clock.nanoseconds() / ms)") }
        defer { dog.shutdown() }
        arm(dog, deadline: 10 * ms, nil)
        clock.advance(to: 9 * ms)
        #expect(seen.value.isEmpty)
        clock.advance(to: 10 * ms)
        #expect(seen.value == ["p timer at 10"])
        clock.advance(by: 5)
        #expect(seen.value == ["p timer at 10"], "once only")
        #expect(dog.leave())
    }

    @Test func watchdog_earlierDeadline_wakesTheThread() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        arm(dog, deadline: 60_000 * ms, preemptor)
        #expect(clock.watchdogWaits(until: 60_000 * ms))
        // The arm alone must wake the thread: the clock does not, until it is moved.
        arm(dog, deadline: 20 * ms, preemptor)
        #expect(clock.watchdogWaits(until: 20 * ms))
        clock.advance(to: 20 * ms)
        #expect(preemptor.calls.value == [20 * ms])
    }

    @Test func watchdog_laterDeadlineForTheSameEvent_wakesNothingAndStillActsAtIt() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        arm(dog, deadline: 20 * ms, preemptor)
        #expect(clock.watchdogWaits(until: 20 * ms))
        _ = dog.leave()
        arm(dog, deadline: 30 * ms, preemptor)
        clock.advance(to: 20 * ms)
        #expect(preemptor.count == 0, "the old deadline finds the new target not yet due")
        clock.advance(to: 30 * ms)
        #expect(preemptor.calls.value == [30 * ms])
    }

    @Test func watchdog_stoppedCodeThatDoesNotUnwind_isGivenUpOnAfterTheGrace() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let gaveUp = Shared<[String]>([])
        let dog = Watchdog(stopGrace: 0.1, clock: clock) { t in
            gaveUp.append("\(t.handler) at \(clock.nanoseconds() / ms)")
        }
        defer { dog.shutdown() }
        arm(dog, deadline: 1000 * ms, preemptor, handler: "didEnterBackground")
        clock.advance(to: 1000 * ms)
        #expect(preemptor.calls.value == [1000 * ms])
        #expect(gaveUp.value.isEmpty)
        clock.advance(to: 1100 * ms - 1)
        #expect(gaveUp.value.isEmpty, "not before the grace has passed")
        clock.advance(to: 1100 * ms)
        #expect(gaveUp.value == ["didEnterBackground at 1100"])
        #expect(preemptor.count == 1, "asked to stop once only")
        #expect(dog.leave())
    }

    @Test func watchdog_codeThatUnwindsWithinTheGrace_isNotGivenUpOn() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let gaveUp = Shared(0)
        let dog = Watchdog(stopGrace: 0.1, clock: clock) { _ in gaveUp.mutate { $0 += 1 } }
        defer { dog.shutdown() }
        arm(dog, deadline: 1000 * ms, preemptor)
        clock.advance(to: 1000 * ms)
        #expect(preemptor.count == 1)
        #expect(dog.leave(), "the code unwound after the stop")
        clock.advance(by: 10)
        #expect(gaveUp.value == 0)
    }

    @Test func watchdog_aCallThatLeftBeforeTheDeadline_isNeverStopped_butTheNextCallOfTheWindowIsAtOnce() {
        let clock = ManualWatchdogClock()
        let first = ClockPreemptor(clock), second = ClockPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let a = dog.register(WatchdogSubject(plugin: "a", preemptor: first))
        let b = dog.register(WatchdogSubject(plugin: "b", preemptor: second))
        dog.open(deadline: 20 * ms, handler: "didEnterBackground", limit: 1, time: .zero)
        dog.enter(a)
        #expect(!dog.leave())
        clock.advance(to: 25 * ms)
        #expect(first.count == 0 && second.count == 0, "the deadline passed with no call running")
        dog.enter(b)
        clock.settle()
        #expect(second.calls.value == [25 * ms], "b entered a window already past its deadline")
        #expect(first.count == 0, "a had left")
        #expect(dog.leave())
    }

    @Test func watchdog_windowsThatFollowOneAnother_wakeNothing() {
        let clock = ManualWatchdogClock()
        let preemptor = ClockPreemptor(clock)
        let dog = Watchdog(clock: clock)
        defer { dog.shutdown() }
        let slot = dog.register(WatchdogSubject(plugin: "p", preemptor: preemptor))
        for i in 0..<100 {
            dog.open(deadline: (20 + UInt64(i)) * ms, handler: "timer", limit: 1, time: .zero)
            dog.enter(slot)
            #expect(!dog.leave())
            // The first window wakes the thread, asleep until woken: let it take that in.
            if i == 0 { clock.settle() }
        }
        #expect(clock.watchdogWaits(until: 20 * ms), "still asleep until the first window's deadline")
        clock.advance(to: 20 * ms)
        #expect(clock.watchdogWaits(until: 119 * ms), "then until the last one's")
        clock.advance(to: 200 * ms)
        #expect(preemptor.count == 0)
    }
}

@Test func handlerName_isWrittenOutAsTheWatchdogAndErrorsName() {
    // Kept as parts until read; the text is what the events and messages always said.
    #expect(HandlerName.numbered("background task", 12).description == "background task 12")
    #expect(HandlerName.named("operation", "upload 'x'").description == "operation 'upload 'x''")
    #expect(HandlerName("didEnterBackground").description == "didEnterBackground")
    #expect(("timer" as HandlerName) == HandlerName("timer"))
}
