import CLua
import CLuaShims
import Lifeline

/// `lifeline.background`, `lifeline.sleep` and the methods of the task handle background returns:
/// work that runs in a coroutine the host resumes, and the calls that wait inside it.
extension LuaModule {
    static let taskFunctions: [(String, lifeline_bridged)] = [
        ("background", background), ("sleep", sleep),
        ("task:cancel", taskCancel), ("task:done", taskDone), ("task:wait", taskWait),
    ]

    /// lifeline.background([name | {name =, task =}], fn, ...) -> task
    static let background: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.background"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        var name: String?
        var held: Int?
        switch lua_type(L, 1) {
        case LUA_TSTRING:
            guard let n = LuaModule.name(L, 1, arg: 1, fname) else { return LIFELINE_RAISE }
            name = n
        case LUA_TNIL: break
        case LUA_TTABLE:
            // Raw reads: no metamethod runs.
            LuaModule.push(L, "name")
            switch lua_rawget(L, 1) {
            case LUA_TNIL: break
            case LUA_TSTRING:
                guard let n = LuaModule.name(L, -1, arg: 1, fname, what: "field 'name'") else { return LIFELINE_RAISE }
                name = n
            default:
                lifeline_pop(L, 1)
                return argError(L, 1, fname, "field 'name' must be a string")
            }
            lifeline_pop(L, 1)
            LuaModule.push(L, "task")
            switch lua_rawget(L, 1) {
            case LUA_TNIL: break
            case LUA_TNUMBER:
                var isInteger: Int32 = 0
                let id = lua_tointegerx(L, -1, &isInteger)
                guard isInteger != 0, id > 0 else {
                    lifeline_pop(L, 1)
                    return argError(L, 1, fname, "field 'task' must be a background task's id (an integer > 0)")
                }
                held = Int(id)
            default:
                lifeline_pop(L, 1)
                return argError(L, 1, fname, "field 'task' must be a background task's id (an integer > 0)")
            }
            lifeline_pop(L, 1)
        default: return typeError(L, 1, fname, "string or table")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        return withPlugin(L) { plugin in
            guard let context = plugin.unretainedContext else { return 0 }
            return context._withUnsafeGuaranteedRef { context in
                if let held { return beginUnder(held, L, plugin, context, name: name) }
                return begin(L, plugin, context, name: name)
            }
        }
    }

    /// `background` under task `id`, which the plugin holds: no task begins, and none ends.
    private static func beginUnder(
        _ id: Int, _ L: OpaquePointer, _ plugin: LuaPlugin, _ context: PluginContext, name: String?
    ) -> Int32 {
        guard let task = context.heldTask(id) else {
            return argError(
                L, 1, "lifeline.background",
                "task \(id) is not an active background task of this plugin: begin one with "
                    + "lifeline.beginBackgroundTask, and run work under it until you end it")
        }
        guard let charge = HostCharge(plugin, bytes: 2 * LuaPlugin.recordBytes) else { return LIFELINE_NOMEM }
        let key = plugin.nextHeldWorkKey()
        guard let (co, handleRef) = prepare(L, taskID: id, key: key) else { return LIFELINE_RAISE }
        let top = lua_gettop(L) - 1  // the handle is on top
        let work = LuaBackgroundWork(
            taskID: id, ownsTask: false, key: key, number: id, name: name, plugin: plugin, context: context,
            thread: co, threadRef: LUA_NOREF, handleRef: handleRef, arguments: 1 + max(0, top - 2), charge: charge)
        context.watchTask(id, work)
        plugin.remember(work)
        work.start()
        // Expiration was signalled before the work began: fn never runs, as for a task begun then.
        if task.expiring { work.interrupt(.expired) }
        return 1
    }

    /// The coroutine of a work, with fn and its arguments (the handle first) on it, and the handle
    /// pushed on L and held by a registry reference; or pushes why not and returns nil.
    private static func prepare(_ L: OpaquePointer, taskID: Int, key: Int) -> (OpaquePointer, Int32)? {
        let top = lua_gettop(L)
        guard let co = lua_newthread(L), lua_checkstack(co, top + 2) != 0 else {
            push(L, "lifeline.background: cannot create a coroutine")
            return nil
        }
        lifeline_mark_host_thread(co)
        // The handle holds the coroutine until the work finishes, so one registry reference, the
        // handle's, keeps both.
        lifeline_push_task(L, lua_Integer(taskID), lua_Integer(key))  // stack: args..., co, handle
        lua_rotate(L, -2, 1)                    // stack: args..., handle, co
        lua_setiuservalue(L, -2, 2)             // stack: args..., handle
        lua_pushvalue(L, -1)
        let handleRef = luaL_ref(L, lifeline_registryindex())
        lua_pushvalue(L, 2)  // fn
        lua_xmove(L, co, 1)
        lua_pushvalue(L, -1)  // the handle: fn's first argument
        lua_xmove(L, co, 1)
        if top >= 3 {
            for i in 3...top {
                lua_pushvalue(L, i)
                lua_xmove(L, co, 1)
            }
        }
        return (co, handleRef)
    }

