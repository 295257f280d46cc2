import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 2.3 (the report), 2.4 (exit codes) and 7 (bad input that reaches the core).

/// The keys of a JSON object, in order.
private func keys(_ value: JSONValue?) -> [String] {
    guard case .object(let fields)? = value else { return [] }
    return fields.map(\.0)
}

/// A plugin that saves in the background, as the SPEC's example does.
private final class SaveChanges: SwiftPlugin {
    static let name = "save-changes"
    init() {}
    func load(_ context: PluginContext) throws {
        context.on(.didEnterBackground) { _ in
            var id = 0
            id = context.beginBackgroundTask("save") { context.endBackgroundTask(id) }
        }
    }
}

// MARK: - Shape

@Test func report_keys_areInSpecOrder() throws {
    let recorder = try simulate("0s launch", [SaveChanges.descriptor])
    #expect(
        keys(recorder.report()) == ["lifeline", "profile", "limits", "outcome", "termination", "plugins", "timeline"])
}

@Test func report_specExample_isReproducedExactly() throws {
    let recorder = try simulate("0s launch\n2s background", [SaveChanges.descriptor])
    let expected = """
        {
          "lifeline": 2,
          "profile": "ios13",
          "limits": {
            "budget": 30,
            "expirationLead": 5,
            "launch": 20,
            "didEnterBackground": 5,
            "transition": 10,
            "willTerminate": 5,
            "expirationHandler": 1,
            "taskLimit": 1000,
            "fetch": 30,
            "refreshTask": 30,
            "processingTask": 180,
            "transferEvents": 30
          },
          "outcome": "completed",
          "termination": null,
          "plugins": [
            {"name": "save-changes", "kind": "swift", "status": "loaded"}
          ],
          "timeline": [
            {"t": 0, "event": "didFinishLaunching"},
            {"t": 0, "event": "didBecomeActive"},
            {"t": 2, "event": "willResignActive"},
            {"t": 2, "event": "didEnterBackground"},
            {"t": 2, "event": "taskBegan", "plugin": "save-changes", "task": 1, "name": "save"},
            {"t": 27, "event": "taskExpiring", "plugin": "save-changes", "task": 1, "name": "save"},
            {"t": 27, "event": "taskEnded", "plugin": "save-changes", "task": 1, "name": "save", "expired": true},
            {"t": 27, "event": "suspended"}
          ]
        }
        """
    #expect(recorder.report().serialized(pretty: true) == expected)
}

@Test(arguments: Profile.all)
func report_profile_isTheProfilesName(_ profile: Profile) throws {
    let recorder = try simulate("0s launch", [], profile: profile)
    #expect(recorder.report()["profile"] == .string(profile.name))
}

@Test func report_terminationObject_hasSpecKeysInOrder() throws {
    let p = swiftPlugin("stuck") { context in
        context.on(.didEnterBackground) { _ in _ = context.beginBackgroundTask("forever") }
    }
    let recorder = try simulate("0s launch\n1.5s background", [p])
    let termination = recorder.report()["termination"]
    #expect(keys(termination) == ["code", "kind", "reason", "plugin", "t", "traceback"])
    #expect(termination?["code"] == .string("0x2182bad2"))
    #expect(termination?["kind"] == .string("backgroundTaskTimeout"))
    #expect(termination?["plugin"] == .string("stuck"))
    #expect(termination?["t"]?.serialized() == "31.5")
    #expect(termination?["traceback"] == .null)
    #expect(recorder.report()["outcome"] == .string("terminated"))
}

@Test func report_completedRun_hasNullTermination() throws {
    let recorder = try simulate("0s launch\n1s background\n2s foreground\n3s terminate", [SaveChanges.descriptor])
    #expect(recorder.report()["outcome"] == .string("completed"))
    #expect(recorder.report()["termination"] == .null)
    #expect(recorder.exitCode == 0)
}

struct RoundingCase: Sendable, CustomTestStringConvertible {
    var time: String
    var t: String
    var testDescription: String { "\(time) → \(t)" }
}

