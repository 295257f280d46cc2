import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules

// Every parser of the host is linear in its input (docs/guarantees.md, "Size limits"): each is fed
// a 1 MiB worst case of its own (one huge token, many tiny lines, deep nesting, many keys, long
// strings with escapes, long unknown names for "did you mean") and must be done within a bound
// generous for a loaded CI machine and a debug build. A parser whose time grows with the square
// of its input takes minutes on these, not seconds.
//
// Set LIFELINE_BOUNDS_TIMES=1 to print each case's time.

/// The most a worst case may take, in seconds. A debug build reads a Swift `Character` in about a
/// microsecond, so the slowest linear cases here take 1 to 3.5 s on a 2-core machine under a load of
/// 5 (a scenario of 116,000 step lines is the slowest). The quadratic readers these cases caught took
/// minutes or hours on the same inputs, so 10 s tells the two apart without failing on a busy machine.
private let bound = 10.0
/// The size of every worst case: the largest scenario or plugin.toml the host reads.
private let mebibyte = 1 << 20

/// `unit` repeated to fill about `bytes` (never more), with `prefix` before and `suffix` after.
private func filled(_ unit: String, prefix: String = "", suffix: String = "", bytes: Int = mebibyte) -> String {
    let room = bytes - prefix.utf8.count - suffix.utf8.count
    return prefix + String(repeating: unit, count: room / unit.utf8.count) + suffix
}

/// Runs `body` (a parse that may throw, which is its answer too) and checks it was done within
/// `bound`. Returns the error it threw, if any, so the case can check it answered as it should.
@discardableResult
private func withinBound(
    _ name: String, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) -> Error? {
    let clock = ContinuousClock()
    var failure: Error?
    let elapsed = clock.measure {
        do { try body() } catch { failure = error }
    }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    if ProcessInfo.processInfo.environment["LIFELINE_BOUNDS_TIMES"] != nil {
        print("bounds: \(name): \(String(format: "%.3f", seconds)) s")
    }
    #expect(seconds < bound, "\(name) took \(seconds) s", sourceLocation: sourceLocation)
    return failure
}

/// The message of a `LifelineError`, or a description of any other error.
private func message(_ error: Error?) -> String {
    (error as? LifelineError)?.message ?? error.map { "\($0)" } ?? "no error"
}

// MARK: - Scenario files

struct ScenarioCase: Sendable, CustomTestStringConvertible {
    var name: String
    var text: @Sendable () -> String
    /// Whether it parses; when not, a part of the message it must fail with.
    var says: String?
    var testDescription: String { name }
}

@Test(arguments: [
    ScenarioCase(name: "many step lines", text: { filled("0s fetch\n") }),
    ScenarioCase(name: "many empty lines", text: { filled("\n") }),
    ScenarioCase(name: "many CRLF lines", text: { filled("\r\n") }),
    ScenarioCase(name: "many comment lines", text: { filled("#\n") }),
    ScenarioCase(name: "one comment", text: { filled("x", prefix: "#") }),
    ScenarioCase(name: "one huge unknown action", text: { filled("a", prefix: "0s ") }, says: "unknown action"),
    ScenarioCase(name: "one line of many words", text: { filled("a ", prefix: "0s ") }, says: "unknown action"),
    ScenarioCase(name: "blanks between time and action", text: { filled(" ", prefix: "0s", suffix: "launch") }),
    ScenarioCase(name: "one huge time", text: { filled("1", suffix: "ms fetch") }, says: "too far"),
    ScenarioCase(name: "one huge fraction", text: { filled("1", prefix: "0.", suffix: "s fetch") }),
    ScenarioCase(name: "many uses names", text: { filled(" a,", prefix: "uses") }),
    ScenarioCase(name: "one huge run-tasks identifier", text: { filled("a", prefix: "0s run-tasks ") }),
    ScenarioCase(name: "a push with a long JSON payload", text: { filled("1,", prefix: "0s push {\"a\":[", suffix: "1]}") }),
    ScenarioCase(name: "a push with deep JSON", text: { filled("[", prefix: "0s push {\"a\":") }, says: "JSON object"),
    ScenarioCase(name: "a push with escapes", text: { filled("\\u00e9", prefix: "0s push {\"a\":\"", suffix: "\"}") }),
    ScenarioCase(name: "a push followed by blanks", text: { filled(" ", prefix: "0s push {}", suffix: "x") }, says: "JSON object"),
    ScenarioCase(name: "many task-policy words", text: { filled("a ", prefix: "task-policy ") }, says: "one policy"),
]) func scenario_worstCase_isLinear(_ c: ScenarioCase) {
    let text = c.text()
    let error = withinBound("scenario: \(c.name)") { _ = try Scenario.parse(text, fileName: "t.scenario") }
    if let says = c.says {
        #expect(message(error).contains(says), "\(message(error).prefix(300))")
    } else {
        #expect(error == nil, "\(message(error).prefix(300))")
    }
}

