import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The Swift example of docs/queues.md ("The Swift API"), as written there.
public final class NotesUploads: SwiftPlugin {
    public static let name = "notes-uploads"
    public init() {}
    public func load(_ context: PluginContext) throws {
        let uploads = try context.queue("uploads")
        uploads.on(.didFinishOperations) { context.logger.info("uploads done") }
        context.on(.didEnterBackground) { _ in
            // Async code, as a task on the main executor: it finishes when the closure returns.
            uploads.add(name: "refresh", unique: .drop, timeout: 5) { op in
                _ = try await context.http(HTTPRequest(url: "http://127.0.0.1:8080/refresh"))
            }
            // Three steps that keep their order across waits.
            uploads.addSequential([
                .async(name: "begin") { _ in try await context.sleep(seconds: 1) },
                .async(name: "items") { _ in try await context.sleep(seconds: 1) },
                .sync(name: "commit") { _ in context.logger.info("committed") },
            ])
            // Synchronous code (Backgroundable's inTheBackground).
            context.inTheBackground { context.logger.info("ran on the global queue") }
        }
    }
}

@Test func docsExample_swiftQueues_runInOrderUnderOneTaskPerQueue() throws {
    var descriptor = NotesUploads.descriptor
    descriptor.network = try NetworkPermissions(["127.0.0.1:*"])
    let recorder = try simulate(
        "0s http GET 127.0.0.1:8080/refresh -> 200 in 500ms\n0s launch\n2s background", [descriptor])
    #expect(recorder.pluginErrorCount == 0)
    #expect(
        lines(recorder, only: ["opStarted", "taskBegan", "taskEnded", "suspended"]) == [
            "2 taskBegan plugin=notes-uploads task=1 name=queue uploads",
            "2 taskBegan plugin=notes-uploads task=2 name=queue background",
            "2 opStarted plugin=notes-uploads queue=uploads op=1 name=refresh",
            "2 opStarted plugin=notes-uploads queue=background op=5",
            "2 taskEnded plugin=notes-uploads task=2 expired=false",
            "2.5 opStarted plugin=notes-uploads queue=uploads op=2 name=begin",
            "3.5 opStarted plugin=notes-uploads queue=uploads op=3 name=items",
            "4.5 opStarted plugin=notes-uploads queue=uploads op=4 name=commit",
            "4.5 taskEnded plugin=notes-uploads task=1 expired=false",
            "4.5 suspended",
        ])
}