@Test(arguments: [
    RoundingCase(time: "1.5s", t: "1.5"),
    RoundingCase(time: "250ms", t: "0.25"),
    RoundingCase(time: "2m", t: "120"),
    RoundingCase(time: "1h", t: "3600"),
    RoundingCase(time: "1.0004s", t: "1"),
    RoundingCase(time: "1.0005s", t: "1.001"),
    RoundingCase(time: "0.0004s", t: "0"),
    RoundingCase(time: "12.3456s", t: "12.346"),
    RoundingCase(time: "1ms", t: "0.001"),
])
func report_t_isVirtualSecondsRoundedToTheMillisecond(_ c: RoundingCase) throws {
    let recorder = try simulate("0s launch\n\(c.time) resign", [])
    let resign = try #require(recorder.timeline.first { $0.event == "willResignActive" })
    #expect(resign.json.serialized() == #"{"t":\#(c.t),"event":"willResignActive"}"#)
}

@Test func report_sameInputsTwice_areByteIdentical() throws {
    func run() throws -> String {
        let chatty = swiftPlugin("chatty") { context in
            context.on(.didEnterBackground) { _ in
                let a = context.beginBackgroundTask("a")
                _ = context.beginBackgroundTask("b") {}
                context.after(3.25) { context.endBackgroundTask(a) }
                context.endBackgroundTask(999)
            }
            context.on(.didReceiveMemoryWarning) { _ in throw PluginFailure(text: "out of \"memory\"\n") }
        }
        return try simulate(
            "0s launch\n250ms memory-warning\n1.5s background\n10s foreground\n12s background",
            [chatty, SaveChanges.descriptor]
        ).report().serialized(pretty: true)
    }
    let first = try run()
    let second = try run()
    #expect(first == second)
    #expect(first.contains("terminated"), "the run exercised a termination")
}

@Test func report_compactSerialization_hasNoWhitespace() throws {
    let recorder = try simulate("0s launch", [])
    let text = recorder.report().serialized()
    #expect(
        text.hasPrefix(
            #"{"lifeline":2,"profile":"ios13","limits":{"budget":30,"expirationLead":5,"launch":20,"didEnterBackground":5,"#
                + #""transition":10,"willTerminate":5,"expirationHandler":1,"taskLimit":1000,"#
                + #""fetch":30,"refreshTask":30,"processingTask":180,"transferEvents":30},"outcome":"completed","#
                + #""termination":null,"plugins":[],"timeline":["#))
    #expect(!text.contains("\n"))
}

// MARK: - JSON

@Test func json_string_escapesQuotesBackslashesAndControls() {
    let value = JSONValue.string("a\"b\\c\nd\re\tf\u{01}g\u{1F}h/é😀")
    #expect(value.serialized() == #""a\"b\\c\nd\re\tf\u0001g\u001fh/é😀""#)
}

@Test func json_objectKeys_areEscapedAndKeepTheirOrder() {
    let value = JSONValue.object([("z", .int(1)), ("a\"", .bool(false)), ("m", .null)])
    #expect(value.serialized() == #"{"z":1,"a\"":false,"m":null}"#)
}

@Test func json_emptyContainers() {
    #expect(JSONValue.array([]).serialized(pretty: true) == "[]")
    #expect(JSONValue.object([]).serialized(pretty: true) == "{}")
}

@Test func json_pluginErrorMessage_isEscapedInTheReport() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in throw PluginFailure(text: "bad \"quote\"\nnext line") }
    }
    let recorder = try simulate("0s launch", [p])
    #expect(recorder.report().serialized().contains(#""message":"bad \"quote\"\nnext line""#))
}

@Test(arguments: [
    (Int64(0), "0"), (27_000_000_000, "27"), (2_500_000_000, "2.5"), (1_000_000, "0.001"),
    (1_499_999, "0.001"), (1_500_000, "0.002"), (-2_500_000_000, "-2.5"), (123_456_789_000, "123.457"),
])
func reportNumber_seconds_roundsToTheMillisecondWithoutTrailingZeros(_ ns: Int64, _ text: String) {
    #expect(ReportNumber.seconds(HostTime(nanoseconds: ns)) == text)
}

// MARK: - Bad input that reaches the core (SPEC 7)

