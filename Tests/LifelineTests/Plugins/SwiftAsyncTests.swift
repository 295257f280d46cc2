import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The Swift async API. Async plugin code runs on the main executor through the host's
// task executor, so these tests run in virtual time like the rest.

private let taskLines: Set<String> = ["taskBegan", "taskExpiring", "taskEnded", "suspended", "terminated"]

/// A sequence of `count` numbers, one every `interval` seconds of the host's clock.
private struct Ticks: AsyncSequence {
    typealias Element = Int
    let context: PluginContext
    let count: Int
    let interval: Double

    struct AsyncIterator: AsyncIteratorProtocol {
        let context: PluginContext
        let count: Int
        let interval: Double
        var emitted = 0
        mutating func next() async throws -> Int? {
            guard emitted < count else { return nil }
            try await context.sleep(seconds: interval)
            emitted += 1
            return emitted
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(context: context, count: count, interval: interval) }
}

@Test func withBackgroundTask_returns_endsTheTaskAndTheAppSuspends() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    let value = try await context.withBackgroundTask("save") { () async throws -> Int in
                        try await context.sleep(seconds: 2)
                        return 42
                    }
                    result.append("value \(value) at \(context.now)")
                } catch {
                    result.append("error \(error)")
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [plugin])
    #expect(result.value == ["value 42 at 3.0"])
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=save", "3 taskEnded plugin=p task=1 expired=false", "3 suspended",
        ])
}

@Test func withBackgroundTask_operationThrows_endsTheTaskAndRethrows() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.task {
            do {
                _ = try await context.withBackgroundTask("fail") { () async throws -> Int in
                    try await context.sleep(seconds: 1)
                    throw PluginFailure(text: "disk full")
                }
            } catch {
                result.append("\(error)")
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(result.value == ["disk full"])
    #expect(
        lines(recorder, only: taskLines) == [
            "0 taskBegan plugin=p task=1 name=fail", "1 taskEnded plugin=p task=1 expired=false",
        ])
}

@Test func withBackgroundTask_expiration_cancelsTheOperationAndThrowsExpired() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    try await context.withBackgroundTask("long") {
                        do {
                            try await context.sleep(seconds: 100)
                        } catch {
                            result.append("operation saw \(type(of: error)) at \(context.now)")
                            throw error
                        }
                    }
                } catch let error as BackgroundTaskExpired {
                    result.append("expired: \(error.name) \(error.task)")
                } catch {
                    result.append("other: \(error)")
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n2s background", [plugin])
    #expect(result.value == ["operation saw CancellationError at 27.0", "expired: long 1"])
    #expect(
        lines(recorder, only: taskLines) == [
            "2 taskBegan plugin=p task=1 name=long", "27 taskExpiring plugin=p task=1",
            "27 taskEnded plugin=p task=1 expired=true", "27 suspended",
        ])
    #expect(recorder.termination == nil)
}

@Test func withBackgroundTask_cancellingTheCaller_cancelsTheOperationAndEndsTheTask() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let task = context.task {
            do {
                try await context.withBackgroundTask("job") { try await context.sleep(seconds: 100) }
                result.append("finished")
            } catch {
                result.append("\(type(of: error)) at \(context.now)")
            }
        }
        context.after(3) { task.cancel() }
    }
    let harness = Harness([plugin])
    harness.at(0, .launch)
    harness.run(until: 200)
    #expect(result.value == ["CancellationError at 3.0"])
    #expect(
        lines(harness.recorder, only: taskLines) == [
            "0 taskBegan plugin=p task=1 name=job", "3 taskEnded plugin=p task=1 expired=false",
        ])
    #expect(harness.host.pendingWaits == 0)
}

@Test func withBackgroundTask_appNotRunning_throwsUnavailable() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.willTerminate) { _ in
            // The app ends right after willTerminate, before this task gets to run.
            context.task {
                do {
                    try await context.withBackgroundTask("late") {}
                    result.append("ran")
                } catch {
                    result.append("\(type(of: error))")
                }
            }
        }
    }
    let harness = Harness([plugin])
    harness.at(0, .launch)
    harness.at(1, .terminate)
    harness.run(until: 10)
    #expect(result.value == ["BackgroundTaskUnavailable"])
    #expect(lines(harness.recorder, only: ["taskBegan"]).isEmpty)
}

@Test func appEnd_cancelsSwiftTasksAndLeavesNoWait() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.task {
            do {
                try await context.sleep(seconds: 100)
                result.append("woke")
            } catch {
                result.append("\(type(of: error))")
            }
        }
    }
    let harness = Harness([plugin])
    harness.at(0, .launch)
    harness.at(5, .terminate)
    harness.run(until: 200)
    #expect(result.value == ["CancellationError"])
    #expect(harness.host.pendingWaits == 0)
}

