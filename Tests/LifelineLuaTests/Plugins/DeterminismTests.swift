import Foundation
import Lifeline
import Testing

@testable import LifelineLua
import LifelineTesting

/// SPEC 2.3: the same plugins and scenario give a byte-identical report, even for plugins that
/// iterate tables, draw random numbers or read the time.
@Suite struct DeterminismTests {
    static let source = """
        local t = {}
        for _, k in ipairs({"zeta", "alpha", "mid", "b", "a10", "a9"}) do t[k] = true end
        t[3] = 1; t[1] = 1; t[2.5] = 1; t[-1] = 1; t[true] = 1; t[false] = 1
        local keys = {}
        for k in pairs(t) do keys[#keys + 1] = tostring(k) end
        lifeline.on("didEnterBackground", function()
          mark(table.concat(keys, ","))
          mark("random " .. math.random(1000000))
          mark("time " .. os.time() .. " clock " .. os.clock() .. " date " .. os.date("!%Y-%m-%dT%H:%M:%S"))
        end)
        """

    @Test func report_pairsRandomAndTime_areTheSameOnEveryRun() throws {
        var reports: Set<String> = []
        for _ in 0..<4 {
            let recorder = try simulate(plugins(["p": Self.source]), scenario: "0s launch\n2s background")
            reports.insert(recorder.report().serialized(pretty: true))
        }
        #expect(reports.count == 1)
    }

    @Test func pairs_visitsNumbersThenStringsThenBooleans_inOrder() throws {
        let marks = try marksOf(Self.source, scenario: "0s launch\n2s background")
        #expect(marks.first == "-1,1,2.5,3,a10,a9,alpha,b,mid,zeta,false,true")
    }

    @Test func osTime_followsTheVirtualClock_fromAFixedEpoch() throws {
        let marks = try marksOf(Self.source, scenario: "0s launch\n2s background")
        #expect(marks.last == "time 1767225602 clock 2.0 date 2026-01-01T00:00:02")
    }

    @Test func pairs_respectsPairsMetamethod_andSkipsKeysRemovedWhileIterating() throws {
        let marks = try marksOf("""
            local proxied = setmetatable({}, {__pairs = function() return function(_, k)
              if k == nil then return "only", 1 end end, nil, nil end})
            for k in pairs(proxied) do mark("meta " .. k) end
            local t = {a = 1, b = 2, c = 3}
            for k in pairs(t) do mark(k); t.b = nil end
            """)
        #expect(marks == ["meta only", "a", "c"])
    }
}

/// Fixes from review: each one a behaviour a user relies on.
@Suite struct SandboxEdgeTests {
    @Test func load_withoutAnEnv_seesTheGlobals() throws {
        let marks = try marksOf("local f = load('return type(print)')\nmark(f())")
        #expect(marks == ["function"])
    }

    @Test func load_withAnEnv_usesIt() throws {
        let marks = try marksOf("local f = load('return x', 'chunk', 't', {x = 'from env'})\nmark(f())")
        #expect(marks == ["from env"])
    }

    @Test func handleMetatable_isLocked_soNoFinalizerCanBeAdded() throws {
        let marks = try marksOf("""
            local h = lifeline.after(100, function() end)
            mark(tostring(getmetatable(h)))
            mark(tostring(pcall(setmetatable, h, {})))
            """)
        #expect(marks == ["false", "false"])
    }

    @Test func launchInBackground_initLuaSeesTheBudget() throws {
        let marks = try marksOf("mark(lifeline.state() .. ' ' .. lifeline.backgroundTimeRemaining())",
                                scenario: "0s launch background")
        #expect(marks == ["background 30.0"])
    }
}
