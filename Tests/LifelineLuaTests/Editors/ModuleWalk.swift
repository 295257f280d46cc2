import CLua
import CLuaShims
import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

/// What the live `lifeline` module holds, found by walking a real plugin's state: the editor
/// files are generated from this, and checked against it, so a function cannot be added to the
/// module without its stub.
struct ModuleShape: Equatable {
    /// Every function by its path: "lifeline.on", "lifeline.store.get", a callable table
    /// ("lifeline.queue"), and the methods of the objects the module hands out, by their LuaLS
    /// class ("lifeline.Queue:add", "lifeline.Event:complete").
    var functions: Set<String> = []
    /// The module's other members, by path, with what they are: "table", "lightuserdata", or the
    /// LuaLS class of an object ("lifeline.queue.background" is a "lifeline.Queue").
    var members: [String: String] = [:]
}

enum ModuleWalk {
    /// The LuaLS class of each metatable the module registers (the names its C parts give
    /// luaL_newmetatable). A new one fails the walk until it is named here and annotated.
    static let metatableClasses = [
        "lifeline.handle": "lifeline.Handle", "lifeline.task": "lifeline.Work", "lifeline.queue": "lifeline.Queue",
        "lifeline.operation": "lifeline.Operation", "lifeline.error": "lifeline.Error",
    ]

    /// Plain tables the module hands to handlers, captured by `plugin` into the global `walked`,
    /// and their LuaLS classes. Their functions are fields of each new table, so only a live one
    /// shows them.
    static let handedTables = ["event": "lifeline.Event", "scheduledTask": "lifeline.ScheduledTask"]

    /// A plugin that makes every kind of value the module hands out: each class is made only with
    /// its first value, and the event and task tables only in their handlers.
    static let plugin = """
        walked = {}
        lifeline.on("performFetch", function(event) walked.event = event; event.complete("noData") end)
        lifeline.tasks.register("com.example.walk", function(task)
          walked.scheduledTask = task
          task:setTaskCompleted(true)
        end)
        lifeline.tasks.submit{identifier = "com.example.walk", kind = "refresh"}
        lifeline.after(1, function() end)
        lifeline.background(nil, function() end)
        lifeline.queue("walk"):add{run = function() end}
        local failing = lifeline.background(nil, function() error("made an error value") end)
        lifeline.background(nil, function() walked.error = select(2, failing:wait()) end)
        """

