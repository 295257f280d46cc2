import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// The module's areas (lifeline.store, lifeline.http, lifeline.files, ...) are made when first
// read, so that a plugin pays only for the ones it uses; to the plugin the module looks whole.

@Test func moduleArea_isMadeAtItsFirstRead_andIsThenOneTable() throws {
    let source = """
        mark("before:" .. type(rawget(lifeline, "store")))
        local store = lifeline.store
        mark("read:" .. type(store) .. "|" .. type(store.get))
        mark("after:" .. tostring(rawequal(rawget(lifeline, "store"), store)) .. "|" .. tostring(rawequal(lifeline.store, store)))
        """
    #expect(try marksOf(source) == ["before:nil", "read:table|function", "after:true|true"])
}

@Test func moduleArea_everyOne_isThere_andPairsListsTheWholeModule() throws {
    // Each area, read first through pairs (which makes them all) in one plugin and by name in the
    // other, gives the same keys.
    let listing = """
        local function keys(t)
          local out = {}
          for k in pairs(t) do out[#out + 1] = tostring(k) end
          table.sort(out)
          return table.concat(out, ",")
        end

        """
    let byPairs = try marksOf(listing + """
        local areas = {}
        for k, v in pairs(lifeline) do if type(v) == "table" then areas[#areas + 1] = k end end
        table.sort(areas)
        for _, k in ipairs(areas) do mark(k .. "=" .. keys(lifeline[k])) end
        """)
    let areas = byPairs.map { String($0.prefix { $0 != "=" }) }
    #expect(Set(["store", "http", "files", "transfers", "tasks", "log", "json", "queue", "config"]).isSubset(of: Set(areas)))
    let byName = try marksOf(listing + """
        for _, k in ipairs({\(areas.map { "\"\($0)\"" }.joined(separator: ", "))}) do mark(k .. "=" .. keys(lifeline[k])) end
        """)
    #expect(byName == byPairs)
    #expect(byPairs.first { $0.hasPrefix("store=") } == "store=delete,get,keys,set,transaction")
}

@Test func moduleArea_aKeyThatIsNoArea_isNil() throws {
    let source = """
        mark(tostring(lifeline.nosuch) .. "|" .. tostring(lifeline[1]) .. "|" .. tostring(lifeline["store\\0x"]) .. "|" .. tostring(lifeline.st))
        """
    #expect(try marksOf(source) == ["nil|nil|nil|nil"])
}

@Test func moduleArea_theModulesMetatable_isOutOfThePluginsReach() throws {
    let source = """
        mark(tostring(getmetatable(lifeline)))
        mark(tostring(pcall(setmetatable, lifeline, {})))
        mark(type(lifeline.files.read))
        """
    #expect(try marksOf(source) == ["false", "false", "function"])
}

@Test func moduleArea_aPluginThatReadsNone_isSmaller() throws {
    // What laziness buys: the state of a plugin that never reads an area holds none of them.
    func memory(_ source: String) throws -> Int {
        try withPluginFolder(["p/init.lua": source]) { dir in
            let host = LifelineHost(
                configuration: HostConfiguration(), plugins: try LuaPluginLoader.descriptors(in: dir),
                executor: MainExecutor(clock: VirtualClock()))
            defer { host.shutdown() }
            try host.perform(.launch)
            return try #require(host.pluginCodes.first?.code as? LuaPlugin).memoryUsed
        }
    }
    let none = try memory("")
    let all = try memory("for _ in pairs(lifeline) do end")
    #expect(none < all)
}

@Test func moduleArea_theLogAreaMadeLate_leavesAPrintThePluginSetAlone() throws {
    let source = """
        local said = {}
        print = function(s) said[#said + 1] = s end
        lifeline.log.info("through the log")
        print("through the plugin's print")
        mark(#said .. "|" .. tostring(said[1]))
        """
    #expect(try marksOf(source) == ["1|through the plugin's print"])
}
