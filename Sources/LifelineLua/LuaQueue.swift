import CLua
import CLuaShims
import Lifeline

/// `lifeline.queue` and the methods of queues and operations.
extension LuaModule {
    /// The methods; `lifeline.queue(name, opts)` itself is the hook `queue_new`.
    static let queueFunctions: [(String, lifeline_bridged)] = [
        ("queue:add", queueAdd), ("queue:addSequential", queueAddSequential), ("queue:suspend", queueSuspend),
        ("queue:resume", queueResume), ("queue:cancelAll", queueCancelAll), ("queue:on", queueOn),
        ("queue:count", queueCount), ("queue:isSuspended", queueIsSuspended),
        ("operation:finish", operationFinish), ("operation:cancel", operationCancel),
        ("operation:isCancelled", operationIsCancelled), ("operation:isFinished", operationIsFinished),
        ("operation:wait", operationWait),
    ]

    /// The queue a method is called on (its name is in the handle), or pushes why not.
    private static func queue(_ L: OpaquePointer, _ fname: String) -> (LuaPlugin, BackgroundQueue)? {
        guard lifeline_to_queue(L, 1) != nil else {
            lifeline_push_typeerror(L, 1, fname, "lifeline.queue")
            return nil
        }
        lua_getiuservalue(L, 1, 1)
        let name = string(L, -1)
        lifeline_pop(L, 1)
        guard let (plugin, context) = context(L), let queue = try? context.queue(name) else {
            lifeline_push_where_message(L, "\(fname): the app is not running")
            return nil
        }
        return (plugin, queue)
    }

