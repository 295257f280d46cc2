import Foundation
import HTTPTypes
import Lifeline
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The recording a live run writes, checked line by line: that it always parses as a scenario,
/// cut, rotated or not, and that its answers read back as what was received.
@Suite struct RunRecordingTests {
    private func withRecording<T>(_ body: (RunRecording, String) throws -> T) throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/run.scenario"
        return try body(try RunRecording(path: path, profile: .ios13), path)
    }

    private func text(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    @Test func steps_areWrittenAtTheirOffsets_flooredToTheMillisecond() throws {
        try withRecording { recording, path in
            recording.step(.launch, at: HostTime(nanoseconds: 18_900_000))
            recording.step(.background, at: .seconds(1.4399))
            recording.step(.terminate, at: .seconds(12))
            let scenario = try Scenario.parse(try text(path), fileName: path)
            #expect(scenario.entries.map(\.step) == [.launch, .background, .terminate])
            #expect(scenario.entries.map(\.time) == [HostTime(nanoseconds: 18_000_000), .seconds(1.439), .seconds(12)])
            #expect(try scenario.profile() == .ios13)
        }
    }

    @Test func aFigureAFlagChanged_isALimitLine() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var profile = Profile.ios13
        profile.budget = 600
        profile.taskLimit = 3
        _ = try RunRecording(path: folder + "/r.scenario", profile: profile)
        let scenario = try Scenario.parse(try text(folder + "/r.scenario"), fileName: "r.scenario")
        #expect(try scenario.profile() == profile)
    }

    @Test func aStepAfterTheSystemsRelaunch_followsALaunchInTheBackground_soTheFileParses() throws {
        try withRecording { recording, path in
            recording.step(.launch, at: .seconds(0))
            recording.step(.terminate, at: .seconds(1))
            // The host relaunched the app in the background (a transfer's events): the user's
            // foreground is allowed live, not after an ended app in a scenario.
            recording.step(.foreground, at: .seconds(5))
            let scenario = try Scenario.parse(try text(path), fileName: path)
            #expect(scenario.entries.map(\.step) == [.launch, .terminate, .launchInBackground, .foreground])
        }
    }

    @Test func aFileTruncatedByARotator_startsAgainWithTheHeaderAndTheAppsState_andParses() throws {
        try withRecording { recording, path in
            recording.step(.launch, at: .seconds(0))
            recording.step(.background, at: .seconds(2))
            // logrotate's copytruncate: the file is emptied under the run.
            #expect(truncate(path, 0) == 0)
            recording.step(.foreground, at: .seconds(84.2))
            recording.step(.terminate, at: .seconds(90))
            let rotated = try text(path)
            #expect(rotated.hasPrefix(RunRecording.headerStart))
            #expect(!rotated.contains("\0"))
            let scenario = try Scenario.parse(rotated, fileName: path)
            #expect(scenario.entries.map(\.step) == [.launchInBackground, .foreground, .terminate])
            #expect(scenario.entries.map(\.time) == [.zero, .seconds(84.2), .seconds(90)])
        }
    }

    @Test func aRecordingCutInTheMiddleOfALine_parses_withoutThatLine() throws {
        try withRecording { recording, path in
            recording.step(.launch, at: .seconds(0))
            recording.step(.background, at: .seconds(1.5))
            let whole = try text(path)
            for cut in 1..<12 {
                let partial = String(whole.dropLast(cut))
                let scenario = try Scenario.parse(partial, fileName: path)
                #expect(scenario.entries.map(\.step) == [.launch], "cut \(cut) bytes")
            }
        }
        // A scenario a person wrote gets no such leniency: its half line is an error at its line.
        #expect(throws: LifelineError.self) { try Scenario.parse("0s launch\n1.5s backgr", fileName: "mine.scenario") }
    }

    @Test func httpAnswers_readBackAsWhatWasReceived() throws {
        try withRecording { recording, path in
            let request = HTTPRequest(method: "GET", url: "http://127.0.0.1:8080/feed?page=2")
            var headers = HTTPFields()
            headers.append(HTTPField(name: .contentType, value: "application/json"))
            headers.append(HTTPField(name: HTTPField.Name("X-Note")!, value: "a, b # c 100%"))
            recording.http(
                request, sentAt: .seconds(1), after: 0.035,
                .response(HTTPResponse(status: 200, headers: headers, body: Array(#"{"items":[1]}"#.utf8))))
            recording.http(request, sentAt: .seconds(2), after: 0.002, .refused)
            recording.http(request, sentAt: .seconds(3), after: 2, .hang)
            let scenario = try Scenario.parse(try text(path), fileName: path)
            #expect(scenario.network.count == 3)
            #expect(scenario.network.allSatisfy { $0.once })
            #expect(scenario.network[0].target == "127.0.0.1:8080/feed?page=2")
            guard case .recorded(let status, let recorded, let file?, let delay) = scenario.network[0].result else {
                Issue.record("not a recorded answer: \(scenario.network[0].result)")
                return
            }
            #expect(status == 200)
            #expect(abs(delay - 0.035) < 1e-9)
            #expect(recorded.map(\.name) == ["Content-Type", "X-Note"].map { HTTPField.Name($0)!.canonicalName })
            #expect(recorded.last?.value == "a, b # c 100%")
            let body = try String(contentsOfFile: (path as NSString).deletingLastPathComponent + "/" + file, encoding: .utf8)
            #expect(body == #"{"items":[1]}"#)
            #expect(scenario.network[1].result == .refuse(delay: 0.002))
            #expect(scenario.network[2].result == .hang)
        }
    }

    @Test func aRecordingThatCannotBeWritten_isExit70_asAnyOutputFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A folder that is a file: open fails, whoever runs it (root too).
        FileManager.default.createFile(atPath: folder + "/plain", contents: Data())
        do {
            _ = try RunRecording(path: folder + "/plain/run.scenario", profile: .ios13)
            Issue.record("a recording under a file was made")
        } catch {
            #expect(error.exitCode == 70, "\(error.message)")
            #expect(error.message.contains("plain/run.scenario"))
        }
    }

    @Test func aBodyFolderInTheWay_isSaidAtTheStart_notLostAtTheFirstAnswer() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        FileManager.default.createFile(atPath: folder + "/run.scenario.d", contents: Data())
        do {
            _ = try RunRecording(path: folder + "/run.scenario", profile: .ios13)
            Issue.record("a recording whose bodies have nowhere to go was made")
        } catch {
            #expect(error.exitCode == 70)
            #expect(error.message.contains("run.scenario.d"), "\(error.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder + "/run.scenario"), "a refused recording left its file")
    }

    @Test func aBodyThatCannotBeWritten_isSaidOnItsLine_andTheLineStillParses() throws {
        try withRecording { recording, path in
            let bodies = path + ".d"
            try FileManager.default.createDirectory(atPath: bodies, withIntermediateDirectories: true)
            // A folder where the first body file would go: that one write fails.
            try FileManager.default.createDirectory(atPath: bodies + "/1.body", withIntermediateDirectories: true)
            let request = HTTPRequest(method: "GET", url: "http://127.0.0.1:8080/feed")
            recording.http(request, sentAt: .seconds(1), after: 0.01, .response(HTTPResponse(status: 200, body: Array("abc".utf8))))
            let text = try text(path)
            #expect(text.contains("# 3 bytes, the body not written: cannot write"), "\(text)")
            let scenario = try Scenario.parse(text, fileName: path)
            #expect(scenario.network.count == 1)
        }
    }

    @Test func aRecordingNamedWithABlankOrAHash_namesItsBodiesSoThatTheLineParses() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/my run #1 100%.scenario"
        let recording = try RunRecording(path: path, profile: .ios13)
        recording.http(
            HTTPRequest(method: "GET", url: "http://127.0.0.1:8080/feed"), sentAt: .seconds(1), after: 0.01,
            .response(HTTPResponse(status: 200, body: Array("abc".utf8))))
        let scenario = try Scenario.parse(try text(path), fileName: path)
        guard case .recorded(_, _, let file?, _) = scenario.network.first?.result else {
            Issue.record("no recorded body: \(scenario.network)")
            return
        }
        #expect(file == "my run #1 100%.scenario.d/1.body")
        #expect(try String(contentsOfFile: folder + "/" + file, encoding: .utf8) == "abc")
    }

    @Test func aTaskPolicyAFlagSet_isATaskPolicyLine_soTheReplayRunsScheduledTasksAsLive() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (n, policy) in [TaskPolicy.manual, .delayed(900), .earliest].enumerated() {
            _ = try RunRecording(path: folder + "/r\(n).scenario", profile: .ios13, taskPolicy: policy)
            let scenario = try Scenario.parse(try text(folder + "/r\(n).scenario"), fileName: "r.scenario")
            #expect((scenario.taskPolicy ?? .earliest) == policy)
        }
    }

    @Test func anEarlierRecording_isReplacedByTheFirstLine_notByARunThatNeverStarted() throws {
        try withRecording { first, path in
            first.step(.launch, at: .seconds(0))
            first.step(.terminate, at: .seconds(5))
            let earlier = try text(path)
            // A second run on that file that could not start (its state dir serves another run).
            let refused = try RunRecording(path: path, profile: .ios13)
            #expect(try text(path) == earlier)
            _ = refused
            let second = try RunRecording(path: path, profile: .ios13)
            second.step(.launch, at: .seconds(1))
            let replaced = try text(path)
            #expect(replaced.hasPrefix(RunRecording.headerStart), "\(replaced)")
            #expect(try Scenario.parse(replaced, fileName: path).entries.map(\.step) == [.launch])
        }
    }

    @Test func aPushWhosePayloadHoldsAHash_isWrittenSoThatItParses_withTheSamePayload() throws {
        try withRecording { recording, path in
            let payload = #"{"note":"issue #12, see #13","n":1}"#
            recording.step(.launch, at: .seconds(0))
            recording.step(.background, at: .seconds(1))
            recording.step(.push(payload: payload), at: .seconds(2))
            let scenario = try Scenario.parse(try text(path), fileName: path)
            guard case .push(let written)? = scenario.entries.last?.step else {
                Issue.record("no push: \(scenario.entries)")
                return
            }
            #expect(try JSONValue.parse(written) == JSONValue.parse(payload))
        }
    }
}
