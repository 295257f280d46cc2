import CLua
import CLuaShims
import Lifeline

/// `lifeline.store`: a plugin's durable key-value store, bridged to `PluginStore`.
///
/// Values cross as JSON values: strings, numbers (integers stay integers), booleans, and tables
/// that are arrays (keys 1..n) or have string keys only. `transaction` is built in C (see
/// `lifeline_store_transaction`); these are its parts.
enum LuaStore {
    static let functions: [(String, lifeline_bridged)] = [
        ("store.get", get), ("store.set", set), ("store.delete", delete), ("store.keys", keys),
    ]

    /// The plugin's store, or pushes why there is none and returns nil.
    private static func store(_ L: OpaquePointer, _ fname: String) -> PluginStore? {
        guard let context = LuaModule.runningContext(L, fname) else { return nil }
        do throws(StoreError) {
            return try context.store()
        } catch {
            lifeline_push_where_message(L, "\(fname): \(error.message)")
            return nil
        }
    }

    /// The key at argument 1: a string of valid UTF-8. Otherwise pushes why and returns nil.
    private static func keyArgument(_ L: OpaquePointer, _ fname: String) -> String? {
        LuaModule.textArgument(L, 1, fname, invalid: "a key must be valid UTF-8")
    }

    /// What a Lua string's header, a table and a table slot take in a state, about (64-bit Lua 5.4:
    /// 24 + 1 bytes per string header, 56 per table, 16 per array slot and 32 per hash node).
    static let stringBytes = 32, tableBytes = 64, slotBytes = 32

    /// About what pushing `value` allocates in the state; a little more, never less.
    static func footprint(_ value: JSONValue) -> Int {
        switch value {
        case .null, .bool, .int, .number: return 0
        case .string(let s): return stringBytes + s.utf8.count
        case .array(let items): return items.reduce(tableBytes) { $0 + slotBytes + footprint($1) }
        case .object(let fields):
            return fields.reduce(tableBytes) { $0 + slotBytes + stringBytes + $1.0.utf8.count + footprint($1.1) }
        }
    }

