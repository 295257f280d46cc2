import CLua
import CLuaShims

// Strings cross the boundary with their length, both ways: a Lua string may hold NUL bytes, and a
// C string would end at the first one (two store keys or config keys that differ after a NUL
// would become one). Every push of a Swift string goes through these, never through
// lua_pushstring or lua_setfield with a Swift string.

/// Pushes `message` prefixed with where the running Lua function was called, as luaL_error does.
func lifeline_push_where_message(_ L: OpaquePointer, _ message: String) {
    lifeline_push_where_message(L, message, message.utf8.count)
}

/// Pushes the message luaL_argerror would raise, without raising it.
func lifeline_push_argerror(_ L: OpaquePointer, _ arg: Int32, _ fname: String, _ message: String) {
    lifeline_push_argerror(L, arg, fname, message, message.utf8.count)
}

/// Pushes the error value of a failed wait or request (see the C function).
func lifeline_push_error(_ L: OpaquePointer, _ kind: String, _ message: String) {
    lifeline_push_error(L, kind, message, message.utf8.count)
}

extension LuaModule {
    /// Pushes `text` with all its bytes.
    static func push(_ L: OpaquePointer, _ text: String) {
        lua_pushlstring(L, text, text.utf8.count)
    }

    /// `t[key] = v` for the table just below the value on top, raw (no metamethod runs); pops v.
    static func setField(_ L: OpaquePointer, _ key: String) {
        push(L, key)        // stack: ..., t, v, key
        lua_rotate(L, -2, 1)  // stack: ..., t, key, v
        lua_rawset(L, -3)   // stack: ..., t
    }

    /// The Lua string at `idx` as text the host keeps (a name, an id, a key, a URL): nil when its
    /// bytes are not UTF-8, which the host could not keep without changing them.
    static func text(_ L: OpaquePointer, _ idx: Int32) -> String? {
        var len = 0
        guard let p = lua_tolstring(L, idx, &len) else { return nil }
        let bytes = UnsafeRawBufferPointer(start: p, count: len)
        // Most texts are ASCII, which is UTF-8 as it is: the decoder takes them at once, where the
        // generic validation costs about a thousand instructions a call.
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Whether every byte is below 0x80, checked a word at a time.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let p = bytes.baseAddress else { return true }
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= bytes.count {
            high |= p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            high |= UInt64(p.load(fromByteOffset: i, as: UInt8.self))
            i += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}

extension LuaModule {
    /// The string at `idx` as a name the host keeps (a task's, a queue's, an operation's), or
    /// pushes why it cannot be one (for argument `arg` of `fname`, `what` naming it) and returns nil.
    /// A name is never cut or changed: two names the plugin tells apart stay apart.
    static func name(_ L: OpaquePointer, _ idx: Int32, arg: Int32, _ fname: String, what: String = "a name")
        -> String?
    {
        guard let name = text(L, idx) else {
            lifeline_push_argerror(L, arg, fname, "\(what) must be UTF-8 text")
            return nil
        }
        guard name.utf8.count <= maximumNameLength else {
            lifeline_push_argerror(L, arg, fname, "\(what) is at most \(maximumNameLength) bytes long")
            return nil
        }
        return name
    }
}
