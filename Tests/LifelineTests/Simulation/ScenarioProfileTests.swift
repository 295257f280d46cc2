import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// A scenario's `profile NAME` and `limit NAME VALUE` lines: the figures it is written for, over
// the defaults and under the flags.

/// The error parsing `text` as t.scenario fails with, or nil when it parses.
private func parseError(_ text: String) -> LifelineError? {
    do {
        _ = try Scenario.parse(text, fileName: "t.scenario")
        return nil
    } catch {
        return error
    }
}

struct BadFigureLine: Sendable, CustomTestStringConvertible {
    var text: String
    var says: String
    var testDescription: String { text }
}

@Suite struct ScenarioProfileTests {
    @Test func withoutLines_theProfileIsIOS13() throws {
        let scenario = try Scenario.parse("0s launch", fileName: "t.scenario")
        #expect(scenario.profileName == nil)
        #expect(scenario.limits.isEmpty)
        #expect(try scenario.profile() == .ios13)
    }

    @Test func aProfileLine_choosesTheProfile_andLimitLinesSetItsFigures() throws {
        let scenario = try Scenario.parse(
            """
            profile ios7          # the Xamarin guide's iOS 7
            limit budget 10m
            limit expiration-lead 2.5
            limit task-limit 3
            limit processing-task-limit 1m30s
            0s launch
            """, fileName: "t.scenario")
        #expect(scenario.profileName == "ios7")
        #expect(scenario.limits.map(\.line) == [2, 3, 4, 5])
        var expected = Profile.ios7
        expected.budget = 600
        expected.expirationLead = 2.5
        expected.taskLimit = 3
        expected.processingTaskLimit = 90
        #expect(try scenario.profile() == expected)
    }

    @Test func theProfileFlag_winsOverTheLine_andTheLimitLinesStillApply() throws {
        let scenario = try Scenario.parse("profile ios6\nlimit budget 42\n0s launch", fileName: "t.scenario")
        var expected = Profile.ios13
        expected.budget = 42
        #expect(try scenario.profile(named: "ios13") == expected)
        #expect(try scenario.profile().name == "ios6")
    }

    @Test func everyFigureFlag_hasALimitName_andEachSetsItsOwnFigure() throws {
        for figure in Profile.Figure.allCases {
            let value = figure == .taskLimit ? "7" : "7s"
            let scenario = try Scenario.parse("limit \(figure.rawValue) \(value)", fileName: "t.scenario")
            let profile = try scenario.profile()
            var expected = Profile.ios13
            if let seconds = figure.seconds { expected[keyPath: seconds] = 7 } else { expected.taskLimit = 7 }
            #expect(profile == expected, "\(figure.rawValue)")
            #expect(profile != .ios13, "\(figure.rawValue) changes a figure")
        }
    }

    @Test(arguments: [
        BadFigureLine(text: "profile ios5", says: "unknown profile 'ios5'; the profiles are: ios6, ios7, ios13"),
        BadFigureLine(text: "profile", says: "'profile' takes one profile name"),
        BadFigureLine(text: "profile ios6 ios7", says: "'profile' takes one profile name"),
        BadFigureLine(text: "limit budget", says: "'limit' takes a figure and its value"),
        BadFigureLine(text: "limit budget 1 2", says: "'limit' takes a figure and its value"),
        BadFigureLine(text: "limit --budget 10", says: "unknown figure '--budget'; the figures are: budget, "),
        BadFigureLine(text: "limit taskLimit 10", says: "unknown figure 'taskLimit'"),
        BadFigureLine(text: "limit budget -1", says: "budget must be a number of seconds >= 0, not '-1'"),
        BadFigureLine(text: "limit budget nan", says: "budget must be a number of seconds >= 0"),
        BadFigureLine(text: "limit budget inf", says: "is too large"),
        BadFigureLine(text: "limit budget 3153600001", says: "is too large"),
        BadFigureLine(text: "limit budget 876001h", says: "is too far: times go up to 100 years"),
        BadFigureLine(text: "limit budget 5m10", says: "ends with a number without a unit"),
        BadFigureLine(text: "limit launch-limit ten", says: "'ten' is not a time"),
        BadFigureLine(text: "limit task-limit 0", says: "task-limit must be a whole number, at least 1, not '0'"),
        BadFigureLine(text: "limit task-limit 1.5", says: "task-limit must be a whole number"),
        BadFigureLine(text: "limit task-limit 10s", says: "task-limit must be a whole number"),
    ])
    func aBadLine_isBadInputAtItsLine(_ bad: BadFigureLine) throws {
        let error = try #require(parseError("0s launch\n\(bad.text)\n1s background"))
        #expect(error.exitCode == 65)
        #expect(error.message.hasPrefix("t.scenario:2: "), "\(error.message)")
        #expect(error.message.contains(bad.says), "\(error.message)")
    }

    @Test func aSecondProfileLine_orAFigureSetTwice_isBadInputAtTheSecond() throws {
        let profiles = try #require(parseError("profile ios6\n0s launch\nprofile ios6"))
        #expect(profiles.exitCode == 65)
        #expect(profiles.message == "t.scenario:3: a second 'profile' line")
        let limits = try #require(parseError("limit budget 1\nlimit fetch-limit 2\n\nlimit budget 1"))
        #expect(limits.exitCode == 65)
        #expect(limits.message == "t.scenario:4: 'budget' is set twice; the first is on line 1")
    }

    @Test func aFigureTakesTheFormsItsFlagTakes() throws {
        // A plain number of seconds or a duration, up to 100 years: the flags' own rules.
        for (text, seconds) in [("30", 30.0), ("0.25", 0.25), ("500ms", 0.5), ("2m", 120), ("1h30m", 5400), ("0", 0)] {
            let scenario = try Scenario.parse("limit budget \(text)", fileName: "t.scenario")
            #expect(try scenario.profile().budget == seconds, "\(text)")
            #expect(try Profile.Seconds(text).value(at: "--budget") == seconds, "\(text)")
        }
    }
}
