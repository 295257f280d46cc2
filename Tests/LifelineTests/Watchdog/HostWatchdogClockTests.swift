import Foundation
import Lifeline
import LifelineTesting
import Testing

/// The host's watchdog windows on a clock the test moves by hand: a handler "takes" exactly the
/// time the test says, so the limits are checked to the nanosecond, with no sleeping.
@Suite struct HostWatchdogClockTests {
    /// A plugin whose didEnterBackground handler spends `seconds` on the watchdog's clock.
    private func run(spending seconds: Double, thenAfterReturn later: Double = 0) throws -> Recorder {
        let clock = ManualWatchdogClock()
        let plugin = swiftPlugin("slow") { context in
            context.on(.didEnterBackground) { _ in clock.advance(by: seconds) }
            context.on(.willEnterForeground) { _ in clock.advance(by: later) }
        }
        var configuration = HostConfiguration(profile: profile { $0.backgroundLimit = 5 }, logger: quietLogger())
        configuration.watchdogClock = clock
        return try Simulation.run(
            scenario: Scenario.parse("0s launch\n1s background\n2s foreground", fileName: "t.scenario"),
            plugins: [plugin], configuration: configuration, until: nil)
    }

    @Test func aHandlerPastItsLimit_onTheWatchdogsClock_isTerminated() throws {
        let recorder = try run(spending: 5.001)
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.reason.contains("didEnterBackground"))
        #expect(termination.time == .seconds(1))
    }

    @Test func aHandlerJustUnderItsLimit_isFine() throws {
        let recorder = try run(spending: 4.999)
        #expect(recorder.termination == nil)
        #expect(eventNames(recorder).contains("willEnterForeground"))
    }

    @Test func eachEvent_opensAWindowOfItsOwn() throws {
        // 4 s in the background handler, then 4 s in the foreground one: 8 s since the first
        // window opened, but neither handler passed its own limit.
        let recorder = try run(spending: 4, thenAfterReturn: 4)
        #expect(recorder.termination == nil)
        // Positive control: the same second handler past the foreground limit is terminated.
        let late = try run(spending: 4, thenAfterReturn: Profile.ios13.limit(for: .willEnterForeground) + 0.001)
        #expect(late.termination?.reason.contains("willEnterForeground") == true)
    }
}