// The scenario's `http` lines (NetworkRule) and their bodies.
@Test(arguments: [
    ScenarioCase(name: "many http lines", text: { filled("0s http GET * -> 200 x\n") }),
    ScenarioCase(name: "one huge body", text: { filled("x", prefix: "0s http GET * -> 200 ") }),
    ScenarioCase(name: "a body of blanks", text: { filled(" ", prefix: "0s http GET * -> 200 x", suffix: "x in 1s") }),
    ScenarioCase(name: "a body of commas", text: { filled(",x", prefix: "0s http GET * -> 200 ") }),
    ScenarioCase(name: "a body of commas and blanks", text: { filled(", ", prefix: "0s http GET * -> 200 x") },
        says: "an answer of the sequence is empty"),
    ScenarioCase(name: "many answers", text: { filled(", 200", prefix: "0s http GET * -> 200") }),
    ScenarioCase(name: "many answers with delays", text: { filled(", 200 x in 1s", prefix: "0s http GET * -> 200") }),
    ScenarioCase(name: "a JSON body of strings", text: { filled("\"a\\\",\",", prefix: "0s http GET * -> 200 [", suffix: "1]") }),
    ScenarioCase(name: "a JSON body of brackets", text: { filled("[", prefix: "0s http GET * -> 200 ", suffix: ", 200") }),
    ScenarioCase(name: "a huge target", text: { filled("*a", prefix: "0s http GET h/", suffix: " -> 200") }),
    ScenarioCase(name: "a huge method", text: { filled("A", prefix: "0s http ", suffix: " * -> 200") }),
    ScenarioCase(name: "a huge port", text: { filled("1", prefix: "0s http GET h:", suffix: "/ -> 200") }, says: "is not a port"),
    ScenarioCase(name: "a huge size", text: { filled("1", prefix: "0s http GET * -> 200 size=") }, says: "is not a size"),
    ScenarioCase(name: "many size words", text: { filled(" size=1", prefix: "0s http GET * -> 200") }, says: "unexpected"),
]) func scenario_httpLines_worstCase_isLinear(_ c: ScenarioCase) {
    scenario_worstCase_isLinear(c)
}

// `expect` lines, parsed.
@Test(arguments: [
    ScenarioCase(name: "many expect lines", text: { filled("expect pluginError\n") }),
    ScenarioCase(name: "many fields", text: {
        var line = "expect log"
        var n = 0
        while line.utf8.count < mebibyte - 20 {
            line += " f\(n)=1"
            n += 1
        }
        return line
    }),
    ScenarioCase(name: "a quoted text of escapes", text: { filled("\\\"", prefix: "expect log contains \"", suffix: "\"") }),
    ScenarioCase(name: "many quoted words", text: { filled(" \"a\"", prefix: "expect log") }, says: "a quoted text goes after"),
    ScenarioCase(name: "a huge event name", text: { filled("a", prefix: "expect ") }),
    ScenarioCase(name: "a huge unclosed quote", text: { filled("a", prefix: "expect log contains \"") }, says: "not closed"),
    ScenarioCase(name: "a huge bad event name", text: { filled("-", prefix: "expect ") }, says: "not an event name"),
    ScenarioCase(name: "a huge time", text: { filled("1", prefix: "expect log at ", suffix: "s") }, says: "too far"),
    ScenarioCase(name: "many blanks", text: { filled(" \t", prefix: "expect", suffix: "log") }),
]) func scenario_expectLines_worstCase_isLinear(_ c: ScenarioCase) {
    scenario_worstCase_isLinear(c)
}

