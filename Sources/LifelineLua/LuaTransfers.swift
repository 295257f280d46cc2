import CLua
import CLuaShims
import Lifeline

/// `lifeline.transfers`: background downloads and uploads that the host owns, bridged to
/// `PluginContext`'s transfer calls. Every problem (a bad URL, a file name outside the plugin's
/// folder, a host the plugin may not reach, no state dir) raises a clear error.
enum LuaTransfers {
    static let functions: [(String, lifeline_bridged)] = [
        ("transfers.download", download), ("transfers.upload", upload), ("transfers.list", list),
        ("transfers.cancel", cancel),
    ]

    /// Reads string field `key` of the table at 1 (raw: no metamethod runs). nil when absent;
    /// `.failure` with the message when it is not a string.
    private static func field(_ L: OpaquePointer, _ key: String) -> Result<String?, LuaArgumentError> {
        LuaModule.push(L, key)
        defer { lifeline_pop(L, 1) }
        switch lua_rawget(L, 1) {
        case LUA_TNIL: return .success(nil)
        case LUA_TSTRING:
            guard let text = LuaModule.text(L, -1) else {
                return .failure(LuaArgumentError(message: "field '\(key)' must be UTF-8 text"))
            }
            return .success(text)
        default: return .failure(LuaArgumentError(message: "field '\(key)' must be a string"))
        }
    }

    private struct LuaArgumentError: Error { let message: String }

    /// The fields of the table argument, or pushes why not and returns nil.
    private static func fields(
        _ L: OpaquePointer, _ fname: String, required: [String], optional: [String]
    ) -> [String: String]? {
        guard lua_type(L, 1) == LUA_TTABLE else {
            lifeline_push_typeerror(L, 1, fname, "table")
            return nil
        }
        var values: [String: String] = [:]
        for key in required + optional {
            switch field(L, key) {
            case .failure(let error):
                lifeline_push_argerror(L, 1, fname, error.message)
                return nil
            case .success(nil) where required.contains(key):
                lifeline_push_argerror(L, 1, fname, "field '\(key)' is required")
                return nil
            case .success(let value):
                values[key] = value
            }
        }
        return values
    }

    /// Counts what the report keeps for a transfer's events (queued, progress, ended, delivered)
    /// against the plugin's cap.
    private static func chargeEvents(_ L: OpaquePointer, _ fields: [String: String]) -> Bool {
        LuaPlugin.from(L).chargeEvents(6, text: 4 * fields.values.reduce(0) { $0 + $1.utf8.count })
    }

    /// lifeline.transfers.download{url=, to=, sha256=?, id=?} -> id
    static let download: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.transfers.download"
        guard let f = fields(L, fname, required: ["url", "to"], optional: ["sha256", "id"]),
            let context = LuaModule.runningContext(L, fname)
        else { return LIFELINE_RAISE }
        guard chargeEvents(L, f) else { return LIFELINE_NOMEM }
        do throws(TransferError) {
            let id = try context.download(url: f["url"]!, to: f["to"]!, sha256: f["sha256"], id: f["id"])
            LuaModule.push(L, id)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.transfers.upload{url=, from=, method="PUT"|"POST", id=?} -> id
    static let upload: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.transfers.upload"
        guard let f = fields(L, fname, required: ["url", "from"], optional: ["method", "id"]),
            let context = LuaModule.runningContext(L, fname)
        else { return LIFELINE_RAISE }
        guard chargeEvents(L, f) else { return LIFELINE_NOMEM }
        do throws(TransferError) {
            let id = try context.upload(url: f["url"]!, from: f["from"]!, method: f["method"] ?? "PUT", id: f["id"])
            LuaModule.push(L, id)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.transfers.list() -> { {id, kind, url, file, state, received, total, reason}, ... }
    static let list: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.transfers.list"
        guard let context = LuaModule.runningContext(L, fname) else { return LIFELINE_RAISE }
        let records: [TransferRecord]
        do throws(TransferError) {
            records = try context.transfers()
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
        let size = records.reduce(LuaStore.tableBytes) { total, r in
            total + LuaStore.tableBytes + 8 * (LuaStore.slotBytes + LuaStore.stringBytes) + r.url.utf8.count
                + r.file.utf8.count + (r.reason?.utf8.count ?? 0) + r.publicID.utf8.count
        }
        guard LuaPlugin.from(L).fits(size) else { return LIFELINE_NOMEM }
        lua_createtable(L, Int32(records.count), 0)
        for (i, record) in records.enumerated() {
            lua_createtable(L, 0, 8)
            let strings: [(String, String?)] = [
                ("id", record.publicID), ("kind", record.kind.rawValue), ("url", record.url), ("file", record.file),
                ("state", record.state.rawValue), ("reason", record.reason),
            ]
            for (key, value) in strings {
                guard let value else { continue }
                LuaModule.push(L, value)
                LuaModule.setField(L, key)
            }
            lua_pushinteger(L, lua_Integer(record.received))
            lua_setfield(L, -2, "received")
            if let total = record.total {
                lua_pushinteger(L, lua_Integer(total))
                lua_setfield(L, -2, "total")
            }
            lua_rawseti(L, -2, lua_Integer(i + 1))
        }
        return 1
    }

    /// lifeline.transfers.cancel(id) -> boolean
    static let cancel: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.transfers.cancel"
        guard lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER else {
            lifeline_push_typeerror(L, 1, fname, "string")
            return LIFELINE_RAISE
        }
        let id = LuaModule.string(L, 1)
        guard let context = LuaModule.runningContext(L, fname) else { return LIFELINE_RAISE }
        do throws(TransferError) {
            lua_pushboolean(L, try context.cancelTransfer(id) ? 1 : 0)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }
}
