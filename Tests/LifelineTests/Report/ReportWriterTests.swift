import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules

// The streamed report (`Recorder.writeReport`) writes the timeline event by event, without the
// JSON value `report()` builds. Both must give the same bytes for every kind of event and field.

/// A recorder holding each kind of event: fields of every JSON kind (nested ones too), task and
/// operation events with and without their optional fields, strings that need escaping, times
/// before zero and between milliseconds.
private func everyKindOfEvent(terminated: Bool) -> Recorder {
    let recorder = Recorder(profile: .ios13)
    recorder.notePlugin(name: "sync \"quoted\"", kind: "lua", status: "loaded")
    recorder.notePlugin(name: "ünïcode ✓", kind: "swift", status: "failed")
    let times: [Int64] = [0, 1, 499_999, 500_000, 1_000_000, 10_000_000, 100_000_000, 1_005_000_000, 1_050_000_000, -2_500_000_000, 27_000_000_000]
    for (i, ns) in times.enumerated() {
        let t = HostTime(nanoseconds: ns)
        recorder.record(.task(time: t, event: "taskBegan", plugin: "p\(i)", task: i, name: i % 2 == 0 ? "name \(i)\n\t\"x\"\\" : nil))
        recorder.record(.task(time: t, event: "taskEnded", plugin: "p", task: -i, name: nil, expired: i % 3 == 0 ? nil : i % 2 == 0))
        recorder.record(.operation(time: t, event: "opStarted", plugin: "q", queue: "main\u{1}", op: i, name: i % 2 == 0 ? nil : "op"))
        recorder.record(.operation(
            time: t, event: "opFinished", plugin: "q", queue: "main", op: i, name: "ö",
            finished: .init(timedOut: i == 1, cancelled: i == 2, expired: i == 3, failed: i == 4)))
        recorder.record(TimelineEvent(
            time: t, event: "log",
            fields: [("plugin", .string("p")), ("level", .string("info")), ("message", .string("\u{7f}\u{1f}é😀"))]))
    }
    // Fields of the table's events may hold any JSON value: nested ones are written over lines.
    recorder.record(TimelineEvent(
        time: .zero, event: "log",
        fields: [("plugin", .array([.int(1), .null, .bool(false), .object([("k", .number("1.5"))])])), ("message", .object([]))]))
    recorder.record(TimelineEvent(time: .zero, event: "log", fields: [("plugin", .array([])), ("message", .int(.min))]))
    if terminated {
        let termination = Termination(kind: .watchdog, reason: "late", plugin: "p", time: .zero, traceback: "stack\ntraceback")
        recorder.noteTermination(termination)
        recorder.setExpectations(.array([.object([("line", .int(3)), ("passed", .bool(true))])]))
    }
    return recorder
}

private func streamed(_ recorder: Recorder) throws -> [UInt8] {
    var bytes: [UInt8] = []
    try recorder.writeReport { bytes += $0 }
    return bytes
}

@Test(arguments: [false, true])
func report_streamed_isByteForByteTheReportsText(terminated: Bool) throws {
    let recorder = everyKindOfEvent(terminated: terminated)
    let expected = Array(RunOutput.text(of: recorder.report()).utf8)
    let got = try streamed(recorder)
    #expect(got.count == expected.count)
    #expect(got == expected, "\(String(decoding: got, as: UTF8.self))")
}

@Test func report_streamed_withNoEvents_isTheReportsText() throws {
    let recorder = Recorder(profileName: "custom")
    #expect(try streamed(recorder) == Array(RunOutput.text(of: recorder.report()).utf8))
}

@Test func report_streamedToAFile_replacesItWithTheSameBytes_inChunks() throws {
    let recorder = Recorder(profile: .ios13)
    // About 60 bytes an event: several 1 MiB chunks.
    for i in 0..<60_000 {
        recorder.record(.task(time: HostTime(nanoseconds: Int64(i) * 1_000_000), event: "taskBegan", plugin: "p", task: i, name: "t"))
    }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let path = folder + "/report.json"
    try "old".write(toFile: path, atomically: false, encoding: .utf8)
    var chunks = 0
    try recorder.writeReport { _ in chunks += 1 }
    #expect(chunks > 2)
    try RunOutput.writeReport(recorder, to: path)
    #expect(FileManager.default.contents(atPath: path) == Data(RunOutput.text(of: recorder.report()).utf8))
    #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["report.json"], "no temporary file left")
}

@Test func report_streamedIntoAMissingFolder_failsWithWhy() {
    let recorder = Recorder(profile: .ios13)
    #expect(throws: LifelineError.self) { try RunOutput.writeReport(recorder, to: "/nonexistent-folder/report.json") }
    do {
        try RunOutput.writeReport(recorder, to: "/nonexistent-folder/report.json")
    } catch {
        #expect(error.message == "cannot write '/nonexistent-folder/report.json': No such file or directory")
    }
}

