import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 5, W1–W5. The watchdog measures real running time (W5), so these tests busy-wait (never
// sleep inside a handler) for at most ~200 ms, with limits far from the measured times. They run
// one at a time so that they do not starve each other of the two cores.

/// Records each preempt() call with the monotonic time it came, as the Lua bridge's stop would.
final class RecordingPreemptor: Preemptible {
    let calls = Shared<[UInt64]>([])
    func preempt() { calls.append(Monotonic.nanoseconds()) }
    var count: Int { calls.value.count }
}

/// A Swift plugin whose handler for `event` busy-waits for `seconds`.
private func spinner(_ name: String, on event: LifecycleEventName, seconds: Double) -> PluginDescriptor {
    swiftPlugin(name) { context in context.on(event) { _ in spin(seconds: seconds) } }
}

private let watchdogEvents: Set<String> = ["watchdog", "terminated"]

@Suite(.serialized)
struct HostWatchdogTests {
    // MARK: W1, W3: Swift handlers

    @Test func watchdog_swiftHandlerOverrunsItsEventLimit_terminatesWith0x8badf00d() throws {
        let p = spinner("slow", on: .didEnterBackground, seconds: 0.15)
        let recorder = try simulate("0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.05 })
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.kind.code == "0x8badf00d")
        #expect(termination.plugin == "slow")
        #expect(termination.reason.contains("slow"))
        #expect(termination.reason.contains("didEnterBackground"))
        #expect(termination.time == .seconds(1))
        #expect(recorder.exitCode == 1)
        #expect(recorder.report()["outcome"] == .string("terminated"))
    }

    @Test func watchdog_swiftOverrun_recordsOneWatchdogEventThenTerminated() throws {
        let p = spinner("slow", on: .didEnterBackground, seconds: 0.15)
        let recorder = try simulate("0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.05 })
        #expect(
            lines(recorder, only: watchdogEvents) == [
                "1 watchdog plugin=slow handler=didEnterBackground limit=0.05",
                "1 terminated kind=watchdog code=0x8badf00d",
            ])
    }

    @Test func watchdog_swiftOverrunInWillResignActive_noLaterHandlerOrNotificationRuns() throws {
        let later = Shared<[String]>([])
        let slow = spinner("a-slow", on: .willResignActive, seconds: 0.15)
        let watcher = swiftPlugin("b-watcher") { context in
            context.on(.didEnterBackground) { _ in later.append("didEnterBackground") }
        }
        let recorder = try simulate(
            "0s launch\n1s background", [slow, watcher], profile: profile { $0.transitionLimit = 0.05 })
        #expect(recorder.termination?.kind == .watchdog)
        #expect(later.value.isEmpty, "T9: no handler runs once the app was terminated")
        #expect(!eventNames(recorder).contains("didEnterBackground"))
        #expect(eventNames(recorder).last == "terminated")
    }

    @Test func watchdog_handlersOfOneEvent_shareOneDeadlineAcrossPlugins() throws {
        // Each handler alone takes 60% of the limit; together they overrun it.
        let plugins = [
            spinner("a", on: .didEnterBackground, seconds: 0.2), spinner("b", on: .didEnterBackground, seconds: 0.2),
        ]
        let recorder = try simulate("0s launch\n1s background", plugins, profile: profile { $0.backgroundLimit = 0.35 })
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.plugin == "b", "the plugin running when the shared deadline passed")
    }

    @Test func watchdog_oneHandlerUnderItsLimit_isFine() throws {
        let p = spinner("quick", on: .didEnterBackground, seconds: 0.09)
        let recorder = try simulate("0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.5 })
        #expect(recorder.termination == nil)
        #expect(!eventNames(recorder).contains("watchdog"))
        #expect(recorder.exitCode == 0)
        // Positive control: the same handler under a limit it overruns is caught.
        let strict = try simulate("0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.03 })
        #expect(strict.termination?.kind == .watchdog)
        #expect(eventNames(strict).contains("watchdog"))
    }

    @Test func watchdog_fastHandlers_onEveryEvent_areFine() throws {
        let p = swiftPlugin("fast") { context in
            for name in LifecycleEventName.allCases { context.on(name) { _ in spin(seconds: 0.005) } }
        }
        let recorder = try simulate("0s launch\n1s memory-warning\n2s background\n3s foreground\n4s terminate", [p])
        #expect(recorder.termination == nil)
        #expect(!eventNames(recorder).contains("watchdog"))
        // Positive control: the run reached its last step, so every handler above was called.
        #expect(lines(recorder, only: ["willTerminate"]) == ["4 willTerminate"])
    }

    @Test func watchdog_eachExpirationHandler_hasItsOwnLimit() throws {
        let p = swiftPlugin("p") { context in
            context.on(.didEnterBackground) { _ in
                for name in ["one", "two"] {
                    let id = Shared(0)
                    id.value = context.beginBackgroundTask(name) {
                        spin(seconds: 0.2)
                        context.endBackgroundTask(id.value)
                    }
                }
            }
        }
        let recorder = try simulate(
            "0s launch\n1s background", [p], profile: profile { $0.expirationHandlerLimit = 0.35 })
        #expect(recorder.termination == nil)
        #expect(lines(recorder, only: ["suspended"]) == ["26 suspended"])
    }

    @Test func watchdog_expirationHandlerOverrun_terminates() throws {
        let p = swiftPlugin("p") { context in
            context.on(.didEnterBackground) { _ in
                _ = context.beginBackgroundTask("t") { spin(seconds: 0.15) }
            }
        }
        let recorder = try simulate(
            "0s launch\n1s background", [p], profile: profile { $0.expirationHandlerLimit = 0.05 })
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.time == .seconds(26))
        #expect(lines(recorder, only: ["watchdog"]).first == "26 watchdog plugin=p handler=expiration handler limit=0.05")
    }

    @Test func watchdog_timerCallbackOverrun_terminates() throws {
        let p = swiftPlugin("p") { context in
            context.on(.didBecomeActive) { _ in context.after(3) { spin(seconds: 0.15) } }
        }
        let recorder = try simulate("0s launch", [p], profile: profile { $0.transitionLimit = 0.05 })
        #expect(recorder.termination?.kind == .watchdog)
        #expect(recorder.termination?.time == .seconds(3))
    }

    @Test func watchdog_swiftLoadOverrunsTheLaunchLimit_isALoadFailure() throws {
        let p = swiftPlugin("heavy") { _ in spin(seconds: 0.15) }
        do {
            _ = try simulate("0s launch", [p], profile: profile { $0.launchLimit = 0.05 })
            Issue.record("the simulation ran although the plugin did not load in time")
        } catch let error as LifelineError {
            #expect(error.exitCode == 65)
            #expect(error.message.contains("heavy"))
        }
    }

    // MARK: W5: which clock

    @Test func watchdog_scale_dividesTheLimitButTheReportShowsTheProfilesLimit() throws {
        // 5 s for didEnterBackground, scaled by 50: 0.1 s of real time.
        let p = spinner("slow", on: .didEnterBackground, seconds: 0.2)
        let recorder = try simulate("0s launch\n1s background", [p], watchdogScale: 50)
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.reason.contains("5 s"))
        #expect(lines(recorder, only: ["watchdog"]).first == "1 watchdog plugin=slow handler=didEnterBackground limit=5")
    }

    @Test func watchdog_withoutScale_sameHandlerIsFine() throws {
        let p = spinner("slow", on: .didEnterBackground, seconds: 0.2)
        let recorder = try simulate("0s launch\n1s background", [p], watchdogScale: 1)
        #expect(recorder.termination == nil)
    }

    @Test func watchdog_handlersTakeNoVirtualTime() throws {
        let times = Shared<[Double]>([])
        let p = swiftPlugin("p") { context in
            context.on(.didEnterBackground) { _ in
                times.append(context.now)
                spin(seconds: 0.05)
                times.append(context.now)
            }
        }
        let recorder = try simulate("0s launch\n1s background", [p])
        #expect(times.value == [1, 1])
        #expect(recorder.timeline.last?.time == HostTime(nanoseconds: 1_000_000_000))
    }

    // MARK: W3: the fatal callback

    @Test func watchdog_onUnpreemptibleOverrun_isCalledWhileTheSwiftHandlerStillRuns() throws {
        let semaphore = DispatchSemaphore(value: 0)
        let seenByCallback = Shared<[String]>([])
        let handlerWait = Shared<DispatchTimeoutResult?>(nil)
        let p = swiftPlugin("blocked") { context in
            context.on(.didEnterBackground) { _ in
                // Returns only when the watchdog's callback signals, or fails after 5 s.
                handlerWait.value = semaphore.wait(timeout: .now() + 5)
            }
        }
        let recorder = try simulate(
            "0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.05 },
            onOverrun: { overrun in
                guard case .terminated(let termination, let recorder) = overrun else { return }
                seenByCallback.append(
                    "\(termination.kind.rawValue) \(termination.plugin ?? "-") "
                        + "outcome=\(recorder.report()["outcome"]?.serialized() ?? "-") "
                        + "last=\(recorder.timeline.last?.event ?? "-")")
                semaphore.signal()
            })
        #expect(handlerWait.value == .success, "the callback ran while the handler was still waiting")
        #expect(seenByCallback.value == [#"watchdog blocked outcome="terminated" last=terminated"#])
        #expect(recorder.termination?.kind == .watchdog)
    }

    @Test func watchdog_onUnpreemptibleOverrun_duringLoad_isALoadFailure() throws {
        let semaphore = DispatchSemaphore(value: 0)
        let messages = Shared<[String]>([])
        let p = swiftPlugin("stuck-loading") { _ in _ = semaphore.wait(timeout: .now() + 5) }
        _ = try? simulate(
            "0s launch", [p], profile: profile { $0.launchLimit = 0.05 },
            onOverrun: { overrun in
                if case .loadFailed(let error) = overrun { messages.append("\(error.exitCode) \(error.message)") }
                semaphore.signal()
            })
        #expect(messages.value.count == 1)
        #expect(messages.value.first?.hasPrefix("65 plugin 'stuck-loading' did not finish loading") == true)
    }

    @Test func watchdog_onUnpreemptibleOverrun_notCalledForAHandlerUnderItsLimit() throws {
        let calls = Shared(0)
        let p = spinner("ok", on: .didEnterBackground, seconds: 0.01)
        _ = try simulate(
            "0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.5 },
            onOverrun: { _ in calls.mutate { $0 += 1 } })
        #expect(calls.value == 0)
        // Positive control: the same handler past a limit it overruns does call it.
        _ = try simulate(
            "0s launch\n1s background", [p], profile: profile { $0.backgroundLimit = 0.002 },
            onOverrun: { _ in calls.mutate { $0 += 1 } })
        #expect(calls.value == 1)
    }

    // MARK: W2, W4: code that can be stopped (the Lua path)

    /// A Lua-like plugin: its didEnterBackground handler runs until the watchdog preempts it.
    private func runaway(_ preemptor: RecordingPreemptor, started: Shared<UInt64>, traceback: String)
        -> PluginDescriptor
    {
        rawPlugin("runaway", kind: .lua, preemptor: preemptor) { context in
            context.subscribe(.didEnterBackground) { _ in
                let start = Monotonic.nanoseconds()
                started.value = start
                while preemptor.count == 0 && elapsed(since: start) < 2 {}
                return preemptor.count > 0 ? .preempted(traceback: traceback) : .returned
            }
            return .returned
        }
    }

    @Test func watchdog_preemptibleCode_isPreemptedOnlyOnceTheDeadlinePassed() throws {
        let preemptor = RecordingPreemptor()
        let started = Shared<UInt64>(0)
        let resigned = Shared<UInt64>(0)
        let runner = runaway(preemptor, started: started, traceback: "tb")
        // willResignActive runs just before the didEnterBackground window opens: a time that is
        // sure to lie before the window's start, however loaded the machine.
        let witness = rawPlugin("witness") { context in
            context.subscribe(.willResignActive) { _ in
                resigned.value = Monotonic.nanoseconds()
                return .returned
            }
            return .returned
        }
        _ = try simulate(
            "0s launch\n1s background", [runner, witness], profile: profile { $0.backgroundLimit = 0.05 })
        let calls = preemptor.calls.value
        #expect(calls.count == 1)
        if let first = calls.first {
            let sinceResign = Double(first &- resigned.value) / 1e9
            #expect(resigned.value > 0 && sinceResign >= 0.05, "preempted \(sinceResign) s into a 0.05 s limit")
            let after = Double(first &- started.value) / 1e9
            #expect(after < 1.5, "preempted late: \(after) s")
        }
    }

    @Test func watchdog_preemptedCode_terminatesWithItsTraceback() throws {
        let traceback = "stack traceback:\n\tinit.lua:3: in function <init.lua:2>"
        let recorder = try simulate(
            "0s launch\n1s background", [runaway(RecordingPreemptor(), started: Shared(0), traceback: traceback)],
            profile: profile { $0.backgroundLimit = 0.05 })
        let termination = try #require(recorder.termination)
        #expect(termination.kind == .watchdog)
        #expect(termination.plugin == "runaway")
        #expect(termination.traceback == traceback)
        #expect(recorder.report()["termination"]?["traceback"] == .string(traceback))
        #expect(
            lines(recorder, only: watchdogEvents) == [
                "1 watchdog plugin=runaway handler=didEnterBackground limit=0.05",
                "1 terminated kind=watchdog code=0x8badf00d",
            ])
    }

    @Test func watchdog_preemptibleCodeThatReturnsInTime_isNeverPreempted() throws {
        let preemptor = RecordingPreemptor()
        let calls = Shared(0)
        let p = rawPlugin("lua-fast", kind: .lua, preemptor: preemptor) { context in
            for name in LifecycleEventName.allCases {
                context.subscribe(name) { _ in
                    calls.mutate { $0 += 1 }
                    return .returned
                }
            }
            return .returned
        }
        let h = Harness([p], profile: profile { $0.backgroundLimit = 0.2; $0.transitionLimit = 0.2 })
        h.at(0, .launch)
        h.at(1, .background)
        h.at(2, .foreground)
        h.run(until: 10)
        // Every handler ran (launch, active, resign, background, foreground, active) and none was
        // stopped. That a deadline passing after a call has left does nothing is WatchdogTests' to show,
        // on a clock moved by hand: the host's watchdog runs on real time.
        #expect(calls.value == 6)
        #expect(preemptor.count == 0)
        #expect(h.recorder.termination == nil)
        // Positive control: the same kind of plugin, running past the same limit, is stopped.
        let slow = RecordingPreemptor()
        let started = Shared<UInt64>(0)
        let recorder = try simulate(
            "0s launch\n1s background", [runaway(slow, started: started, traceback: "tb")],
            profile: profile { $0.backgroundLimit = 0.2; $0.transitionLimit = 0.2 })
        #expect(slow.count == 1)
        #expect(recorder.termination?.kind == .watchdog)
    }
}