// `expect` lines, checked: a misspelt name gets a "did you mean", whose edit distance costs the
// product of the two lengths unless the lengths are far apart.
@Test(arguments: [
    ScenarioCase(name: "a huge unknown event name", text: { filled("a", prefix: "expect ") }),
    ScenarioCase(name: "a huge unknown field name", text: { filled("a", prefix: "expect log ", suffix: "=1") }),
    ScenarioCase(name: "a huge value outside the field's values", text: { filled("a", prefix: "expect no terminated kind=") }),
    ScenarioCase(name: "a huge unknown termination field", text: { filled("a", prefix: "expect termination watchdog ", suffix: "=1") }),
    ScenarioCase(name: "a near miss of a huge name", text: { filled("a", prefix: "expect taskEnded name=") }),
]) func expectCheck_hugeNames_isLinear(_ c: ScenarioCase) throws {
    let expectation = try Lifeline.Expectation.parse(rawLine: Substring(c.text()), line: 1, at: "t.scenario:1")
    let report = JSONValue.object([
        ("outcome", .string("completed")), ("termination", .null),
        ("timeline", .array([.object([("t", .int(1)), ("event", .string("taskEnded")), ("name", .string("save"))])])),
    ])
    var results: [ExpectationResult] = []
    withinBound("expect check: \(c.name)") {
        results = Lifeline.Expectation.check([expectation], report: report, fileName: "t.scenario")
    }
    #expect(results.first?.passed == false)
}

/// The "did you mean" still finds a near name, and says nothing for a far one.
@Test func expectCheck_closestName_keepsItsSuggestions() {
    #expect(Lifeline.Expectation.closestName(to: "taskEnd", among: ["taskBegan", "taskEnded"]) == "taskEnded")
    #expect(Lifeline.Expectation.closestName(to: "TASKENDED", among: ["taskBegan", "taskEnded"]) == "taskEnded")
    #expect(Lifeline.Expectation.closestName(to: "x", among: ["ab"]) == "ab")
    #expect(Lifeline.Expectation.closestName(to: "xyz", among: ["taskEnded"]) == nil)
    #expect(Lifeline.Expectation.closestName(to: String(repeating: "taskEnded", count: 1000), among: ["taskEnded"]) == nil)
}

// MARK: - plugin.toml (and --config values, which are read as `v = VALUE`)