// MARK: - The AsyncSequence wrapper

@Test func sequence_beginsAtTheFirstNextAndEndsWhenIterationFinishes() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    for try await n in Ticks(context: context, count: 3, interval: 1)
                        .withBackgroundTask("ticks", in: context)
                    {
                        result.append("\(n)@\(context.now)")
                    }
                    result.append("done")
                } catch {
                    result.append("error \(error)")
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n1s background", [plugin])
    #expect(result.value == ["1@2.0", "2@3.0", "3@4.0", "done"])
    #expect(
        lines(recorder, only: taskLines) == [
            "1 taskBegan plugin=p task=1 name=ticks", "4 taskEnded plugin=p task=1 expired=false", "4 suspended",
        ])
}

@Test func sequence_expiration_throwsFromNext() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    for try await n in Ticks(context: context, count: 1000, interval: 10)
                        .withBackgroundTask("endless", in: context)
                    {
                        result.append("\(n)")
                    }
                } catch let error as BackgroundTaskExpired {
                    result.append("expired \(error.name) at \(context.now)")
                } catch {
                    result.append("other \(error)")
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [plugin])
    #expect(result.value == ["1", "2", "expired endless at 25.0"])
    #expect(
        lines(recorder, only: taskLines) == [
            "0 taskBegan plugin=p task=1 name=endless", "25 taskExpiring plugin=p task=1",
            "25 taskEnded plugin=p task=1 expired=true", "25 suspended",
        ])
}

@Test func sequence_breakingOutOfTheLoop_endsTheTask() throws {
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    for try await n in Ticks(context: context, count: 1000, interval: 1)
                        .withBackgroundTask("first-two", in: context)
                    {
                        if n == 2 { break }
                    }
                } catch {}
            }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [plugin])
    #expect(
        lines(recorder, only: taskLines) == [
            "0 taskBegan plugin=p task=1 name=first-two", "2 taskEnded plugin=p task=1 expired=false", "2 suspended",
        ])
}

@Test func sequence_consumerCancelled_endsTheTask() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        let task = context.task {
            do {
                for try await _ in Ticks(context: context, count: 1000, interval: 1)
                    .withBackgroundTask("cancelled", in: context)
                {}
            } catch {
                result.append("\(type(of: error)) at \(context.now)")
            }
        }
        context.after(3.5) { task.cancel() }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(result.value == ["CancellationError at 3.5"])
    #expect(
        lines(recorder, only: taskLines) == [
            "0 taskBegan plugin=p task=1 name=cancelled", "3.5 taskEnded plugin=p task=1 expired=false",
        ])
}

// MARK: - HTTP from Swift

@Test func http_fromSwift_isUnderThePluginsPermissions() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.task {
            do {
                _ = try await context.http(HTTPRequest(url: "http://127.0.0.1:9/"))
                result.append("answered")
            } catch let failure as HTTPFailure {
                result.append(failure.kind.rawValue)
            } catch {
                result.append("other \(error)")
            }
        }
    }
    let recorder = try simulate("0s launch", [plugin])
    #expect(result.value == ["notPermitted"])
    #expect(
        lines(recorder, only: ["httpRequest", "httpResponse"]) == [
            "0 httpRequest plugin=p method=GET url=http://127.0.0.1:9/",
            "0 httpResponse plugin=p method=GET url=http://127.0.0.1:9/ error=notPermitted",
        ])
}

@Test func swiftAsync_report_isByteIdenticalAcrossRuns() throws {
    func run() throws -> String {
        let plugin = swiftPlugin("p") { context in
            context.on(.didEnterBackground) { _ in
                for i in 1...4 {
                    context.task {
                        _ = try? await context.withBackgroundTask("t\(i)") {
                            try await context.sleep(seconds: Double(i) * 7)
                        }
                    }
                }
            }
        }
        return try simulate("0s launch\n1s background\n40s foreground\n41s background", [plugin]).report()
            .serialized()
    }
    #expect(try run() == run())
}

@Test func http_fromSwift_reachesTheScriptedNetworkAsLuaDoes() throws {
    let result = Shared<[String]>([])
    var plugin = swiftPlugin("p") { context in
        context.task {
            do {
                let response = try await context.withBackgroundTask("fetch") {
                    try await context.http(HTTPRequest(url: "http://127.0.0.1:8080/status"))
                }
                result.append("\(response.status) \(response.text) at \(context.now)")
            } catch {
                result.append("error \(error)")
            }
        }
    }
    plugin.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate("0s http GET 127.0.0.1:8080/status -> 200 {\"ok\": true} in 1.5s\n0s launch", [plugin])
    #expect(result.value == ["200 {\"ok\": true} at 1.5"])
    #expect(
        lines(recorder, only: ["httpResponse", "taskEnded"]) == [
            "1.5 httpResponse plugin=p method=GET url=http://127.0.0.1:8080/status status=200",
            "1.5 taskEnded plugin=p task=1 expired=false",
        ])
}