/// W2 escalated: Lua code stuck inside one C call never reaches the hook; after the stop grace the
/// watchdog treats it like Swift code (W3).
@Suite(.serialized)
struct WatchdogEscalationTests {
    @Test func stoppedCodeThatDoesNotUnwind_isTreatedAsUnstoppable_afterTheGrace() throws {
        let preemptor = RecordingPreemptor()
        let calledAt = Shared<[Double]>([])
        let start = Shared<UInt64>(0)
        let stuck = rawPlugin("stuck", kind: .lua, preemptor: preemptor) { context in
            context.subscribe(.didEnterBackground) { _ in
                start.value = Monotonic.nanoseconds()
                // Ignores the stop, as code inside a long C call would, until the callback runs.
                while calledAt.value.isEmpty && elapsed(since: start.value) < 3 {}
                return .returned
            }
            return .returned
        }
        var configuration = HostConfiguration(
            profile: profile { $0.backgroundLimit = 0.05 }, logger: quietLogger(),
            onUnpreemptibleOverrun: { overrun in
                if case .terminated = overrun { calledAt.append(elapsed(since: start.value)) }
            })
        configuration.stopGrace = 0.1
        let recorder = try Simulation.run(
            scenario: Scenario.parse("0s launch\n1s background", fileName: "t.scenario"), plugins: [stuck],
            configuration: configuration)
        #expect(preemptor.count == 1, "asked to stop once, at the deadline")
        #expect(calledAt.value.count == 1, "then treated as unstoppable")
        // The limit counts from when the window opened, a little before the handler set `start`
        // (more on a loaded or sanitized build), so only the grace is sure to lie after `start`.
        #expect((calledAt.value.first ?? 0) >= 0.1, "not before the stop's grace has passed")
        #expect(recorder.termination?.kind == .watchdog)
        #expect(recorder.termination?.plugin == "stuck")
    }
}