/// Each a whole plugin.toml; `says` as for scenarios.
@Test(arguments: [
    ScenarioCase(name: "many config keys", text: {
        var text = "[config]\n"
        var n = 0
        while text.utf8.count < mebibyte - 20 {
            text += "k\(n)=1\n"
            n += 1
        }
        return text
    }),
    ScenarioCase(name: "an inline table of many keys", text: {
        var text = "[config]\nt = {"
        var n = 0
        while text.utf8.count < mebibyte - 20 {
            text += "k\(n)=1,"
            n += 1
        }
        return text + "z=1}\n"
    }),
    ScenarioCase(name: "many dotted keys", text: {
        var text = "[config]\n"
        var n = 0
        while text.utf8.count < mebibyte - 20 {
            text += "a.b.k\(n)=1\n"
            n += 1
        }
        return text
    }),
    ScenarioCase(name: "an array of many numbers", text: { filled("1,", prefix: "[config]\na = [", suffix: "1]\n") }),
    ScenarioCase(name: "an array of many floats", text: { filled("1.5e3,", prefix: "[config]\na = [", suffix: "1]\n") }),
    ScenarioCase(name: "an array of many hex numbers", text: { filled("0x1_f,", prefix: "[config]\na = [", suffix: "1]\n") }),
    ScenarioCase(name: "an array of many strings", text: { filled("'a',", prefix: "[config]\na = [", suffix: "1]\n") }),
    ScenarioCase(name: "an array of many empty arrays", text: { filled("[],", prefix: "[config]\na = [", suffix: "1]\n") }),
    ScenarioCase(name: "many arrays of tables", text: { filled("[[config.a]]\n") }),
    ScenarioCase(name: "many tables", text: {
        var text = ""
        var n = 0
        while text.utf8.count < mebibyte - 30 {
            text += "[config.t\(n)]\n"
            n += 1
        }
        return text
    }),
    ScenarioCase(name: "one string of escapes", text: { filled("\\u00e9", prefix: "[config]\na = \"", suffix: "\"\n") }),
    ScenarioCase(name: "one literal string", text: { filled("a", prefix: "[config]\na = '", suffix: "'\n") }),
    ScenarioCase(name: "a multi-line string of many lines", text: { filled("a\\\n  ", prefix: "[config]\na = \"\"\"\n", suffix: "\"\"\"\n") }),
    ScenarioCase(name: "a multi-line string of quotes", text: { filled("a''", prefix: "[config]\na = '''", suffix: "'''\n") }),
    ScenarioCase(name: "one huge integer", text: { filled("1", prefix: "[config]\na = ", suffix: "\n") }, says: "out of range"),
    ScenarioCase(name: "one huge float", text: { filled("1", prefix: "[config]\na = 0.", suffix: "\n") }),
    ScenarioCase(name: "one huge number with underscores", text: { filled("1_", prefix: "[config]\na = ", suffix: "1\n") }, says: "out of range"),
    ScenarioCase(name: "one huge bare key", text: { filled("k", prefix: "[config]\n", suffix: " = 1\n") }),
    ScenarioCase(name: "one huge bare value", text: { filled("x", prefix: "[config]\na = ", suffix: "\n") }, says: "must be quoted"),
    ScenarioCase(name: "one huge comment", text: { filled("x", prefix: "#", suffix: "\n") }),
    ScenarioCase(name: "deep arrays", text: { filled("[", prefix: "[config]\na = ") }, says: "nested too deeply"),
    ScenarioCase(name: "deep inline tables", text: { filled("{a=", prefix: "[config]\na = ") }, says: "nested too deeply"),
    ScenarioCase(name: "a key of many parts", text: { filled("a.", prefix: "[config]\n", suffix: "a = 1\n") }, says: "too many parts"),
    ScenarioCase(name: "blank lines", text: { filled(" \t\r\n", prefix: "[config]\n") }),
    ScenarioCase(name: "not UTF-8 at the end", text: { filled("#\n", suffix: "\u{FFFF}") }),
]) func pluginTOML_worstCase_isLinear(_ c: ScenarioCase) {
    var bytes = Array(c.text().utf8)
    if c.name == "not UTF-8 at the end" { bytes[bytes.count - 1] = 0xFF }
    let error = withinBound("plugin.toml: \(c.name)") {
        _ = try PluginManifest.parse(utf8: bytes, fileName: "plugin.toml")
    }
    if let says = c.says {
        #expect(message(error).contains(says), "\(message(error).prefix(300))")
    } else if c.name == "not UTF-8 at the end" {
        #expect(message(error).contains("not valid UTF-8"), "\(message(error).prefix(300))")
    } else {
        #expect(error == nil, "\(message(error).prefix(300))")
    }
}

// MARK: - JSON (the store's values, push payloads, lifeline test's reports)

@Test(arguments: [
    ScenarioCase(name: "an array of many numbers", text: { filled("1,", prefix: "[", suffix: "1]") }),
    ScenarioCase(name: "an array of many floats", text: { filled("-1.5e-3,", prefix: "[", suffix: "1]") }),
    ScenarioCase(name: "an object of many keys", text: { filled("\"k\":1,", prefix: "{", suffix: "\"z\":1}") }),
    ScenarioCase(name: "one string of escapes", text: { filled("\\u00e9", prefix: "\"", suffix: "\"") }),
    ScenarioCase(name: "one string of surrogate pairs", text: { filled("\\ud83d\\ude00", prefix: "\"", suffix: "\"") }),
    ScenarioCase(name: "one string of short escapes", text: { filled("\\n", prefix: "\"", suffix: "\"") }),
    ScenarioCase(name: "one long string", text: { filled("a", prefix: "\"", suffix: "\"") }),
    ScenarioCase(name: "one huge integer", text: { filled("1") }, says: "invalid value"),
    ScenarioCase(name: "one huge fraction", text: { filled("1", prefix: "0.") }),
    ScenarioCase(name: "one huge exponent", text: { filled("1", prefix: "1e") }, says: "invalid value"),
    ScenarioCase(name: "deep arrays", text: { filled("[") }, says: "nested too deep"),
    ScenarioCase(name: "deep objects", text: { filled("{\"a\":") }, says: "nested too deep"),
    ScenarioCase(name: "blanks", text: { filled(" \t\r\n", suffix: "1") }),
    ScenarioCase(name: "many nulls", text: { filled("null,", prefix: "[", suffix: "1]") }),
    ScenarioCase(name: "an unterminated string", text: { filled("a", prefix: "\"") }, says: "unterminated string"),
]) func json_worstCase_isLinear(_ c: ScenarioCase) {
    let text = c.text()
    let error = withinBound("JSON: \(c.name)") { _ = try JSONValue.parse(text) }
    let said = error.map { "\($0)" } ?? "no error"
    if let says = c.says {
        #expect(said.contains(says), "\(said.prefix(300))")
    } else {
        #expect(error == nil, "\(said.prefix(300))")
    }
}

