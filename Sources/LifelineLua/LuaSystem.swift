import CLua
import CLuaShims
import Lifeline

/// `lifeline.tasks` (BGTaskScheduler: register, submit, cancel, pending) and the completions the
/// system hands a plugin: `event.complete` of `performFetch`, `didReceiveRemoteNotification` and
/// `didFinishTransferEvents`, and a task's `setTaskCompleted`. Every refusal (an identifier
/// plugin.toml does not permit, a late registration, a profile without the API) raises a clear
/// error.
enum LuaSystem {
    static let functions: [(String, lifeline_bridged)] = [
        ("tasks.register", register), ("tasks.submit", submit), ("tasks.cancel", cancel), ("tasks.pending", pending),
    ]

    /// The task tables a Lua handler was given, by task id, until each task is over.
    private final class TaskTables {
        var refs: [Int: Int32] = [:]
        /// Tasks completed inside their handler's own call, before their table's reference was
        /// handed back: released as soon as it is.
        var finishedEarly: Set<Int> = []
    }

    /// lifeline.tasks.register(identifier, function(task) ... end)
    static let register: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.tasks.register"
        guard lua_type(L, 1) == LUA_TSTRING else { return LuaModule.typeError(L, 1, fname, "string") }
        guard lifeline_isfunction(L, 2) != 0 else { return LuaModule.typeError(L, 2, fname, "function") }
        guard let (plugin, context) = LuaModule.context(L) else {
            lifeline_push_where_message(L, "\(fname): the app is not running")
            return LIFELINE_RAISE
        }
        let identifier = LuaModule.string(L, 1)
        guard let fn = LuaModule.ref(L, plugin, 2) else { return LIFELINE_NOMEM }
        let tables = TaskTables()
        // The closures hold the plugin strongly: the host drops them when the app ends, before it
        // closes the plugin.
        let handler = SystemTaskHandler(
            run: { task in
                let (outcome, table) = plugin.callTask(ref: fn.ref, task)
                if tables.finishedEarly.remove(task.id) != nil {
                    if table != LUA_NOREF, let L = plugin.state { lifeline_unref(L, table) }
                } else {
                    tables.refs[task.id] = table  // LUA_NOREF too: the task is known to have run
                }
                return outcome
            },
            expire: { task in plugin.callTaskExpiration(tableRef: tables.refs[task.id] ?? LUA_NOREF) },
            finished: { task in
                if let table = tables.refs.removeValue(forKey: task.id) {
                    if table != LUA_NOREF, let L = plugin.state { lifeline_unref(L, table) }
                } else {
                    tables.finishedEarly.insert(task.id)
                }
            })
        do throws(SystemTaskError) {
            try context.registerTask(identifier, handler: handler)
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
        return 0
    }

    /// Reads field `key` of the table at 1 without running a metamethod; pushes nothing.
    private static func field<T>(_ L: OpaquePointer, _ key: String, _ read: (Int32) -> T?) -> T?? {
        LuaModule.push(L, key)
        let type = lua_rawget(L, 1)
        defer { lifeline_pop(L, 1) }
        if type == LUA_TNIL { return .some(nil) }
        guard let value = read(type) else { return nil }
        return .some(value)
    }

    /// lifeline.tasks.submit{identifier=, kind="refresh"|"processing", earliestBegin=SECONDS,
    /// requiresNetwork=BOOL, requiresPower=BOOL}
    static let submit: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.tasks.submit"
        guard lua_type(L, 1) == LUA_TTABLE else { return LuaModule.typeError(L, 1, fname, "table") }
        guard let identifier = field(L, "identifier", { $0 == LUA_TSTRING ? LuaModule.string(L, -1) : nil }) else {
            return LuaModule.argError(L, 1, fname, "field 'identifier' must be a string")
        }
        guard let identifier else { return LuaModule.argError(L, 1, fname, "field 'identifier' is required") }
        let kinds = SystemTaskKind.allCases.map(\.rawValue).joined(separator: " or ")
        guard let kindName = field(L, "kind", { $0 == LUA_TSTRING ? LuaModule.string(L, -1) : nil }) else {
            return LuaModule.argError(L, 1, fname, "field 'kind' must be \(kinds)")
        }
        guard let kindName, let kind = SystemTaskKind(rawValue: kindName) else {
            return LuaModule.argError(L, 1, fname, "field 'kind' must be \(kinds)")
        }
        guard let earliest = field(L, "earliestBegin", { $0 == LUA_TNUMBER ? lua_tonumberx(L, -1, nil) : nil }) else {
            return LuaModule.argError(L, 1, fname, "field 'earliestBegin' must be a number of seconds")
        }
        var flags: [Bool] = []
        for key in ["requiresNetwork", "requiresPower"] {
            guard let flag = field(L, key, { $0 == LUA_TBOOLEAN ? lua_toboolean(L, -1) != 0 : nil }) else {
                return LuaModule.argError(L, 1, fname, "field '\(key)' must be a boolean")
            }
            flags.append(flag ?? false)
        }
        guard let context = LuaModule.runningContext(L, fname) else { return LIFELINE_RAISE }
        guard LuaPlugin.from(L).chargeEvents(4, text: 2 * identifier.utf8.count) else { return LIFELINE_NOMEM }
        do throws(SystemTaskError) {
            try context.submitTask(
                SystemTaskRequest(
                    identifier: identifier, kind: kind, earliestBegin: earliest ?? 0, requiresNetwork: flags[0],
                    requiresPower: flags[1]))
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
        return 0
    }

