import CLua
import CLuaShims
import Lifeline

/// `lifeline.files`: the files a plugin owns, in its files folder, bridged to `PluginFiles`.
/// A name the rules refuse, a write over the quota and a failing disk raise; a file that is not
/// there is not an error: `read` gives `nil, message`, `size` nil and `remove` false, as
/// `lifeline.store.get` gives nil for a missing key.
enum LuaFiles {
    static let functions: [(String, lifeline_bridged)] = [
        ("files.write", write), ("files.read", read), ("files.remove", remove), ("files.list", list),
        ("files.size", size),
    ]

    /// The plugin's files, or pushes why there are none and returns nil.
    private static func files(_ L: OpaquePointer, _ fname: String) -> PluginFiles? {
        guard let context = LuaModule.runningContext(L, fname) else { return nil }
        do throws(FileError) {
            return try context.files()
        } catch {
            lifeline_push_where_message(L, "\(fname): \(error.message)")
            return nil
        }
    }

    /// The file name at argument 1, a string of UTF-8 text; otherwise pushes why and returns nil.
    private static func nameArgument(_ L: OpaquePointer, _ fname: String) -> String? {
        LuaModule.textArgument(L, 1, fname, invalid: "a file name must be UTF-8 text")
    }

    /// The name and the plugin's files for a call that takes only a name.
    private static func arguments(_ L: OpaquePointer, _ fname: String) -> (String, PluginFiles)? {
        guard let name = nameArgument(L, fname), let files = files(L, fname) else { return nil }
        return (name, files)
    }

    /// lifeline.files.write(name, data)
    static let write: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.files.write"
        guard let name = nameArgument(L, fname) else { return LIFELINE_RAISE }
        guard lua_type(L, 2) == LUA_TSTRING else { return LuaModule.typeError(L, 2, fname, "string") }
        guard let files = files(L, fname) else { return LIFELINE_RAISE }
        var length = 0
        // The string stays on the stack, so its bytes stay put while they are written.
        let data = lua_tolstring(L, 2, &length)
        do throws(FileError) {
            try files.write(name, bytes: UnsafeRawBufferPointer(start: data, count: length))
            return 0
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.files.read(name) -> data | nil, message
    ///
    /// The file is read straight into the Lua string it becomes (`lifeline_push_file`), so it is
    /// held once: the rule is the cap plus about 1 MiB, and a file held twice would pass it.
    static let read: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.files.read"
        guard let (name, files) = arguments(L, fname) else { return LIFELINE_RAISE }
        let plugin = LuaPlugin.from(L)
        do throws(FileError) {
            guard let file = try files.openForReading(name) else {
                lua_pushnil(L)
                LuaModule.push(L, "'\(name)' does not exist in the plugin's files folder")
                return 2
            }
            // A file that grows while it is read is sized again, once.
            for attempt in 0..<2 {
                // Pushed with the cap lifted, so it must fit before a byte is read.
                guard plugin.fits(LuaStore.stringBytes + Int(clamping: file.size)) else { return LIFELINE_NOMEM }
                var seen = 0
                switch Int(lifeline_push_file(L, file.fd, Int(clamping: file.size), &seen)) {
                case Int(LIFELINE_FILE_READ_OK): return 1
                case Int(LIFELINE_FILE_READ_GREW) where attempt == 0:
                    guard file.rewind() else { throw file.readError() }
                case Int(LIFELINE_FILE_READ_FAILED): throw file.readError()
                default: return LIFELINE_NOMEM
                }
            }
            // The file grew again: what it holds cannot be read whole.
            return LuaModule.raise(L, fname, "'\(name)' kept growing while it was read")
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.files.remove(name) -> whether there was a file to remove
    static let remove: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.files.remove"
        guard let (name, files) = arguments(L, fname) else { return LIFELINE_RAISE }
        do throws(FileError) {
            lua_pushboolean(L, try files.remove(name) ? 1 : 0)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.files.size(name) -> bytes | nil
    static let size: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.files.size"
        guard let (name, files) = arguments(L, fname) else { return LIFELINE_RAISE }
        do throws(FileError) {
            if let size = try files.size(name) { lua_pushinteger(L, lua_Integer(size)) } else { lua_pushnil(L) }
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.files.list() -> array of names, in byte order
    static let list: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.files.list"
        guard let files = files(L, fname) else { return LIFELINE_RAISE }
        do throws(FileError) {
            // The host's list of names is bounded by the room left too: past it the walk stops.
            let plugin = LuaPlugin.from(L)
            // A list too long for the room is tried once more after a collection (`fits` makes one
            // when asked for more than the room), as Lua does before it gives up.
            var listed = try files.list(nameBytes: plugin.memoryRoom)
            if listed == nil, !plugin.fits(plugin.memoryRoom + 1) {
                listed = try files.list(nameBytes: plugin.memoryRoom)
            }
            guard let names = listed else { return LIFELINE_NOMEM }
            let size = names.reduce(LuaStore.tableBytes) { $0 + LuaStore.stringBytes + LuaStore.slotBytes + $1.utf8.count }
            guard plugin.fits(size) else { return LIFELINE_NOMEM }
            lua_createtable(L, Int32(clamping: names.count), 0)
            for (i, name) in names.enumerated() {
                LuaModule.push(L, name)
                lua_rawseti(L, -2, lua_Integer(i + 1))
            }
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }
}