@Test func badInput_pluginWhoseMakeThrows_failsWith65() {
    let broken = PluginDescriptor(name: "broken", kind: .lua) { () throws(LifelineError) -> any PluginInstance in
        throw .badInput("plugins/broken/init.lua:3: unexpected symbol near '='")
    }
    do {
        _ = try simulate("0s launch", [broken, SaveChanges.descriptor])
        Issue.record("the simulation ran with a plugin that could not be made")
    } catch let error as LifelineError {
        #expect(error.exitCode == 65)
        #expect(error.message.contains("plugins/broken/init.lua:3"))
    } catch {
        Issue.record("unexpected error \(error)")
    }
}

@Test func badInput_pluginWhoseStartRaises_failsWith65() {
    let raising = rawPlugin("raising", kind: .lua) { _ in
        .raised(message: "init.lua:7: attempt to call a nil value", traceback: "stack traceback: ...")
    }
    do {
        _ = try simulate("0s launch", [raising])
        Issue.record("the simulation ran with a plugin that failed to load")
    } catch let error as LifelineError {
        #expect(error.exitCode == 65)
        #expect(error.message.contains("init.lua:7: attempt to call a nil value"))
    } catch {
        Issue.record("unexpected error \(error)")
    }
}

@Test func badInput_swiftPluginWhoseLoadThrows_failsWith65() {
    let p = swiftPlugin("throwing") { _ in throw PluginFailure(text: "no config") }
    do {
        _ = try simulate("0s launch", [p])
        Issue.record("the simulation ran with a plugin that failed to load")
    } catch let error as LifelineError {
        #expect(error.exitCode == 65)
        #expect(error.message.contains("no config"))
    } catch {
        Issue.record("unexpected error \(error)")
    }
}

@Test func badInput_loadFailure_closesThePluginAndLeavesNoTask() throws {
    let closed = Shared(false)
    let p = rawPlugin("half", onClose: { closed.value = true }) { context in
        _ = context.beginBackgroundTask("orphan")
        return .raised(message: "boom", traceback: "")
    }
    let h = Harness([p])
    h.at(0, .launch)
    h.run(until: 1)
    #expect(h.host.loadError?.exitCode == 65)
    #expect(closed.value)
    #expect(h.host.activeTasks.isEmpty, "no task is left dangling")
}

@Test func badInput_handlerRaises_recordsPluginErrorAndOthersStillGetTheEvent() throws {
    let got = Shared<[String]>([])
    let a = swiftPlugin("a-first") { context in
        context.on(.didEnterBackground) { _ in
            got.append("a")
            throw PluginFailure(text: "disk full")
        }
    }
    let b = swiftPlugin("b-second") { context in
        context.on(.didEnterBackground) { _ in got.append("b") }
    }
    let recorder = try simulate("0s launch\n1s background", [a, b])
    #expect(got.value == ["a", "b"])
    #expect(lines(recorder, only: ["pluginError"]) == ["1 pluginError plugin=a-first message=disk full traceback=(Swift code: no traceback)"])
    #expect(recorder.exitCode == 1)
    #expect(recorder.termination == nil)
    #expect(recorder.report()["outcome"] == .string("completed"))
    #expect(eventNames(recorder).last == "suspended", "the app carries on")
}

@Test func badInput_rawHandlerRaises_recordsItsMessageAndTraceback() throws {
    let p = rawPlugin("lua", kind: .lua) { context in
        context.subscribe(.didBecomeActive) { _ in
            .raised(message: "init.lua:4: oops", traceback: "stack traceback:\n\tinit.lua:4")
        }
        return .returned
    }
    let recorder = try simulate("0s launch", [p])
    let error = try #require(recorder.timeline.first { $0.event == "pluginError" })
    #expect(error["plugin"] == .string("lua"))
    #expect(error["message"] == .string("init.lua:4: oops"))
    #expect(error["traceback"] == .string("stack traceback:\n\tinit.lua:4"))
}

@Test func badInput_expirationHandlerRaises_isAPluginErrorAndTheNextHandlerStillRuns() throws {
    let ran = Shared<[String]>([])
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let first = Shared(0)
            first.value = context.beginBackgroundTask("first") {
                context.endBackgroundTask(first.value)
                throw PluginFailure(text: "oops")
            }
            let second = Shared(0)
            second.value = context.beginBackgroundTask("second") {
                ran.append("second")
                context.endBackgroundTask(second.value)
            }
        }
    }
    let recorder = try simulate("0s launch\n0s background", [p])
    #expect(ran.value == ["second"])
    #expect(lines(recorder, only: ["pluginError"]) == ["25 pluginError plugin=p message=oops traceback=(Swift code: no traceback)"])
    #expect(recorder.termination == nil)
    #expect(recorder.exitCode == 1)
}