    /// lifeline.store.get(key) -> value | nil
    ///
    /// The stored JSON text is decoded straight into Lua values (`lifeline_json_decode_text`), with
    /// no parsed copy in between: SQLite's copy of the row and the text are held while it is read,
    /// then the text and the Lua value while it is decoded, and each counts against the cap.
    static let get: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.store.get"
        guard let key = keyArgument(L, fname) else { return LIFELINE_RAISE }
        guard let store = store(L, fname) else { return LIFELINE_RAISE }
        let plugin = LuaPlugin.from(L)
        do throws(StoreError) {
            // Read with SQLite's copy alive beside the text: twice the text, before a byte is read.
            switch try store.storedJSON(key, fits: { plugin.fits(2 * $0 + stringBytes) }) {
            case .missing:
                lua_pushnil(L)
                return 1
            case .tooLarge:
                return LIFELINE_NOMEM
            case .text(var text):
                // The text counts while it is held, and the decode runs with the cap on: a value
                // that takes more room in Lua than in JSON (many small items) fails as the plugin's
                // own allocations do, with Lua's memory error, caught by the protected call.
                guard let held = HostCharge(plugin, bytes: text.utf8.count) else { return LIFELINE_NOMEM }
                lifeline_bridge_leave(L)
                let status = text.withUTF8 { lifeline_json_decode_text(L, $0.baseAddress, $0.count) }
                lifeline_bridge_enter(L)
                withExtendedLifetime(held) {}
                guard status == LUA_OK else {
                    // The decoder raises a string for a stack it cannot grow: memory too.
                    let memory = status == LUA_ERRMEM || LuaModule.text(L, -1) == "not enough memory"
                    lifeline_pop(L, 1)
                    if memory { return LIFELINE_NOMEM }
                    // Not JSON: a damaged row, which `get` reads as no value, with a warning.
                    _ = try store.get(key)
                    lua_pushnil(L)
                    return 1
                }
                return 1
            }
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.store.set(key, value)
    static let set: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.store.set"
        guard let key = keyArgument(L, fname) else { return LIFELINE_RAISE }
        guard lua_type(L, 2) != LUA_TNONE, lua_type(L, 2) != LUA_TNIL else {
            return LuaModule.argError(L, 2, fname, "a value expected (use lifeline.store.delete to remove a key)")
        }
        let value: JSONValue
        switch read(L, 2) {
        case .success(let v): value = v
        case .failure(let why): return LuaModule.argError(L, 2, fname, why.message)
        }
        guard let store = store(L, fname) else { return LIFELINE_RAISE }
        do throws(StoreError) {
            try store.set(key, value)
            return 0
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.store.delete(key) -> whether it was there
    static let delete: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.store.delete"
        guard let key = keyArgument(L, fname) else { return LIFELINE_RAISE }
        guard let store = store(L, fname) else { return LIFELINE_RAISE }
        do throws(StoreError) {
            lua_pushboolean(L, try store.delete(key) ? 1 : 0)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.store.keys([prefix]) -> array of keys, in byte order
    static let keys: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.store.keys"
        var prefix = ""
        switch lua_type(L, 1) {
        case LUA_TSTRING:
            guard let p = LuaModule.text(L, 1) else { return LuaModule.argError(L, 1, fname, "a prefix must be valid UTF-8") }
            prefix = p
        case LUA_TNONE, LUA_TNIL: break
        default: return LuaModule.typeError(L, 1, fname, "string")
        }
        guard let store = store(L, fname) else { return LIFELINE_RAISE }
        do throws(StoreError) {
            let keys = try store.keys(prefix: prefix)
            let size = keys.reduce(LuaStore.tableBytes) { $0 + LuaStore.stringBytes + LuaStore.slotBytes + $1.utf8.count }
            guard LuaPlugin.from(L).fits(size) else { return LIFELINE_NOMEM }
            lua_createtable(L, Int32(clamping: keys.count), 0)  // stack: ..., keys
            for (i, key) in keys.enumerated() {
                lua_pushlstring(L, key, key.utf8.count)
                lua_rawseti(L, -2, lua_Integer(i + 1))
            }
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// Opens the transaction of `lifeline.store.transaction`.
    static let begin: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.store.transaction"
        guard let store = store(L, fname) else { return LIFELINE_RAISE }
        do throws(StoreError) {
            try store.beginTransaction()
            LuaPlugin.from(L).openTransaction = store
            return 0
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// Writes it, once the function returned.
    static let commit: lifeline_bridged = { L in
        guard let L else { return 0 }
        let plugin = LuaPlugin.from(L)
        guard let store = plugin.openTransaction else { return 0 }
        plugin.openTransaction = nil
        do throws(StoreError) {
            try store.commit()
            return 0
        } catch {
            return LuaModule.raise(L, "lifeline.store.transaction", error.message)
        }
    }

    /// Drops it: the function raised, or the commit failed. Touches no Lua stack.
    static let rollback: lifeline_store_rollback = { L in
        guard let L else { return }
        let plugin = LuaPlugin.from(L)
        plugin.openTransaction?.rollback()
        plugin.openTransaction = nil
    }

    // MARK: - Values

    /// The Lua value at `idx` as a JSON value, or why it cannot be stored. Reads raw (no
    /// metamethods), so nothing can raise through this frame.
    static func read(_ L: OpaquePointer, _ idx: Int32) -> Result<JSONValue, StoreError> {
        var path: Set<UnsafeRawPointer> = []
        do {
            return .success(try read(L, lua_absindex(L, idx), depth: 0, path: &path))
        } catch {
            return .failure(error)
        }
    }

    private static func read(
        _ L: OpaquePointer, _ idx: Int32, depth: Int, path: inout Set<UnsafeRawPointer>
    ) throws(StoreError) -> JSONValue {
        switch lua_type(L, idx) {
        case LUA_TNIL: return .null
        case LUA_TBOOLEAN: return .bool(lua_toboolean(L, idx) != 0)
        case LUA_TSTRING:
            guard let s = LuaModule.text(L, idx) else {
                throw StoreError("cannot store a string that is not valid UTF-8 (encode binary data first)")
            }
            return .string(s)
        case LUA_TNUMBER:
            if lua_isinteger(L, idx) != 0 { return .int(Int64(lua_tointegerx(L, idx, nil))) }
            let d = lua_tonumberx(L, idx, nil)
            guard d.isFinite else { throw StoreError("cannot store \(d): only finite numbers can be stored") }
            return .number(floatText(d))
        case LUA_TTABLE:
            guard depth < JSONValue.maximumDepth else {
                throw StoreError("a stored value may nest at most \(JSONValue.maximumDepth) tables deep")
            }
            guard let pointer = lua_topointer(L, idx), !path.contains(pointer) else {
                throw StoreError("cannot store a table that contains itself")
            }
            guard lua_checkstack(L, 3) != 0 else { throw StoreError("the value nests too deep") }
            path.insert(pointer)
            defer { path.remove(pointer) }
            var integers: [(Int64, JSONValue)] = []
            var strings: [(String, JSONValue)] = []
            lua_pushnil(L)  // stack: ..., nil
            while lua_next(L, idx) != 0 {  // stack: ..., key, value
                let keyType = lua_type(L, -2)
                let value: JSONValue
                do {
                    value = try read(L, lua_absindex(L, -1), depth: depth + 1, path: &path)
                } catch {
                    lifeline_pop(L, 2)
                    throw error
                }
                if keyType == LUA_TSTRING {
                    guard let key = LuaModule.text(L, -2) else {
                        lifeline_pop(L, 2)
                        throw StoreError("cannot store a table with a key that is not valid UTF-8")
                    }
                    strings.append((key, value))
                } else if keyType == LUA_TNUMBER, lua_isinteger(L, -2) != 0 {
                    integers.append((Int64(lua_tointegerx(L, -2, nil)), value))
                } else {
                    let name = String(cString: lua_typename(L, keyType))
                    lifeline_pop(L, 2)
                    throw StoreError("cannot store a table with a \(name) key: keys must be strings, or 1..n")
                }
                lifeline_pop(L, 1)  // stack: ..., key
            }
            guard integers.isEmpty || strings.isEmpty else {
                throw StoreError("cannot store a table with both string keys and integer keys")
            }
            if !integers.isEmpty {
                integers.sort { $0.0 < $1.0 }
                guard integers.enumerated().allSatisfy({ $0.offset + 1 == Int($0.element.0) }) else {
                    throw StoreError("cannot store a table whose integer keys are not 1..n (an array with holes)")
                }
                return .array(integers.map(\.1))
            }
            // Byte order, so the stored text does not depend on Lua's hash order.
            strings.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
            return .object(strings)
        default:
            let name = String(cString: lua_typename(L, lua_type(L, idx)))
            throw StoreError("cannot store a \(name): values are strings, numbers, booleans or tables of them")
        }
    }

    /// A float's shortest text that reads back to the same float, and still reads as a float.
    static func floatText(_ d: Double) -> String {
        let text = "\(d)"
        return text.contains(where: { $0 == "." || $0 == "e" || $0 == "n" || $0 == "i" }) ? text : text + ".0"
    }

    /// Pushes a JSON value as Lua; false when the stack cannot grow (nothing pushed then).
    static func push(_ L: OpaquePointer, _ value: JSONValue) -> Bool {
        guard lua_checkstack(L, 3) != 0 else { return false }
        switch value {
        case .null: lua_pushnil(L)
        case .bool(let b): lua_pushboolean(L, b ? 1 : 0)
        case .int(let i): lua_pushinteger(L, lua_Integer(i))
        case .number(let text): lua_pushnumber(L, Double(text) ?? 0)
        case .string(let s): lua_pushlstring(L, s, s.utf8.count)
        case .array(let items):
            lua_createtable(L, Int32(clamping: items.count), 0)  // stack: ..., t
            for (i, item) in items.enumerated() {
                guard push(L, item) else { lifeline_pop(L, 1); return false }
                lua_rawseti(L, -2, lua_Integer(i + 1))
            }
        case .object(let fields):
            lua_createtable(L, 0, Int32(clamping: fields.count))  // stack: ..., t
            for (key, item) in fields {
                lua_pushlstring(L, key, key.utf8.count)  // stack: ..., t, key
                guard push(L, item) else { lifeline_pop(L, 2); return false }
                lua_rawset(L, -3)  // stack: ..., t
            }
        }
        return true
    }
}