    /// The rest of `background`, with its checked arguments.
    private static func begin(_ L: OpaquePointer, _ plugin: LuaPlugin, _ context: PluginContext, name: String?) -> Int32 {
        // The work, its task and its waits: what the host keeps while it runs.
        guard let charge = HostCharge(plugin, bytes: 2 * LuaPlugin.recordBytes),
            plugin.chargeEvents(3, text: name?.utf8.count ?? 0)
        else { return LIFELINE_NOMEM }
        let top = lua_gettop(L)
        // The expiration handler is set once the work exists (below): nothing can expire the task
        // before then, since expiration never comes from inside beginBackgroundTask (T3).
        let id = context.beginBackgroundTask(name: name, expirationHandler: nil)
        guard id != 0 else {
            // The app is not running, or the task limit was passed (the caller is being stopped).
            lifeline_push_task(L, 0, 0)
            return 1
        }
        guard let (co, handleRef) = prepare(L, taskID: id, key: id) else { return LIFELINE_RAISE }
        let work = LuaBackgroundWork(
            taskID: id, number: id, name: name, plugin: plugin, context: context, thread: co,
            threadRef: LUA_NOREF, handleRef: handleRef, arguments: 1 + max(0, top - 2), charge: charge)
        // The host drops the handler, and its hold on the work, when the task ends, which the
        // work's end does. It holds nothing but the work, so it needs no allocation of its own.
        context.setExpirationHandler(task: id) { [work] in
            work.interrupt(.expired)
            return .returned
        }
        plugin.remember(work)
        work.start()
        return 1
    }

    /// The work whose coroutine makes a waiting call; or pushes why it cannot wait and returns nil.
    static func waitingWork(_ L: OpaquePointer, _ fname: String) -> LuaBackgroundWork? {
        guard let work = LuaPlugin.from(L).work(thread: L) else {
            lifeline_push_where_message(
                L,
                "\(fname) waits, so it must be called from inside a function that lifeline.background runs "
                    + "(not from a handler, a timer, the main chunk or a coroutine of your own); "
                    + "wrap the work in lifeline.background(name, fn)")
            return nil
        }
        guard LuaPlugin.from(L).openTransaction == nil else {
            lifeline_push_where_message(
                L, "\(fname) cannot wait inside lifeline.store.transaction: a transaction may not wait; "
                    + "wait before it or after it")
            return nil
        }
        guard lua_isyieldable(L) != 0 else {
            lifeline_push_where_message(
                L, "\(fname) cannot wait here: it was called inside a C function that cannot yield "
                    + "(such as table.sort or a metamethod called from C)")
            return nil
        }
        if let interruption = work.takePendingInterruption() {
            // The task cancelled itself while it ran: this wait raises that at once.
            lifeline_push_error(L, interruption.kind.rawValue, work.interruptionMessage)
            return nil
        }
        return work
    }

    /// lifeline.sleep(seconds): waits on the host's clock.
    static let sleep: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.sleep"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard lua_type(L, 1) == LUA_TNUMBER else { return typeError(L, 1, fname, "number") }
        let seconds = lua_tonumberx(L, 1, nil)
        guard seconds.isFinite, seconds >= 0 else {
            return argError(L, 1, fname, "seconds must be a finite number >= 0")
        }
        guard let work = waitingWork(L, fname) else { return LIFELINE_RAISE }
        guard let (_, context) = context(L) else { return 0 }
        // The wait holds the work until it is over or cancelled (a weak reference would give the
        // work a side table).
        let waitID = context.sleep(seconds) { [work] slept in
            if slept { work.deliver(LuaBackgroundWork.results { _ in 0 }) }
        }
        guard waitID != 0 else { return 0 }
        work.waiting(on: waitID)
        return LIFELINE_YIELD
    }


    /// task:cancel()
    static let taskCancel: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "cancel", "lifeline.task") }
        LuaPlugin.from(L).work(id: Int(handle.pointee.work))?.interrupt(.cancelled)
        return 0
    }

    /// task:done() -> boolean
    static let taskDone: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "done", "lifeline.task") }
        lua_pushboolean(L, LuaPlugin.from(L).work(id: Int(handle.pointee.work)) == nil ? 1 : 0)
        return 1
    }

    /// task:wait() -> true, fn's values... | false, err
    static let taskWait: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "wait", "lifeline.task") }
        let plugin = LuaPlugin.from(L)
        guard let target = plugin.work(id: Int(handle.pointee.work)) else {
            // Finished: what became of it, and the values fn returned, are in the handle.
            let outcome = LuaBackgroundWork.Outcome(rawValue: handle.pointee.outcome) ?? .cancelled
            guard plugin.fits(Int(handle.pointee.results) * LuaBackgroundWork.slotBytes) else { return LIFELINE_NOMEM }
            lua_getiuservalue(L, 1, 1)
            let message = lua_type(L, -1) == LUA_TSTRING ? string(L, -1) : nil
            lifeline_pop(L, 1)
            return LuaBackgroundWork.pushOutcome(L, outcome, message, handle: 1)
        }
        guard let work = waitingWork(L, "task:wait") else { return LIFELINE_RAISE }
        guard work !== target else {
            lifeline_push_where_message(L, "task:wait: a task cannot wait for itself")
            return LIFELINE_RAISE
        }
        guard !target.waitsFor(work) else {
            // The chain of waits ends at `target`, so it always ends: no cycle can form but here.
            lifeline_push_where_message(
                L, "task:wait: \(target.handlerName) already waits (through task:wait) for this task, "
                    + "so each would wait for the other forever")
            return LIFELINE_RAISE
        }
        work.waiting(for: target)
        return LIFELINE_YIELD
    }
}