    /// lifeline.tasks.cancel(identifier) -> boolean
    static let cancel: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.tasks.cancel"
        guard lua_type(L, 1) == LUA_TSTRING else { return LuaModule.typeError(L, 1, fname, "string") }
        guard let context = LuaModule.runningContext(L, fname) else { return LIFELINE_RAISE }
        guard LuaPlugin.from(L).chargeEvents(1) else { return LIFELINE_NOMEM }
        do throws(SystemTaskError) {
            lua_pushboolean(L, try context.cancelTask(LuaModule.string(L, 1)) ? 1 : 0)
            return 1
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
    }

    /// lifeline.tasks.pending() -> { {identifier, kind, earliestBegin, requiresNetwork, requiresPower}, ... }
    static let pending: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.tasks.pending"
        guard let context = LuaModule.runningContext(L, fname) else { return LIFELINE_RAISE }
        let list: [PendingSystemTask]
        do throws(SystemTaskError) {
            list = try context.pendingTasks()
        } catch {
            return LuaModule.raise(L, fname, error.message)
        }
        let size = list.reduce(LuaStore.tableBytes) { total, p in
            total + LuaStore.tableBytes + 5 * (LuaStore.slotBytes + LuaStore.stringBytes) + p.request.identifier.utf8.count
        }
        guard LuaPlugin.from(L).fits(size) else { return LIFELINE_NOMEM }
        lua_createtable(L, Int32(list.count), 0)
        for (i, p) in list.enumerated() {
            lua_createtable(L, 0, 5)
            LuaModule.push(L, p.request.identifier)
            LuaModule.setField(L, "identifier")
            LuaModule.push(L, p.request.kind.rawValue)
            LuaModule.setField(L, "kind")
            lua_pushnumber(L, p.earliestBegin)
            lua_setfield(L, -2, "earliestBegin")
            lua_pushboolean(L, p.request.requiresNetwork ? 1 : 0)
            lua_setfield(L, -2, "requiresNetwork")
            lua_pushboolean(L, p.request.requiresPower ? 1 : 0)
            lua_setfield(L, -2, "requiresPower")
            lua_rawseti(L, -2, lua_Integer(i + 1))
        }
        return 1
    }

    /// A completion: `event.complete(result)` (`newData`, `noData` or `failed`; none for
    /// `didFinishTransferEvents`) or `task:setTaskCompleted(success)`. Either may be called as a
    /// method. Returns false when it was called already or its time ran out.
    static let complete: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "complete"
        let id = Int(lifeline_completion_id(L))
        // Called as a method (event:complete(...), task:setTaskCompleted(...)): the table is first.
        let arg: Int32 = lua_type(L, 1) == LUA_TTABLE ? 2 : 1
        let value: CompletionValue
        switch lua_type(L, arg) {
        case LUA_TSTRING:
            let word = LuaModule.string(L, arg)
            guard let result = FetchResult(rawValue: word) else {
                return LuaModule.argError(L, arg, fname, "'\(word)' is not a result; the results are \(FetchResult.names)")
            }
            value = .fetch(result)
        case LUA_TBOOLEAN: value = .task(success: lua_toboolean(L, arg) != 0)
        case LUA_TNIL, LUA_TNONE: value = .none
        default: return LuaModule.typeError(L, arg, fname, "string or boolean")
        }
        guard let (_, context) = LuaModule.context(L) else {
            lua_pushboolean(L, 0)  // the launch is over: its completions with it
            return 1
        }
        do throws(SystemTaskError) {
            lua_pushboolean(L, try context.complete(id, with: value) ? 1 : 0)
            return 1
        } catch {
            lifeline_push_where_message(L, error.message)
            return LIFELINE_RAISE
        }
    }
}