// MARK: - The steps a ctl line or a scenario line names

@Test(arguments: [
    ScenarioCase(name: "a push with a long payload", text: { filled("1,", prefix: "push {\"a\":[", suffix: "1]}") }),
    ScenarioCase(name: "a push with deep JSON", text: { filled("[", prefix: "push {\"a\":") }, says: "JSON object"),
    ScenarioCase(name: "a push and blanks", text: { filled(" ", prefix: "push {}", suffix: "x") }, says: "JSON object"),
    ScenarioCase(name: "many words", text: { filled("a ") }),
    ScenarioCase(name: "a huge identifier", text: { filled("a", prefix: "run-tasks ") }),
    ScenarioCase(name: "charging and many blanks", text: { filled(" ", prefix: "charging", suffix: "on") }),
]) func step_worstCase_isLinear(_ c: ScenarioCase) {
    let text = c.text()
    let error = withinBound("step: \(c.name)") { _ = try Step.parse(Substring(text)) }
    let said = (error as? StepSyntaxError)?.message ?? error.map { "\($0)" } ?? "no error"
    if let says = c.says {
        #expect(said.contains(says), "\(said.prefix(300))")
    } else {
        #expect(error == nil, "\(said.prefix(300))")
    }
}

// MARK: - Matching a request against the scenario's targets

struct GlobCase: Sendable, CustomTestStringConvertible {
    var name: String
    var pattern: @Sendable () -> String
    var text: @Sendable () -> String
    var matches: Bool
    var testDescription: String { name }
}

@Test(arguments: [
    GlobCase(name: "one star, a long literal", pattern: { filled("a", prefix: "*", suffix: "b", bytes: mebibyte / 2) },
        text: { filled("a") }, matches: false),
    GlobCase(name: "a long literal between stars", pattern: { filled("a", prefix: "*", suffix: "b*", bytes: mebibyte / 2) },
        text: { filled("a") }, matches: false),
    GlobCase(name: "many stars, a match", pattern: { filled("*a", suffix: "*") }, text: { filled("a") }, matches: true),
    GlobCase(name: "many stars, no match", pattern: { filled("*a", suffix: "*b*") }, text: { filled("a") }, matches: false),
    GlobCase(name: "a long prefix and suffix", pattern: { filled("ab", suffix: "*") + filled("ab") },
        text: { filled("ab") + filled("ab") }, matches: true),
]) func glob_worstCase_isLinear(_ c: GlobCase) {
    let pattern = c.pattern(), text = c.text()
    var result: Bool?
    withinBound("glob: \(c.name)") { result = Glob.matches(pattern, text) }
    #expect(result == c.matches)
}

@Test(arguments: [
    ("", "", true), ("", "a", false), ("*", "", true), ("*", "abc", true), ("a*", "abc", true), ("a*", "ba", false),
    ("*c", "abc", true), ("*c", "abd", false), ("a*c", "ac", true), ("a*c", "abbbc", true), ("a*a", "a", false),
    ("a*b*c", "aXbYc", true), ("a*b*c", "aXcYb", false), ("*b*", "abc", true), ("**", "x", true), ("a**b", "ab", true),
    ("*ab*ab*", "abab", true), ("*ab*ab*", "aba", false), ("*aab", "aaab", true), ("abc", "abc", true),
    ("abc", "abcd", false), ("h:*/x", "h:8080/x", true), ("*.example.com", "api.example.com", true),
    ("*.example.com", "example.com", false),
] as [(String, String, Bool)]) func glob_matches_asBefore(_ pattern: String, _ text: String, _ expected: Bool) {
    #expect(Glob.matches(pattern, text) == expected)
}
