import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// System-scheduled work from a Swift plugin: the same rules as Lua's, through PluginContext.

private func run(
    _ scenario: String, profile: Profile = .ios13, _ setup: @escaping (PluginContext) throws -> Void
) throws -> Recorder {
    var descriptor = swiftPlugin("s", setup)
    descriptor.taskIdentifiers = ["com.example.refresh", "com.example.clean"]
    return try simulate(scenario, [descriptor], profile: profile)
}

private let shown: Set<String> = [
    "systemTaskStarted", "systemTaskExpiring", "systemTaskCompleted", "fetchCompleted", "pushCompleted",
    "terminated", "suspended", "resumed",
]

@Test func swiftPlugin_runsAScheduledTask_andCompletesIt() throws {
    let heard = Shared<[String]>([])
    let recorder = try run("0s launch\n1s background") { context in
        try context.registerTask("com.example.refresh") { task in
            heard.append("\(task.identifier) \(task.kind.rawValue) \(task.id)")
            context.after(3) { heard.append("completed \(task.setTaskCompleted(success: true))") }
        }
        try context.submitTask(SystemTaskRequest(identifier: "com.example.refresh", kind: .refresh, earliestBegin: 10))
        heard.append("pending \(try context.pendingTasks().map(\.request.identifier))")
    }
    #expect(heard.value == ["pending [\"com.example.refresh\"]", "com.example.refresh refresh 1", "completed true"])
    #expect(
        lines(recorder, only: shown) == [
            "1 suspended", "10 resumed reason=systemTask",
            "10 systemTaskStarted plugin=s identifier=com.example.refresh kind=refresh task=1",
            "13 systemTaskCompleted plugin=s identifier=com.example.refresh kind=refresh task=1 success=true",
            "13 suspended",
        ])
}

@Test func swiftPlugin_expirationHandler_isCalled_thenTheAppIsTerminated() throws {
    let heard = Shared<[String]>([])
    let recorder = try run("0s launch\n1s background") { context in
        try context.registerTask("com.example.clean") { task in
            task.expirationHandler = { heard.append("expiring \(task.id)") }
        }
        try context.submitTask(SystemTaskRequest(identifier: "com.example.clean", kind: .processing))
    }
    #expect(heard.value == ["expiring 1"])
    #expect(recorder.termination?.kind == .completionTimeout)
    #expect(recorder.termination?.time == .seconds(181))
    #expect(lines(recorder, only: shown).suffix(2) == [
        "176 systemTaskExpiring plugin=s identifier=com.example.clean kind=processing task=1",
        "181 terminated kind=completionTimeout code=0x8badf00d",
    ])
}

@Test func swiftPlugin_refusals_unknownIdentifier_lateRegistration_missingAPI() throws {
    let heard = Shared<[String]>([])
    _ = try run("0s launch") { context in
        do {
            try context.submitTask(SystemTaskRequest(identifier: "com.nope", kind: .refresh))
        } catch {
            heard.append("\(error)")
        }
        context.on(.didBecomeActive) { _ in
            do {
                try context.registerTask("com.example.refresh") { _ in }
            } catch {
                heard.append("\(error)")
            }
        }
    }
    #expect(heard.value.count == 2)
    #expect(heard.value[0].hasPrefix("'com.nope' is not a permitted identifier"))
    #expect(heard.value[1].contains("after the app finished launching"))
    _ = try run("0s launch", profile: .ios7) { context in
        do {
            try context.registerTask("com.example.refresh") { _ in }
        } catch {
            heard.append("\(error)")
        }
    }
    #expect(heard.value.last == "BGTaskScheduler came with iOS 13, and profile ios7 lacks it")
}

@Test func swiftPlugin_fetchAndPush_completions() throws {
    let recorder = try run("0s launch\n1s background\n10s fetch\n20s push {\"n\":1}") { context in
        context.on(.performFetch) { event in try context.complete(event, .newData) }
        context.on(.didReceiveRemoteNotification) { event in
            #expect(event.payload == "{\"n\":1}")
            context.after(2) { try context.complete(event, .noData) }
        }
    }
    #expect(
        lines(recorder, only: shown) == [
            "1 suspended", "10 resumed reason=fetch", "10 fetchCompleted plugin=s result=newData", "10 suspended",
            "20 resumed reason=push", "22 pushCompleted plugin=s result=noData", "22 suspended",
        ])
}

@Test func swiftPlugin_aCompletionOfAnotherEventKind_isRefused() throws {
    let heard = Shared<[String]>([])
    _ = try run("0s launch\n1s background\n10s fetch") { context in
        context.on(.performFetch) { event in
            do {
                try context.setTaskCompleted(event.completion ?? 0, success: true)
            } catch {
                heard.append("\(error)")
            }
            try context.complete(event, .failed)
        }
    }
    #expect(heard.value == ["the completion takes a result: newData, noData, failed"])
}

@Test func swiftPlugin_completesItsTransferEvents() throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swift-sys-\(UUID())").path
    defer { try? FileManager.default.removeItem(atPath: dir) }
    var descriptor = swiftPlugin("s") { context in
        context.on(.didFinishLaunching) { _ in _ = try context.download(url: "http://example.org/a.bin", to: "a.bin") }
        context.on(.transferDidFinish) { _ in }
        context.on(.didFinishTransferEvents) { event in
            let first = try context.completeTransferEvents(event)
            let second = try context.completeTransferEvents(event)  // once is enough
            #expect(first && !second)
        }
    }
    descriptor.network = try NetworkPermissions(["example.org:*"])
    var configuration = HostConfiguration()
    configuration.database = try StateDatabase.open(stateDirectory: dir)
    let recorder = try Simulation.run(
        scenario: try Scenario.parse(
            "0s http GET example.org/a.bin -> 200 size=1KB rate=1MB/s\n0s launch\n1s background", fileName: "t.scenario"),
        plugins: [descriptor], configuration: configuration)
    #expect(recorder.timeline.contains { $0.event == "transferEventsCompleted" })
    #expect(!recorder.timeline.contains { $0.event == "transferEventsTimedOut" })
    #expect(lines(recorder, only: shown).last == "1 suspended")
}
