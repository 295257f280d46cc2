import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// A timer and the expiration moment due at the same virtual instant (docs/lifecycle.md, "Jobs due
// at the same instant"): the one scheduled first runs first. The expiration moment is scheduled
// when the app enters the background, before didEnterBackground's handlers run.

/// Runs plugin "p" under ios13 (budget 30 s, expiration lead 5 s): in the background at 10 s, the
/// expiration moment is at 35 s.
private func run(_ source: String) throws -> [String] {
    try withPluginFolder(["p/init.lua": source]) { dir in
        let recorder = try Simulation.run(
            scenario: try Scenario.parse("0s launch\n10s background\n1m foreground", fileName: "t.scenario"),
            plugins: try LuaPluginLoader.descriptors(in: dir), configuration: HostConfiguration(profile: .ios13))
        return LifelineTesting.lines(recorder, only: ["log", "taskExpiring", "taskEnded"])
    }
}

@Suite struct SameInstantOrderTests {
    @Test func aTimerSetBeforeTheBackground_firesBeforeTheExpiration_dueAtTheSameInstant() throws {
        let lines = try run(
            """
            local id
            lifeline.on("didFinishLaunching", function()
              lifeline.after(35, function()
                print("timer, remaining " .. lifeline.backgroundTimeRemaining())
                lifeline.endBackgroundTask(id)
              end)
            end)
            lifeline.on("didEnterBackground", function()
              id = lifeline.beginBackgroundTask("work", function() print("expiration handler") end)
            end)
            """)
        #expect(
            lines == [
                "35 log plugin=p level=info message=timer, remaining 5.0",
                "35 taskEnded plugin=p task=1 expired=false",
            ])
    }

    @Test func aTimerSetInDidEnterBackground_firesAfterTheExpiration_dueAtTheSameInstant() throws {
        let lines = try run(
            """
            local id
            lifeline.on("didEnterBackground", function()
              id = lifeline.beginBackgroundTask("work", function() print("expiration handler") end)
              lifeline.after(25, function()
                print("timer, remaining " .. lifeline.backgroundTimeRemaining())
                lifeline.endBackgroundTask(id)
              end)
            end)
            """)
        #expect(
            lines == [
                "35 taskExpiring plugin=p task=1",
                "35 log plugin=p level=info message=expiration handler",
                "35 log plugin=p level=info message=timer, remaining 5.0",
                "35 taskEnded plugin=p task=1 expired=true",
            ])
    }

    @Test func twoTimersDueAtTheSameInstant_fireInTheOrderTheyWereSet() throws {
        let lines = try run(
            """
            lifeline.on("didFinishLaunching", function()
              lifeline.after(3, function() print("second, set first for 3 s") end)
              lifeline.after(1, function()
                lifeline.after(2, function() print("third, set at 1 s for 2 s") end)
              end)
              lifeline.after(3, function() print("last, set second for 3 s") end)
            end)
            """)
        #expect(
            lines == [
                "3 log plugin=p level=info message=second, set first for 3 s",
                "3 log plugin=p level=info message=last, set second for 3 s",
                "3 log plugin=p level=info message=third, set at 1 s for 2 s",
            ])
    }
}
