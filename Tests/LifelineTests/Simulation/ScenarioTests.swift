import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// SPEC 2.2: scenario files. Every bad step is reported with file:line before anything runs.

/// The message parsing `text` as t.scenario fails with, or nil when it parses.
private func parseError(_ text: String) -> LifelineError? {
    do {
        _ = try Scenario.parse(text, fileName: "t.scenario")
        return nil
    } catch {
        return error
    }
}

struct TimeCase: Sendable, CustomTestStringConvertible {
    var text: String
    var nanoseconds: Int64
    var testDescription: String { text }
}

@Test(arguments: [
    TimeCase(text: "0s", nanoseconds: 0),
    TimeCase(text: "250ms", nanoseconds: 250_000_000),
    TimeCase(text: "1.5s", nanoseconds: 1_500_000_000),
    TimeCase(text: "42s", nanoseconds: 42_000_000_000),
    TimeCase(text: "2m", nanoseconds: 120_000_000_000),
    TimeCase(text: "0.5m", nanoseconds: 30_000_000_000),
    TimeCase(text: "1h", nanoseconds: 3_600_000_000_000),
    TimeCase(text: "1.25h", nanoseconds: 4_500_000_000_000),
    TimeCase(text: "0.5ms", nanoseconds: 500_000),
    TimeCase(text: "5ms", nanoseconds: 5_000_000),
])
func scenario_time_parsesUnitAndDecimals(_ c: TimeCase) throws {
    let scenario = try Scenario.parse("\(c.text) launch", fileName: "t.scenario")
    #expect(scenario.entries.map(\.time) == [HostTime(nanoseconds: c.nanoseconds)])
}

@Test func scenario_specExample_parsesEveryStepWithItsLine() throws {
    let text = """
        # the user leaves the app for 40 seconds, then quits it
        0s     launch
        2s     background
        42s    foreground
        1m     terminate
        """
    let scenario = try Scenario.parse(text, fileName: "leave.scenario")
    #expect(scenario.fileName == "leave.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background, .foreground, .terminate])
    #expect(scenario.entries.map(\.line) == [2, 3, 4, 5])
    #expect(scenario.entries.map { $0.time.seconds } == [0, 2, 42, 60])
}

@Test func scenario_commentsAndBlankLines_areSkippedButCounted() throws {
    let text = "# header\n\n   \n0s launch   # start it\n\t\n# a note\n2s background#trailing\n"
    let scenario = try Scenario.parse(text, fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background])
    #expect(scenario.entries.map(\.line) == [4, 7])
}

@Test func scenario_crlfLineEndings_parse() throws {
    let scenario = try Scenario.parse("0s launch\r\n2s background\r\n", fileName: "t.scenario")
    #expect(scenario.entries.map(\.step) == [.launch, .background])
}

@Test(arguments: Step.all)
func scenario_everyAction_parsesBySpelling(_ step: Step) throws {
    // A prefix that makes the step allowed.
    let prefix: String
    switch step {
    case .launch, .launchInBackground: prefix = ""
    case .activate: prefix = "0s launch\n0s resign\n"
    case .foreground: prefix = "0s launch\n0s background\n"
    default: prefix = "0s launch\n"
    }
    let scenario = try Scenario.parse(prefix + "1s \(step.description)", fileName: "t.scenario")
    #expect(scenario.entries.last?.step == step)
}

@Test func scenario_equalTimes_areAllowed() throws {
    let scenario = try Scenario.parse("1s launch\n1s background\n1s foreground", fileName: "t.scenario")
    #expect(scenario.entries.count == 3)
}

@Test func scenario_emptyFile_hasNoEntries() throws {
    let scenario = try Scenario.parse("# nothing\n\n", fileName: "t.scenario")
    #expect(scenario.entries.isEmpty)
}

@Test func scenario_unknownAction_namesFileLineAndAction() throws {
    let error = try #require(parseError("0s launch\n# c\n3s jump"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:3:"))
    #expect(error.message.contains("unknown action 'jump'"))
    #expect(error.message.contains("memory-warning"), "lists the valid actions")
}

@Test(arguments: ["5x", "5d", "5sec", "2min"])
func scenario_unknownUnit_namesFileLineAndUnit(_ time: String) throws {
    let error = try #require(parseError("0s launch\n\(time) background"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:2:"))
    #expect(error.message.contains("unit"))
}

@Test(arguments: ["5", "soon", "1.5"])
func scenario_timeWithoutUnit_namesFileLine(_ time: String) throws {
    let error = try #require(parseError("\(time) launch"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:1:"))
}

@Test func scenario_missingAction_namesFileLine() throws {
    let error = try #require(parseError("0s launch\n2s"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:2:"))
}

@Test func scenario_timeGoingBackwards_namesFileLine() throws {
    let error = try #require(parseError("0s launch\n5s background\n\n3s foreground"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:4:"))
    #expect(error.message.contains("backwards"))
}

@Test func scenario_invalidTransition_namesFileLineAndStep() throws {
    let error = try #require(parseError("0s launch\n1s background\n2s foreground\n3s foreground"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:4:"))
    #expect(error.message.contains("invalid transition"))
    #expect(error.message.contains("foreground"))
}

@Test(arguments: [
    ("0s background", 1),
    ("0s launch\n1s launch", 2),
    ("0s launch\n1s activate", 2),
    ("0s launch\n1s resign\n2s resign", 3),
    ("0s launch\n1s kill\n2s foreground", 3),
    ("0s launch\n1s terminate\n2s terminate", 3),
])
func scenario_stepNotAllowed_reportsItsLine(_ text: String, _ line: Int) throws {
    let error = try #require(parseError(text))
    #expect(error.message.hasPrefix("t.scenario:\(line):"))
}