@Test func badInput_timerCallbackRaises_isAPluginError() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didBecomeActive) { _ in context.after(2) { throw PluginFailure(text: "late failure") } }
    }
    let recorder = try simulate("0s launch", [p])
    #expect(lines(recorder, only: ["pluginError"]).first?.hasPrefix("2 pluginError plugin=p message=late failure") == true)
    #expect(recorder.exitCode == 1)
}

@Test func exitCode_cleanRun_isZero() throws {
    let recorder = try simulate("0s launch\n1s background\n2s foreground", [SaveChanges.descriptor])
    #expect(recorder.exitCode == 0)
    #expect(recorder.pluginErrorCount == 0)
}

@Test func simulation_unterminatedTimers_stopAtLastStepPlus15Minutes() throws {
    let fired = Shared<[Double]>([])
    let p = swiftPlugin("ticker") { context in
        func tick() {
            context.after(60) {
                fired.append(context.now)
                tick()
            }
        }
        context.on(.didFinishLaunching) { _ in tick() }
    }
    _ = try simulate("0s launch\n100s resign\n200s activate", [p])
    // The last step is at 200 s: the run stops at 200 s + 15 min = 1100 s at the latest.
    #expect(fired.value.last == 1080)
    #expect(fired.value.count == 18)
}

@Test func simulation_until_stopsEarlier() throws {
    let fired = Shared<[Double]>([])
    let p = swiftPlugin("ticker") { context in
        func tick() {
            context.after(60) {
                fired.append(context.now)
                tick()
            }
        }
        context.on(.didFinishLaunching) { _ in tick() }
    }
    _ = try simulate("0s launch", [p], until: .seconds(150))
    #expect(fired.value == [60, 120])
}

@Test func simulation_afterTheLastStep_runsUntilTheAppIsSuspended() throws {
    let p = swiftPlugin("p") { context in
        context.on(.didEnterBackground) { _ in
            let id = context.beginBackgroundTask("flush")
            context.after(12) { context.endBackgroundTask(id) }
        }
    }
    let recorder = try simulate("0s launch\n2s background", [p])
    #expect(lines(recorder).suffix(2) == ["14 taskEnded plugin=p task=1 expired=false", "14 suspended"])
}

@Test func timelineEvent_compactTaskAndOperationEvents_readAndSerializeAsTheirFields() {
    let t = HostTime.seconds(2)
    let began = TimelineEvent.task(time: t, event: "taskBegan", plugin: "p", task: 3, name: "sync")
    #expect(began == TimelineEvent(
        time: t, event: "taskBegan", fields: [("plugin", .string("p")), ("task", .int(3)), ("name", .string("sync"))]))
    let ended = TimelineEvent.task(time: t, event: "taskEnded", plugin: "p", task: 3, expired: true)
    #expect(ended.json.serialized() == TimelineEvent(
        time: t, event: "taskEnded", fields: [("plugin", .string("p")), ("task", .int(3)), ("expired", .bool(true))]
    ).json.serialized())
    // Both sides above go through one serializer: the text itself, written by hand.
    #expect(ended.json.serialized() == #"{"t":2,"event":"taskEnded","plugin":"p","task":3,"expired":true}"#)
    #expect(ended["expired"] == .bool(true))
    let finished = TimelineEvent.operation(
        time: t, event: "opFinished", plugin: "p", queue: "q", op: 7, name: nil,
        finished: .init(timedOut: false, cancelled: true, expired: false, failed: false))
    #expect(finished.fields.map(\.0) == ["plugin", "queue", "op", "result"])
    #expect(finished["result"] == .string("cancelled"))
    #expect(finished.humanLine.hasSuffix("opFinished plugin=p queue=q op=7 result=cancelled"))
    var edited = finished
    edited.fields.append(("extra", .int(1)))
    #expect(edited.fields.count == 5)
}
