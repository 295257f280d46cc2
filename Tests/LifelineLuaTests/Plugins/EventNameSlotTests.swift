import CLua
import CLuaShims
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// A Lua state keeps one string per event name and state, in a cache the C bridge lays out by
// slot: LIFELINE_EVENT_NAME_SLOTS slots for the names (by ordinal + 1), then the states. An event
// past those slots would read a state's string as its name.

@Test func eventNameSlots_holdEveryLifecycleEvent() {
    #expect(LifecycleEventName.allCases.count <= Int(LIFELINE_EVENT_NAME_SLOTS))
}

@Test func eventNameSlots_handEachHandlerItsOwnNameAndState() throws {
    // Twice over every pair: the first call makes each cached string, the second reads it back.
    var pairs: [(LifecycleEventName, AppState)] = []
    for _ in 0..<2 {
        for name in LifecycleEventName.allCases { for state in AppState.allCases { pairs.append((name, state)) } }
    }
    let want = pairs.map { "'\($0.0.rawValue)/\($0.1.rawValue)'" }.joined(separator: ", ")
    let source = """
        local want, i = {\(want)}, 0
        return function(e)
          i = i + 1
          local got = e.name .. '/' .. e.state
          if got ~= want[i] then error('call ' .. i .. ': got ' .. got .. ', want ' .. want[i]) end
        end
        """
    try withPluginFolder(["p/init.lua": ""]) { dir in
        let plugin = try LuaPlugin(name: "p", directory: dir + "/p", memoryLimit: 4 << 20)
        defer { plugin.close() }
        let L = try #require(plugin.state)
        #expect(luaL_loadstring(L, source) == LUA_OK)
        lua_callk(L, 0, 1, 0, nil)  // stack: fn
        let ref = luaL_ref(L, lifeline_registryindex())  // stack: (empty)
        for (i, (name, state)) in pairs.enumerated() {
            // Every other call carries a transfer, which builds its table on the other path.
            let transfer = i % 2 == 0 ? nil : TransferEventInfo(id: "t\(i)")
            let event = LifecycleEvent(name: name, time: 1, state: state, transfer: transfer)
            #expect(plugin.call(ref: ref, event: event) == .returned, "\(name) in \(state)")
        }
        #expect(lua_gettop(L) == 0)
    }
}
