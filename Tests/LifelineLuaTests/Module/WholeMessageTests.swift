import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Error messages keep every byte, NUL included, whatever path reports them; and the cut of a long
// message or log line falls between characters, so valid text gains no U+FFFD.

@Test(arguments: [
    // A handler's error: the message handler of every protected call.
    "lifeline.on('didFinishLaunching', function() error('a\\0b', 0) end)",
    // A background work's error: the work's traceback (lifeline_traceback_of).
    "lifeline.background('w', function() error('a\\0b', 0) end)",
    // A queue's operation runs in a host coroutine too.
    "lifeline.queue('q'):add(function() error('a\\0b', 0) end)",
])
func errorWithNUL_isReportedWhole(_ source: String) throws {
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    let errors = pluginErrors(recorder)
    #expect(!errors.isEmpty, "no error reported")
    #expect(errors.contains { $0.message.contains("a\u{0}b") }, "\(errors.map(\.message))")
    #expect(!errors.contains { $0.message == "a" }, "\(errors.map(\.message))")
}

@Test func errorWithNUL_atLoad_failsTheLoadWithTheWholeMessage() throws {
    do {
        _ = try simulate(plugins(["p": "error('a\\0b', 0)"]))
        Issue.record("the load did not fail")
    } catch {
        #expect("\(error)".contains("a\u{0}b"), "\(Array("\(error)".utf8.suffix(16)))")
    }
}

@Test func errorWithNUL_keepsItsTraceback() throws {
    let recorder = try simulate(plugins(["p": "lifeline.on('didFinishLaunching', function() error('x\\0y') end)"]))
    let error = try #require(pluginErrors(recorder).first)
    #expect(error.message.hasSuffix("x\u{0}y"), "\(error.message)")
    #expect(error.traceback.contains("stack traceback:"), "\(error.traceback)")
}

/// 4,095 ASCII bytes, then a 2-, 3- or 4-byte character across the 4,096-byte cut.
@Test(arguments: ["é", "€", "𝄞"])
func logLine_cutAtTheLimit_fallsBetweenCharacters(_ character: String) throws {
    let escaped = character.utf8.map { "\\\($0)" }.joined()
    let logs = LogLines()
    _ = try simulate(plugins(["p": "print(string.rep('a', 4095) .. '\(escaped)' .. 'tail')"]), logs: logs)
    let line = try #require(logs.lines.first { $0.hasPrefix("info: aaa") }, "\(logs.lines)")
    #expect(!line.contains("\u{FFFD}"), "the cut split the character")
    #expect(line == "info: " + String(repeating: "a", count: 4095) + "…", "\(line.suffix(8))")
}

@Test(arguments: ["é", "€", "𝄞"])
func errorMessage_cutAtTheLimit_fallsBetweenCharacters(_ character: String) throws {
    let escaped = character.utf8.map { "\\\($0)" }.joined()
    let recorder = try simulate(
        plugins(["p": "lifeline.on('didFinishLaunching', function() error(string.rep('a', 4095) .. '\(escaped)tail', 0) end)"]))
    let error = try #require(pluginErrors(recorder).first)
    #expect(!error.message.contains("\u{FFFD}"), "the cut split the character")
    #expect(error.message.hasPrefix(String(repeating: "a", count: 4095)), "\(error.message.prefix(8))")
}

@Test func logLine_ofWholeCharacters_underTheLimit_isKeptWhole() throws {
    let logs = LogLines()
    // 2,048 two-byte characters: exactly 4,096 bytes, no cut.
    _ = try simulate(plugins(["p": "print(string.rep('\\195\\169', 2048))"]), logs: logs)
    #expect(logs.lines.contains("info: " + String(repeating: "é", count: 2048)), "\(logs.lines.map { $0.prefix(20) })")
}