@Test func http_fromSwift_cancellingTheTask_cancelsTheRequest() throws {
    let result = Shared<[String]>([])
    var plugin = swiftPlugin("p") { context in
        let task = context.task {
            do {
                _ = try await context.http(HTTPRequest(url: "http://127.0.0.1:8080/slow"))
                result.append("answered")
            } catch {
                result.append("\(type(of: error)) at \(context.now)")
            }
        }
        context.after(2) { task.cancel() }
    }
    plugin.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate("0s http * * -> hang\n0s launch", [plugin])
    #expect(result.value == ["CancellationError at 2.0"])
    #expect(
        lines(recorder, only: ["httpResponse"]) == [
            "2 httpResponse plugin=p method=GET url=http://127.0.0.1:8080/slow error=cancelled"
        ])
}

@Test func swiftTaskSlice_overrunningItsLimit_isAWatchdogTermination() throws {
    let plugin = swiftPlugin("p") { context in
        context.task {
            try? await context.sleep(seconds: 1)
            spin(seconds: 0.2)  // one slice, past the 50 ms limit
        }
    }
    let recorder = try simulate("0s launch", [plugin], profile: profile { $0.transitionLimit = 0.05 })
    let termination = try #require(recorder.termination)
    #expect(termination.kind == .watchdog)
    #expect(termination.reason.contains("plugin 'p' was still running its Swift task handler"), "\(termination.reason)")
    #expect(termination.time == .seconds(1))
}

// The example in docs/swift-api.md ("Async work"), as written there.
public final class SessionEnd: SwiftPlugin {
    public static let name = "session-end-swift"
    public init() {}
    public func load(_ context: PluginContext) throws {
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    let response = try await context.withBackgroundTask("session-end") {
                        try await context.http(
                            HTTPRequest(method: "POST", url: "http://127.0.0.1:8080/session/end",
                                        body: Array(#"{"event":"sessionEnd"}"#.utf8)))
                    }
                    context.logger.info("server answered \(response.status)")
                } catch is BackgroundTaskExpired {
                    context.logger.warning("the task expired before the server answered")
                } catch {
                    context.logger.warning("session end not reported: \(error)")
                }
            }
        }
    }
}

@Test(arguments: [
    ("0s http POST 127.0.0.1:8080/session/end -> 200 {\"success\": true} in 300ms", "2.3 taskEnded plugin=session-end-swift task=1 expired=false"),
    ("0s http * * -> hang", "27 taskEnded plugin=session-end-swift task=1 expired=true"),
])
func docsExample_sessionEndInSwift_endsItsTask(_ rule: String, _ ended: String) throws {
    var descriptor = SessionEnd.descriptor
    descriptor.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate("\(rule)\n0s launch\n2s background", [descriptor])
    #expect(lines(recorder, only: ["taskEnded"]) == [ended])
    #expect(eventNames(recorder).last == "suspended")
    #expect(recorder.termination == nil)
}

@Test func http_fromSwift_aResponseThatArrivesWhileSuspended_runsTheCodeWhenTheAppRunsAgain() throws {
    // The request outlives the app's time in the background: its answer comes at 40 s, while the
    // app is suspended, and the code after the await runs only at the foreground at 60 s.
    let result = Shared<[String]>([])
    var plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                let response = try? await context.http(HTTPRequest(url: "http://127.0.0.1:8080/slow", timeout: 100))
                result.append("\(response?.status ?? 0) at \(context.now) while \(context.state.rawValue)")
            }
        }
    }
    plugin.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate(
        "0s http GET 127.0.0.1:8080/slow -> 200 late in 39s\n0s launch\n1s background\n60s foreground", [plugin])
    #expect(result.value == ["200 at 60.0 while active"], "\(lines(recorder, only: ["suspended", "httpResponse"]))")
}

@Test func sequence_expirationWhileTheBodyAwaits_cancelsTheBody() throws {
    let result = Shared<[String]>([])
    let plugin = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            context.task {
                do {
                    for try await n in Ticks(context: context, count: 3, interval: 1)
                        .withBackgroundTask("slow body", in: context)
                    {
                        do {
                            try await context.sleep(seconds: 1000)  // the body outlasts the budget
                            result.append("\(n) slept")
                        } catch {
                            result.append("\(n) body: \(type(of: error)) at \(context.now)")
                            throw error
                        }
                    }
                } catch {
                    result.append("loop: \(type(of: error))")
                }
            }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [plugin])
    #expect(result.value == ["1 body: CancellationError at 25.0", "loop: CancellationError"])
    #expect(lines(recorder, only: taskLines).contains("25 taskEnded plugin=p task=1 expired=true"))
}