    /// lifeline.queue(name, {maxConcurrent = N}) -> queue
    static let queueNew: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.queue"
        guard lua_type(L, 1) == LUA_TSTRING else { return typeError(L, 1, fname, "string") }
        guard let name = LuaModule.name(L, 1, arg: 1, fname, what: "a queue's name") else { return LIFELINE_RAISE }
        var maxConcurrent: Int?
        switch lua_type(L, 2) {
        case LUA_TNIL, LUA_TNONE: break
        case LUA_TTABLE:
            LuaModule.push(L, "maxConcurrent")
            switch lua_rawget(L, 2) {
            case LUA_TNIL: break
            case LUA_TNUMBER:
                var isInteger: Int32 = 0
                let n = lua_tointegerx(L, -1, &isInteger)
                guard isInteger != 0, n >= 1 else {
                    return argError(L, 2, fname, "maxConcurrent must be an integer >= 1")
                }
                maxConcurrent = Int(n)
            default: return argError(L, 2, fname, "maxConcurrent must be an integer >= 1")
            }
            lifeline_pop(L, 1)
        default: return typeError(L, 2, fname, "table")
        }
        guard let (_, context) = context(L) else { return 0 }
        do throws(QueueError) {
            _ = try context.queue(name, maxConcurrent: maxConcurrent)
        } catch {
            return argError(L, 1, fname, error.message)
        }
        lifeline_push_queue(L, name)
        return 1
    }

    /// What an operation is to be, read from `fn` or `{name=, unique=, timeout=, onTimeout=, async=, run=}`.
    private struct OperationSpec {
        var name: String?
        var unique = UniquenessPolicy.ignore
        var timeout = QueueOperation.defaultTimeout
        /// `async`: whether it finishes only by `op:finish()` or its timeout; nil when not said (a
        /// bare function, or a table without the key), and then `run` taking a parameter decides.
        var async: Bool?
    }

    /// Reads the operation at `idx` (raw reads: no metamethod runs); or pushes why it is not one.
    private static func readSpec(_ L: OpaquePointer, _ idx: Int32, _ fname: String, arg: Int32) -> OperationSpec? {
        if lifeline_isfunction(L, idx) != 0 { return OperationSpec() }
        guard lua_type(L, idx) == LUA_TTABLE else {
            lifeline_push_argerror(L, arg, fname, "an operation is a function or a table {run = fn, ...}")
            return nil
        }
        var spec = OperationSpec()
        func field(_ key: String) -> Int32 {
            LuaModule.push(L, key)
            return lua_rawget(L, idx)
        }
        func fail(_ message: String) -> OperationSpec? {
            lifeline_pop(L, 1)
            lifeline_push_argerror(L, arg, fname, message)
            return nil
        }
        guard field("run") == LUA_TFUNCTION || lifeline_isfunction(L, -1) != 0 else {
            return fail("field 'run' must be a function")
        }
        lifeline_pop(L, 1)
        switch field("name") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            guard let name = LuaModule.text(L, -1), name.utf8.count <= maximumNameLength else {
                return fail("field 'name' must be UTF-8 text of at most \(maximumNameLength) bytes")
            }
            spec.name = name
        default: return fail("field 'name' must be a string")
        }
        lifeline_pop(L, 1)
        switch field("unique") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            guard let policy = UniquenessPolicy(rawValue: string(L, -1)) else {
                return fail(
                    "unknown uniqueness policy '\(string(L, -1))'; the policies are: "
                        + UniquenessPolicy.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
            }
            spec.unique = policy
        default: return fail("field 'unique' must be a string")
        }
        lifeline_pop(L, 1)
        if spec.unique != .ignore && spec.name == nil {
            lifeline_push_argerror(L, arg, fname, "unique = \"\(spec.unique.rawValue)\" needs a name")
            return nil
        }
        switch field("timeout") {
        case LUA_TNIL: break
        case LUA_TNUMBER:
            let t = lua_tonumberx(L, -1, nil)
            guard !t.isNaN, t > 0 else { return fail("timeout must be a number of seconds > 0 (math.huge: none)") }
            spec.timeout = t
        default: return fail("field 'timeout' must be a number")
        }
        lifeline_pop(L, 1)
        switch field("onTimeout") {
        case LUA_TNIL: break
        case _ where lifeline_isfunction(L, -1) != 0: break
        default: return fail("field 'onTimeout' must be a function")
        }
        lifeline_pop(L, 1)
        switch field("async") {
        case LUA_TNIL: break
        case LUA_TBOOLEAN: spec.async = lua_toboolean(L, -1) != 0
        default: return fail("field 'async' must be a boolean")
        }
        lifeline_pop(L, 1)
        return spec
    }

    /// Makes the operation at `idx` (already read by `readSpec`): its handle, its coroutine. Nil,
    /// making nothing, when what the host keeps for it does not fit under the plugin's cap.
    private static func makeOperation(
        _ L: OpaquePointer, _ idx: Int32, _ spec: OperationSpec, _ plugin: LuaPlugin, _ context: PluginContext
    ) -> (QueueOperation, LuaOperation)? {
        let isTable = lua_type(L, idx) == LUA_TTABLE
        // The run function on top.
        if isTable {
            LuaModule.push(L, "run")
            lua_rawget(L, idx)
        } else {
            lua_pushvalue(L, idx)
        }
        // Asynchrony is said with `async`. Without it, a run that takes a parameter is asynchronous,
        // as it was before `async` existed; that was a trap (a parameter taken by accident made an
        // operation that never finished), so the plugin is told, once, how to say what it means.
        let takesOperation = lifeline_takes_arguments(L, -1) != 0
        let isAsync = spec.async ?? takesOperation
        let warning =
            spec.async == nil && takesOperation && !plugin.warnedOfImplicitAsync
            ? implicitAsyncWarning(L, -1, spec.name, isTable: isTable) : nil
        let run = ref(L, plugin, -1)
        lifeline_pop(L, 1)
        var timeoutHandler: LuaRef?
        if isTable {
            LuaModule.push(L, "onTimeout")
            let given = lua_rawget(L, idx) != LUA_TNIL  // readSpec checked that it is a function
            if given { timeoutHandler = ref(L, plugin, -1) }
            lifeline_pop(L, 1)
            if given && timeoutHandler == nil { return nil }
        }
        // Nothing is made until both references, and the report's opStarted and opFinished,
        // fit under the cap.
        guard let run,
            plugin.chargeEvents(warning == nil ? 2 : 3, text: 2 * (spec.name?.utf8.count ?? 0) + (warning?.utf8.count ?? 0))
        else { return nil }
        if let warning {
            plugin.warnedOfImplicitAsync = true
            plugin.context?.logger.warning("\(warning)")
        }
        let id = context.makeOperationID()
        lifeline_push_operation(L, lua_Integer(id), spec.name)
        let handleRef = luaL_ref(L, lifeline_registryindex())
        let body = LuaOperation(plugin: plugin, context: context, run: run, handleRef: handleRef)
        let onTimeout: PluginCallback? = timeoutHandler.map { fn in { plugin.call(ref: fn.ref, argument: handleRef) } }
        let op = QueueOperation(
            id: id, name: spec.name, timeout: spec.timeout, finishesWhenCodeEnds: !isAsync, plugin: context.ref,
            onTimeout: onTimeout, body: body)
        body.operation = op
        plugin.operations[id] = body
        return (op, body)
    }

    /// The warning for a run at `idx` that takes a parameter, with no `async` to say what it means.
    private static func implicitAsyncWarning(_ L: OpaquePointer, _ idx: Int32, _ name: String?, isTable: Bool) -> String {
        var source = [CChar](repeating: 0, count: 1024)
        let line = lifeline_function_line(L, idx, &source, source.count)
        let place = line > 0 ? "\(String(cString: source)):\(line): " : ""
        let what = name.map { "operation '\($0)'" } ?? "an operation"
        let fix =
            isTable
            ? "say async = true (or async = false) in q:add{…}"
            : "add it as q:add{run = fn, async = true} (or async = false)"
        return "\(place)\(what): run takes a parameter, so it is treated as asynchronous: it finishes only "
            + "when op:finish() is called or its timeout passes, not when run returns; \(fix)"
    }

    /// q:add(fn | {name=, unique=, timeout=, onTimeout=, async=, run=}) -> op | nil (dropped)
    static let queueAdd: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "add"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard let (plugin, queue) = queue(L, fname) else { return LIFELINE_RAISE }
        guard let spec = readSpec(L, 2, fname, arg: 1) else { return LIFELINE_RAISE }
        guard let (op, body) = makeOperation(L, 2, spec, plugin, queue.context) else { return LIFELINE_NOMEM }
        lua_rawgeti(L, lifeline_registryindex(), lua_Integer(body.handleRef))  // before a drop releases it
        if case .dropped = queue.core.add(op, unique: spec.unique) {
            lifeline_pop(L, 1)
            lua_pushnil(L)
        }
        return 1
    }

    /// q:addSequential({op, op, ...}, {wait = false}) -> {op, op, ...}
    static let queueAddSequential: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "addSequential"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard let (plugin, queue) = queue(L, fname) else { return LIFELINE_RAISE }
        guard lua_type(L, 2) == LUA_TTABLE else { return typeError(L, 2, fname, "table") }
        var wait = false
        switch lua_type(L, 3) {
        case LUA_TNIL, LUA_TNONE: break
        case LUA_TTABLE:
            LuaModule.push(L, "wait")
            wait = lua_rawget(L, 3) != LUA_TNIL && lua_toboolean(L, -1) != 0
            lifeline_pop(L, 1)
        default: return typeError(L, 3, fname, "table")
        }
        let n = Int32(clamping: lua_rawlen(L, 2))
        // Read every operation first, so a bad one adds none.
        var specs: [OperationSpec] = []
        for i in 0..<n {
            lua_rawgeti(L, 2, lua_Integer(i + 1))
            guard let spec = readSpec(L, lua_gettop(L), "\(fname) (operation \(i + 1))", arg: 1) else {
                return LIFELINE_RAISE
            }
            guard spec.unique == .ignore else {
                lifeline_pop(L, 1)
                return argError(L, 1, fname, "operation \(i + 1): unique is for add, not addSequential")
            }
            lifeline_pop(L, 1)
            specs.append(spec)
        }
        let work = wait ? waitingWork(L, "addSequential with wait = true") : nil
        if wait && work == nil { return LIFELINE_RAISE }
        // All or none: what the host keeps for every operation must fit before the first is made.
        guard plugin.fits(Int(n) * 2 * (LuaPlugin.recordBytes + TimelineEvent.recordedBytes)) else {
            return LIFELINE_NOMEM
        }
        lua_createtable(L, n, 0)  // the handles
        let list = lua_gettop(L)
        var ops: [QueueOperation] = []
        for (i, spec) in specs.enumerated() {
            lua_rawgeti(L, 2, lua_Integer(i + 1))
            guard let (op, body) = makeOperation(L, lua_gettop(L), spec, plugin, queue.context) else {
                lifeline_pop(L, 1)
                continue
            }
            lifeline_pop(L, 1)
            lua_rawgeti(L, lifeline_registryindex(), lua_Integer(body.handleRef))
            lua_rawseti(L, list, lua_Integer(i + 1))
            ops.append(op)
        }
        queue.core.addSequential(ops)
        guard let work, let last = ops.last else { return 1 }
        lua_pushvalue(L, list)
        let listRef = luaL_ref(L, lifeline_registryindex())
        work.waitingElsewhere()
        last.whenFinished { [weak work, link = plugin.link] in
            guard let work, work.isWaiting else {
                if let L = link.object?.state { lifeline_unref(L, listRef) }
                return
            }
            work.deliver(
                LuaBackgroundWork.results { L in
                    lua_rawgeti(L, lifeline_registryindex(), lua_Integer(listRef))
                    lifeline_unref(L, listRef)
                    return 1
                })
        }
        return LIFELINE_YIELD
    }

    /// q:suspend()
    static let queueSuspend: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, queue) = queue(L, "suspend") else { return LIFELINE_RAISE }
        queue.suspend()
        return 0
    }

    /// q:resume() -> boolean (false: it was not suspended)
    static let queueResume: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, queue) = queue(L, "resume") else { return LIFELINE_RAISE }
        lua_pushboolean(L, queue.resume() ? 1 : 0)
        return 1
    }

    /// q:cancelAll()
    static let queueCancelAll: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, queue) = queue(L, "cancelAll") else { return LIFELINE_RAISE }
        queue.cancelAll()
        return 0
    }

    /// q:on("willStartOperations" | "didFinishOperations", fn)
    static let queueOn: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "on"
        guard let (plugin, queue) = queue(L, fname) else { return LIFELINE_RAISE }
        guard lua_type(L, 2) == LUA_TSTRING else { return typeError(L, 2, fname, "string") }
        guard let event = QueueEvent(rawValue: string(L, 2)) else {
            return argError(
                L, 1, fname,
                "unknown queue event '\(string(L, 2))'; the events are: "
                    + QueueEvent.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
        }
        guard lifeline_isfunction(L, 3) != 0 else { return typeError(L, 3, fname, "function") }
        guard let fn = ref(L, plugin, 3) else { return LIFELINE_NOMEM }
        queue.core.on(event, plugin: queue.context.ref) { plugin.call(ref: fn.ref, event: nil) }
        return 0
    }

    /// q:count() -> pending + running operations
    static let queueCount: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, queue) = queue(L, "count") else { return LIFELINE_RAISE }
        lua_pushinteger(L, lua_Integer(queue.count))
        return 1
    }

    /// q:isSuspended() -> boolean
    static let queueIsSuspended: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, queue) = queue(L, "isSuspended") else { return LIFELINE_RAISE }
        lua_pushboolean(L, queue.isSuspended ? 1 : 0)
        return 1
    }

    // MARK: - Operations

    /// The operation a method is called on: its flags, and the live operation if not finished.
    private static func operation(_ L: OpaquePointer, _ fname: String) -> (LuaOperation.Flags, LuaOperation?)? {
        guard let handle = lifeline_to_operation(L, 1) else {
            lifeline_push_typeerror(L, 1, fname, "lifeline.operation")
            return nil
        }
        let live = LuaPlugin.from(L).operations[Int(handle.pointee.id)]
        return (LuaOperation.Flags(rawValue: handle.pointee.flags), live)
    }

    /// op:finish() -> boolean (false: it had finished)
    static let operationFinish: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, body) = operation(L, "finish") else { return LIFELINE_RAISE }
        lua_pushboolean(L, body?.operation?.finish() == true ? 1 : 0)
        return 1
    }

    /// op:cancel()
    static let operationCancel: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, body) = operation(L, "cancel") else { return LIFELINE_RAISE }
        body?.operation?.cancel()
        return 0
    }

    /// op:isCancelled() -> boolean: cancelled, timed out or expired
    static let operationIsCancelled: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (flags, body) = operation(L, "isCancelled") else { return LIFELINE_RAISE }
        let stopped: LuaOperation.Flags = [.cancelled, .timedOut, .expired]
        lua_pushboolean(L, (body?.operation?.isCancelled ?? !flags.isDisjoint(with: stopped)) ? 1 : 0)
        return 1
    }

    /// op:isFinished() -> boolean
    static let operationIsFinished: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (_, body) = operation(L, "isFinished") else { return LIFELINE_RAISE }
        lua_pushboolean(L, body == nil ? 1 : 0)
        return 1
    }

    /// op:wait() -> true | false, why
    static let operationWait: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let (flags, body) = operation(L, "wait") else { return LIFELINE_RAISE }
        guard let body, let op = body.operation else { return LuaOperation.pushOutcome(L, flags) }
        guard let work = waitingWork(L, "op:wait") else { return LIFELINE_RAISE }
        guard body.work !== work else {
            lifeline_push_where_message(L, "op:wait: an operation cannot wait for itself")
            return LIFELINE_RAISE
        }
        work.waitingElsewhere()
        op.whenFinished { [weak work, weak op] in
            guard let work, work.isWaiting else { return }
            let flags = op.map(LuaOperation.flags(of:)) ?? [.finished, .cancelled]
            work.deliver(LuaBackgroundWork.results { L in LuaOperation.pushOutcome(L, flags) })
        }
        return LIFELINE_YIELD
    }
}