@Test func scenario_relaunchAfterTerminate_isAllowed() throws {
    let scenario = try Scenario.parse("0s launch\n1s terminate\n2s launch\n3s kill\n4s launch background", fileName: "t")
    #expect(scenario.entries.count == 5)
}

@Test func scenario_badLine_isReportedBeforeAnythingRuns() {
    let ran = Shared(false)
    let p = swiftPlugin("p") { _ in ran.value = true }
    #expect(throws: LifelineError.self) { try simulate("0s launch\n1s nonsense", [p]) }
    #expect(ran.value == false)
}

// MARK: - Compound times

@Test(arguments: [
    TimeCase(text: "5m10s", nanoseconds: 310_000_000_000),
    TimeCase(text: "1h30m", nanoseconds: 5_400_000_000_000),
    TimeCase(text: "1m30.5s", nanoseconds: 90_500_000_000),
    TimeCase(text: "2s500ms", nanoseconds: 2_500_000_000),
    TimeCase(text: "1h1m1s1ms", nanoseconds: 3_661_001_000_000),
    TimeCase(text: "1h0.5m", nanoseconds: 3_630_000_000_000),
    TimeCase(text: "0h0m0s0ms", nanoseconds: 0),
    TimeCase(text: "1h5s", nanoseconds: 3_605_000_000_000),
    TimeCase(text: "1m250ms", nanoseconds: 60_250_000_000),
])
func scenario_compoundTime_addsItsParts(_ c: TimeCase) throws {
    #expect(try Units.parseDuration(c.text, at: "t") == HostTime(nanoseconds: c.nanoseconds))
    let scenario = try Scenario.parse("\(c.text) launch", fileName: "t.scenario")
    #expect(scenario.entries.map(\.time) == [HostTime(nanoseconds: c.nanoseconds)])
}

struct BadTime: Sendable, CustomTestStringConvertible {
    var text: String
    var message: String
    var testDescription: String { text.isEmpty ? "(empty)" : text }
}

@Test(arguments: [
    BadTime(text: "5m10", message: "'5m10' ends with a number without a unit; put one after every number"),
    BadTime(text: "5s5", message: "'5s5' ends with a number without a unit"),
    BadTime(text: "10s5m", message: "the units of '10s5m' are out of order; write the largest first"),
    BadTime(text: "500ms2s", message: "the units of '500ms2s' are out of order"),
    BadTime(text: "1s1h", message: "out of order"),
    BadTime(text: "5m5m", message: "'5m5m' names the unit 'm' twice"),
    BadTime(text: "1s2s", message: "names the unit 's' twice"),
    BadTime(text: "", message: "'' is not a time; write a number and a unit"),
    BadTime(text: "-5s", message: "'-5s' is negative"),
    BadTime(text: "-1m30s", message: "is negative"),
    BadTime(text: "+5s", message: "'+5s' is not a time"),
    BadTime(text: "1e3s", message: "unknown unit 'e' in '1e3s'; use ms, s, m or h"),
    BadTime(text: "nan", message: "'nan' is not a time"),
    BadTime(text: "NaNs", message: "'NaNs' is not a time"),
    BadTime(text: "inf", message: "'inf' is not a time"),
    BadTime(text: "infs", message: "'infs' is not a time"),
    BadTime(text: "1.2.3s", message: "'1.2.3' in '1.2.3s' is not a number"),
    BadTime(text: ".s", message: "'.' in '.s' is not a number"),
    BadTime(text: "5m+10s", message: "unexpected '+' in '5m+10s'"),
    BadTime(text: "5", message: "'5' has no unit"),
    BadTime(text: "5d", message: "unknown unit 'd'"),
    BadTime(text: "1m30sec", message: "unknown unit 'sec' in '1m30sec'"),
    BadTime(text: "900000h", message: "'900000h' is too far"),
    BadTime(text: "876000h1s", message: "is too far"),
])
func scenario_badTime_isRejectedWithFileLine(_ c: BadTime) throws {
    let error = try #require(timeError(c.text, at: "t.scenario:3"))
    #expect(error.exitCode == 65)
    #expect(error.message.hasPrefix("t.scenario:3: "), "\(error.message)")
    #expect(error.message.contains(c.message), "\(error.message)")
    if !c.text.isEmpty {
        // The same message for a step's time in a file.
        let inFile = try #require(parseError("0s launch\n# c\n\(c.text) background"))
        #expect(inFile.message == error.message)
    }
}

/// The error parsing `text` as a time fails with, or nil when it parses.
private func timeError(_ text: String, at: String) -> LifelineError? {
    do {
        _ = try Units.parseDuration(text, at: at)
        return nil
    } catch {
        return error
    }
}

@Test func scenario_compoundTime_worksForDelaysAndUntil() throws {
    let scenario = try Scenario.parse("0s http * * -> 200 ok in 1m30s, refuse in 2s500ms", fileName: "t.scenario")
    #expect(scenario.network.map(\.results) == [[.respond(status: 200, body: "ok", delay: 90), .refuse(delay: 2.5)]])
    #expect(try Units.parseDuration("1h30m", at: "--until") == .seconds(5400))
    let until = try #require(timeError("10s5m", at: "--until"))
    #expect(until.message.hasPrefix("--until: the units of '10s5m' are out of order"), "\(until.message)")
    let delay = try #require(parseError("0s http * * -> 200 ok in 5m10"))
    #expect(
        delay.message.hasPrefix("t.scenario:1: bad delay after 'in': '5m10' ends with a number"), "\(delay.message)")
}