@Test func reportNumber_seconds_dropsTrailingZerosAndKeepsLeadingOnes() {
    let cases: [(Int64, String)] = [
        (0, "0"), (1, "0.001"), (10, "0.01"), (100, "0.1"), (120, "0.12"), (1005, "1.005"), (1050, "1.05"),
        (1500, "1.5"), (27_000, "27"), (-2500, "-2.5"), (-1, "-0.001"), (123_456_789, "123456.789"),
    ]
    for (ms, text) in cases {
        #expect(ReportNumber.seconds(HostTime(nanoseconds: ms * 1_000_000)) == text, "\(ms) ms")
    }
}

// JSONText copies a string whole when a word-at-a-time check finds nothing to escape, and falls
// back to a byte at a time when it does: every length around the word size, with the byte that
// needs an escape at every place, must give what a plain escaper gives.
@Test func jsonText_string_escapesTheSameAtEveryLengthAndPlace() {
    func plain(_ s: String) -> String {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case UInt8(ascii: "\n"): out += Array("\\n".utf8)
            case UInt8(ascii: "\r"): out += Array("\\r".utf8)
            case UInt8(ascii: "\t"): out += Array("\\t".utf8)
            case ..<0x20: out += Array(("\\u00" + (b < 0x10 ? "0" : "") + String(b, radix: 16)).utf8)
            default: out.append(b)
            }
        }
        return String(decoding: out + [UInt8(ascii: "\"")], as: UTF8.self)
    }
    let specials: [Character] = ["\"", "\\", "\n", "\u{1}", "\u{1f}"]
    let harmless: [Character] = ["a", " ", "~", "\u{7f}", "é", "!", "#", "]", "[", "{"]
    for length in 0...40 {
        let clean = String((0..<length).map { harmless[$0 % harmless.count] })
        #expect(JSONValue.string(clean).serialized() == plain(clean), "length \(length)")
        for place in 0..<length {
            for special in specials {
                var characters = Array(clean)
                characters[place] = special
                let s = String(characters)
                #expect(JSONValue.string(s).serialized() == plain(s), "length \(length), \(special) at \(place)")
            }
        }
    }
}

@Test func jsonText_integers_atEveryNumberOfDigits() {
    var values: [Int64] = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, .max, .min, .min + 1]
    var power: Int64 = 1
    for _ in 0..<18 {
        power *= 10
        values += [power - 1, power, power + 1, -power]
    }
    for v in values {
        #expect(JSONValue.int(v).serialized() == String(v), "\(v)")
    }
}

/// A timeline long enough to be formatted in segments on the helper threads, with every kind of
/// event, some in each segment.
private func longTimeline(events: Int) -> Recorder {
    let kinds = everyKindOfEvent(terminated: false)
    let pattern = kinds.timeline
    let recorder = Recorder(profile: .ios13)
    recorder.notePlugin(name: "sync", kind: "lua", status: "loaded")
    for i in 0..<events {
        var event = pattern[i % pattern.count]
        event.time = HostTime(nanoseconds: Int64(i) * 1_000_000)
        recorder.record(event)
    }
    return recorder
}

@Test func report_streamed_inSegments_isByteForByteTheReportsText() throws {
    // Lengths about the segment size and its multiples: the first and last segment, a segment
    // cut one event short or long, and more segments than slots.
    let segment = TimelineWriter.segment
    for count in [2 * segment, 2 * segment + 1, 3 * segment - 1, 3 * segment, 9 * segment + 7] {
        let recorder = longTimeline(events: count)
        let expected = Array(RunOutput.text(of: recorder.report()).utf8)
        let got = try streamed(recorder)
        #expect(got.count == expected.count, "\(count) events")
        #expect(got == expected, "\(count) events")
    }
}

@Test func report_streamed_inSegments_stopsAtTheFirstFailedWrite() {
    let recorder = longTimeline(events: 10 * TimelineWriter.segment)
    var calls = 0
    #expect(throws: LifelineError.self) {
        try recorder.writeReport { _ throws(LifelineError) in
            calls += 1
            if calls == 3 { throw .internalError("disk full") }
        }
    }
    #expect(calls == 3, "no write after the one that failed")
    // The recorder is free again: the helpers are gone and its lock released.
    #expect(recorder.timeline.count == 10 * TimelineWriter.segment)
}

@Test(arguments: [0, 1, 2, 5])
func timeline_inSegments_isTheSameWithAnyNumberOfHelpers(helpers: Int) throws {
    // With none (no thread could be made), the caller formats every segment itself.
    let recorder = longTimeline(events: 5 * TimelineWriter.segment + 3)
    let events = recorder.timeline
    func text(helpers: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var text = JSONText()
        try events.withUnsafeBufferPointer { events throws(LifelineError) in
            try TimelineWriter.write(events, through: &text, helpers: helpers) { bytes += $0 }
        }
        text.withBytes { bytes += $0 }
        return bytes
    }
    var expected = JSONText()
    events.withUnsafeBufferPointer { $0.format($0.indices, into: &expected) }
    #expect(try text(helpers: helpers) == expected.withBytes { Array($0) })
}