    /// Launches a host with `plugin`, lets the system fetch and run its task, and walks the state.
    static func shape() throws -> ModuleShape {
        try withPluginFolder(["walk/init.lua": plugin]) { dir in
            let box = PluginBox()
            var descriptor = capturingDescriptor(name: "walk", directory: dir + "/walk", box: box)
            descriptor.taskIdentifiers = ["com.example.walk"]
            let harness = Harness([descriptor])
            harness.at(0, .launch)
            harness.at(1, .background)  // the system fetches and runs tasks in the background
            harness.at(2, .fetch)
            harness.at(3, .runTasks(.all))
            harness.run(until: 5)
            #expect(harness.refused.isEmpty, "the walk's steps were refused: \(harness.refused)")
            #expect(
                pluginErrors(harness.recorder).allSatisfy { $0.message.contains("made an error value") },
                "the walk's plugin failed: \(pluginErrors(harness.recorder).map(\.message))")
            let plugin = try #require(box.plugin, "the walk's plugin was never made")
            let L = try #require(plugin.state, "the walk's plugin state is closed")
            return try walk(L)
        }
    }

    static func walk(_ L: OpaquePointer) throws -> ModuleShape {
        var shape = ModuleShape()
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        // The module makes its areas (lifeline.store, lifeline.http, ...) when first read; pairs()
        // makes them all, so that the walk below, which reads the table raw, sees every one.
        #expect(luaL_loadstring(L, "for _ in pairs(lifeline) do end") == LUA_OK)
        #expect(lua_pcallk(L, 0, 0, 0, 0, nil) == LUA_OK)
        // The module, from its global.
        #expect(lua_getglobal(L, "lifeline") == LUA_TTABLE)
        walkTable(L, lua_gettop(L), path: "lifeline", into: &shape)
        lifeline_pop(L, 1)
        // The classes of the objects it hands out, from their metatables in the registry (read
        // from C, where a locked metatable is still there to read).
        lua_pushnil(L)
        while lua_next(L, lifeline_registryindex()) != 0 {
            defer { lifeline_pop(L, 1) }
            guard lua_type(L, -2) == LUA_TSTRING, lua_type(L, -1) == LUA_TTABLE else { continue }
            let name = string(L, -2)
            // A metatable luaL_newmetatable made has its own name as __name; other tables of the
            // registry (the loaded modules, say) are not classes.
            let named = lua_getfield(L, -1, "__name") == LUA_TSTRING && string(L, -1) == name
            lifeline_pop(L, 1)
            guard name.hasPrefix("lifeline."), named else { continue }
            let cls = try #require(
                metatableClasses[name],
                "the module registers a class '\(name)' that the editor files do not know: add it to ModuleWalk.metatableClasses and annotate it"
            )
            for method in methods(ofMetatable: L, lua_gettop(L)) { shape.functions.insert("\(cls):\(method)") }
        }
        for name in metatableClasses.keys {
            #expect(lua_getfield(L, lifeline_registryindex(), name) == LUA_TTABLE, "the walk's plugin made no '\(name)'")
            lifeline_pop(L, 1)
        }
        // The tables handed to handlers.
        #expect(lua_getglobal(L, "walked") == LUA_TTABLE)
        for (key, cls) in handedTables {
            let t = lua_getfield(L, -1, key)
            #expect(t == LUA_TTABLE, "the walk's plugin did not capture its \(key)")
            if t == LUA_TTABLE {
                for f in functionKeys(L, lua_gettop(L)) { shape.functions.insert("\(cls):\(f)") }
            }
            lifeline_pop(L, 1)
        }
        return shape
    }

    /// Walks the module table at `idx`, raw (no metamethod runs).
    private static func walkTable(_ L: OpaquePointer, _ idx: Int32, path: String, into shape: inout ModuleShape) {
        for key in stringKeys(L, idx) {
            let p = "\(path).\(key)"
            _ = lua_pushstring(L, key)
            let t = lua_rawget(L, idx)
            defer { lifeline_pop(L, 1) }
            switch t {
            case LUA_TFUNCTION: shape.functions.insert(p)
            case LUA_TTABLE:
                shape.members[p] = "table"
                if lua_getmetatable(L, -1) != 0 {
                    if lua_getfield(L, -1, "__call") == LUA_TFUNCTION { shape.functions.insert(p) }
                    lifeline_pop(L, 2)
                }
                // lifeline.config is the plugin's own data, not the module's.
                if p != "lifeline.config" { walkTable(L, lua_gettop(L), path: p, into: &shape) }
            case LUA_TUSERDATA:
                var cls = "userdata"
                if lua_getmetatable(L, -1) != 0 {
                    if lua_getfield(L, -1, "__name") == LUA_TSTRING { cls = metatableClasses[string(L, -1)] ?? string(L, -1) }
                    lifeline_pop(L, 2)
                }
                shape.members[p] = cls
            case LUA_TLIGHTUSERDATA: shape.members[p] = "lightuserdata"
            default: shape.members[p] = String(cString: lua_typename(L, t))
            }
        }
    }

    /// The methods an object of the metatable at `idx` finds through `__index`: a table of them,
    /// or a C function whose first upvalue is that table (objects with `id` and `name`).
    private static func methods(ofMetatable L: OpaquePointer, _ idx: Int32) -> [String] {
        defer { lua_settop(L, idx) }
        switch lua_getfield(L, idx, "__index") {
        case LUA_TTABLE: return functionKeys(L, lua_gettop(L))
        case LUA_TFUNCTION:
            guard lua_getupvalue(L, -1, 1) != nil, lua_type(L, -1) == LUA_TTABLE else { return [] }
            return functionKeys(L, lua_gettop(L))
        default: return []
        }
    }

    private static func functionKeys(_ L: OpaquePointer, _ idx: Int32) -> [String] {
        stringKeys(L, idx).filter { key in
            _ = lua_pushstring(L, key)
            defer { lifeline_pop(L, 1) }
            return lua_rawget(L, idx) == LUA_TFUNCTION
        }
    }

    private static func stringKeys(_ L: OpaquePointer, _ idx: Int32) -> [String] {
        var keys: [String] = []
        lua_pushnil(L)
        while lua_next(L, idx) != 0 {
            if lua_type(L, -2) == LUA_TSTRING { keys.append(string(L, -2)) }
            lifeline_pop(L, 1)
        }
        return keys.sorted()
    }

    private static func string(_ L: OpaquePointer, _ idx: Int32) -> String {
        var len = 0
        guard let p = lua_tolstring(L, idx, &len) else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: len), as: UTF8.self)
    }
}
