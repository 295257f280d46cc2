import Testing

@testable import Lifeline
@testable import LifelineRules

/// `SystemWork` built alone on a virtual clock: the completions it hands out, and what happens
/// when one is not called in time. No host, no plugin code: handlers are closures subscribed on
/// the stage, and the coordinator is the stage's stand-in.
@Suite struct SystemWorkAloneTests {
    private func systemWork(_ stage: ComponentStage) -> SystemWork {
        SystemWork(
            session: stage.session, subscriptions: stage.subscriptions, caller: stage.caller, policy: .earliest,
            database: nil, epochAtStart: 0)
    }

    @Test func fetchCompletionNotCalled_terminatesAtTheFetchLimit() {
        let stage = ComponentStage()
        let system = systemWork(stage)
        let saver = stage.launch(["saver"])[0]
        var completion: Int?
        _ = stage.subscriptions.subscribe(plugin: saver.slot, event: .performFetch) { event in
            completion = event.completion
            return .returned
        }
        stage.executor.schedule(at: .seconds(2)) { system.perform(.fetch) }
        stage.run(until: 100)

        #expect(completion != nil)
        #expect(stage.requests == [
            "wake fetch",
            "terminate completionTimeout: plugin 'saver' did not call the completion of performFetch within 30 s",
        ])
        #expect(stage.timeline() == ["2 performFetch", "32 terminated kind=completionTimeout code=0x8badf00d"])
        #expect(!system.holdsAppAwake)
    }

    @Test func fetchCompletionCalledInTime_endsItsDeadline() throws {
        let stage = ComponentStage()
        let system = systemWork(stage)
        let saver = stage.launch(["saver"])[0]
        _ = stage.subscriptions.subscribe(plugin: saver.slot, event: .performFetch) { event in
            let id = event.completion!
            stage.executor.schedule(at: .seconds(12)) {
                #expect((try? system.complete(saver, id: id, with: .fetch(.newData))) == true)
            }
            return .returned
        }
        stage.executor.schedule(at: .seconds(2)) { system.perform(.fetch) }
        stage.executor.schedule(at: .seconds(5)) { #expect(system.holdsAppAwake) }
        stage.run(until: 100)

        #expect(stage.requests == ["wake fetch"])
        #expect(stage.timeline() == ["2 performFetch", "12 fetchCompleted plugin=saver result=newData"])
        #expect(!system.holdsAppAwake)
    }

    @Test func completionOfAnotherPlugin_isRefused() {
        let stage = ComponentStage()
        let system = systemWork(stage)
        let plugins = stage.launch(["a", "b"])
        var completion = 0
        _ = stage.subscriptions.subscribe(plugin: plugins[0].slot, event: .performFetch) { event in
            completion = event.completion!
            return .returned
        }
        system.perform(.fetch)
        #expect(throws: SystemTaskError("completion \(completion) belongs to plugin 'a'")) {
            try system.complete(plugins[1], id: completion, with: .fetch(.noData))
        }
    }

    @Test func scheduledTaskNotCompleted_getsItsExpirationThenTerminatesAtItsLimit() throws {
        let stage = ComponentStage()
        let system = systemWork(stage)
        let saver = stage.launch(["saver"], taskIdentifiers: ["refresh.feed"])[0]
        var calls: [String] = []
        try system.register(
            saver, identifier: "refresh.feed",
            handler: SystemTaskHandler(
                run: { task in
                    calls.append("run \(task.identifier) at \(stage.session.now.seconds)")
                    return .returned
                },
                expire: { task in
                    calls.append("expire \(task.identifier) at \(stage.session.now.seconds)")
                    return .returned
                }))
        stage.session.finishLaunching()
        try system.submit(saver, SystemTaskRequest(identifier: "refresh.feed", kind: .refresh, earliestBegin: 10))
        stage.run(until: 200)

        // The refresh limit is 30 s: the expiration handler comes 5 s (the expiration lead) before.
        #expect(calls == ["run refresh.feed at 10.0", "expire refresh.feed at 35.0"])
        #expect(stage.requests == [
            "wake systemTask",
            "terminate completionTimeout: plugin 'saver' did not complete its refresh task 'refresh.feed' within 30 s",
        ])
        #expect(stage.timeline(only: ["systemTaskStarted", "systemTaskExpiring", "terminated"]) == [
            "10 systemTaskStarted plugin=saver identifier=refresh.feed kind=refresh task=1",
            "35 systemTaskExpiring plugin=saver identifier=refresh.feed kind=refresh task=1",
            "40 terminated kind=completionTimeout code=0x8badf00d",
        ])
    }

    @Test func registeringAfterTheLaunch_isRefused() {
        let stage = ComponentStage()
        let system = systemWork(stage)
        let saver = stage.launch(["saver"], taskIdentifiers: ["refresh.feed"])[0]
        stage.session.finishLaunching()
        #expect(throws: SystemTaskError.self) {
            try system.register(
                saver, identifier: "refresh.feed", handler: SystemTaskHandler(run: { _ in .returned }, expire: { _ in .returned }))
        }
    }
}
