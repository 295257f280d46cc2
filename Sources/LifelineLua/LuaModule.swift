import CLua
import CLuaShims
import Foundation
import Lifeline
import Logging

/// The `lifeline` module's functions (SPEC 6.2), bridged to Lua.
///
/// Each function is a `@convention(c)` Swift function called through the C trampoline. It returns
/// its result count, or `LIFELINE_RAISE` with a message pushed: the trampoline raises it, so Swift
/// never raises a Lua error itself (SPEC 6.4). They only use Lua calls that cannot raise, and the
/// memory cap is lifted while they run, so no error can longjmp through them.
enum LuaModule {
    /// The longest task name the host keeps; a plugin cannot make the host hold more.
    static let maximumNameLength = 1024

    /// Handle kinds (`LifelineHandle.kind`).
    static let subscriptionHandle: Int32 = 1
    static let timerHandle: Int32 = 2

    /// The functions of this file, each named for its place in the module (see `LifelineReg`):
    /// "name" is lifeline.name, "table.name" lifeline.table.name, "class:name" a method.
    static let functions: [(String, lifeline_bridged)] = [
        ("on", on),
        ("beginBackgroundTask", beginBackgroundTask),
        ("endBackgroundTask", endBackgroundTask),
        ("backgroundTimeRemaining", backgroundTimeRemaining),
        ("state", state),
        ("now", now),
        ("profile", profile),
        ("after", after),
        ("handle:cancel", cancelHandle),
    ]

    /// Every Swift function of the module, for `lifeline_open_module`. Each file lists its own
    /// functions beside them; a new file of functions adds its list here.
    nonisolated(unsafe) static let registry = registrations(
        functions + taskFunctions + httpFunctions + LuaStore.functions + LuaTransfers.functions
            + queueFunctions + LuaFiles.functions + LuaSystem.functions)

    /// What the module's C parts call on the host.
    static let hooks = LifelineHooks(
        log: logSink, epoch_now: epochNow, clock_now: now, config: pushConfig, queue_new: queueNew,
        store_begin: LuaStore.begin, store_commit: LuaStore.commit, store_rollback: LuaStore.rollback,
        complete: LuaSystem.complete)

    /// Builds the `lifeline` module in the state `L` (protected); returns the status.
    static func open(_ L: OpaquePointer) -> Int32 {
        withUnsafePointer(to: hooks) { lifeline_open_module(L, registry, $0) }
    }

    /// A C array of registrations, ended by {NULL, NULL}; never freed (it lives as long as the process).
    private static func registrations(_ functions: [(String, lifeline_bridged)]) -> UnsafePointer<LifelineReg> {
        let regs = UnsafeMutablePointer<LifelineReg>.allocate(capacity: functions.count + 1)
        for (i, (name, fn)) in functions.enumerated() {
            regs[i] = LifelineReg(name: strdup(name), fn: fn)
        }
        regs[functions.count] = LifelineReg(name: nil, fn: nil)
        return UnsafePointer(regs)
    }

    // MARK: - Helpers

    static func context(_ L: OpaquePointer) -> (LuaPlugin, PluginContext)? {
        let plugin = LuaPlugin.from(L)
        guard let context = plugin.context else { return nil }
        return (plugin, context)
    }

    /// Runs `body` with the plugin of `L`, not retained. A module function runs inside its
    /// plugin's state, which holds the plugin and its context: the host closes a state, and drops
    /// its context, only when no call is in it. So the hottest functions use both unretained
    /// (`plugin.unretainedContext`, taken with `_withUnsafeGuaranteedRef` where it is called):
    /// each retain is an atomic operation, and `context(L)` made three pairs in every task call.
    @inline(__always)
    static func withPlugin<R>(_ L: OpaquePointer, _ body: (LuaPlugin) -> R) -> R {
        Unmanaged<LuaPlugin>.fromOpaque(lifeline_owner(L)!)._withUnsafeGuaranteedRef(body)
    }

    /// The running app's context, or pushes "`fname`: the app is not running" and returns nil.
    static func runningContext(_ L: OpaquePointer, _ fname: String) -> PluginContext? {
        guard let (_, context) = context(L) else {
            lifeline_push_where_message(L, "\(fname): the app is not running")
            return nil
        }
        return context
    }

    /// Raises for a call that would start new work while a reload unloads the plugin's
    /// generation, as OpenResty answers "process exiting": its tasks may still end, and nothing
    /// new may begin. One flag's read; nil when the call may go on.
    @inline(__always)
    static func refuseWhileUnloading(_ L: OpaquePointer, _ fname: String) -> Int32? {
        guard withPlugin(L, { $0.isUnloading }) else { return nil }
        return raise(L, fname, PluginContext.unloadingMessage)
    }

    /// Pushes "`fname`: `message`", where the Lua code called, for the trampoline to raise: the
    /// form of every refusal a module function reports (a store over its quota, a refused name).
    static func raise(_ L: OpaquePointer, _ fname: String, _ message: String) -> Int32 {
        lifeline_push_where_message(L, "\(fname): \(message)")
        return LIFELINE_RAISE
    }

    /// The argument at `idx`, a Lua string of valid UTF-8; otherwise pushes the argument error
    /// (`invalid` when it is a string that is not UTF-8) and returns nil.
    static func textArgument(_ L: OpaquePointer, _ idx: Int32, _ fname: String, invalid: String) -> String? {
        guard lua_type(L, idx) == LUA_TSTRING else {
            lifeline_push_typeerror(L, idx, fname, "string")
            return nil
        }
        guard let text = text(L, idx) else {
            lifeline_push_argerror(L, idx, fname, invalid)
            return nil
        }
        return text
    }

    static func typeError(_ L: OpaquePointer, _ arg: Int32, _ fname: String, _ expected: String) -> Int32 {
        lifeline_push_typeerror(L, arg, fname, expected)
        return LIFELINE_RAISE
    }

    static func argError(_ L: OpaquePointer, _ arg: Int32, _ fname: String, _ message: String) -> Int32 {
        lifeline_push_argerror(L, arg, fname, message)
        return LIFELINE_RAISE
    }

    /// The string at `idx`, which must be a Lua string (so no conversion, which could allocate).
    static func string(_ L: OpaquePointer, _ idx: Int32) -> String {
        var len = 0
        guard let p = lua_tolstring(L, idx, &len) else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: len), as: UTF8.self)
    }

    /// A reference to the function at `idx` for the host to keep, counted against the plugin's cap;
    /// nil when it does not fit (the caller returns LIFELINE_NOMEM).
    static func ref(_ L: OpaquePointer, _ plugin: LuaPlugin, _ idx: Int32) -> LuaRef? {
        LuaRef(L, plugin, function: idx)
    }

    // MARK: - Functions

    /// lifeline.on(event, fn) -> handle
    static let on: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.on"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard lua_type(L, 1) == LUA_TSTRING else { return typeError(L, 1, fname, "string") }
        let eventName = string(L, 1)
        guard let event = LifecycleEventName(rawValue: eventName) else {
            return argError(
                L, 1, fname, "unknown event '\(eventName)'; the events are: \(LifecycleEventName.validNames)")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        guard let (plugin, context) = context(L) else { return 0 }
        guard let fn = ref(L, plugin, 2) else { return LIFELINE_NOMEM }
        // The closure holds the plugin strongly: the host drops it before it closes the plugin,
        // and the plugin holds nothing of the host's, so there is no cycle.
        let id = context.subscribe(event, handler: { e in plugin.call(ref: fn.ref, event: e) })
        lifeline_push_handle(L, subscriptionHandle, lua_Integer(id))
        return 1
    }

    /// lifeline.beginBackgroundTask([name], [onExpire]) -> id
    static let beginBackgroundTask: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.beginBackgroundTask"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        var name: String?
        var handlerIndex: Int32 = 2
        switch lua_type(L, 1) {
        case LUA_TSTRING:
            guard let n = LuaModule.name(L, 1, arg: 1, fname) else { return LIFELINE_RAISE }
            name = n
        case LUA_TNIL, LUA_TNONE: break
        case LUA_TFUNCTION: handlerIndex = 1  // beginBackgroundTask(onExpire)
        default: return typeError(L, 1, fname, "string or function")
        }
        if handlerIndex == 2 && lifeline_isnoneornil(L, 2) == 0 && lifeline_isfunction(L, 2) == 0 {
            return typeError(L, 2, fname, "function")
        }
        return withPlugin(L) { plugin in
            guard let context = plugin.unretainedContext else {
                lua_pushinteger(L, 0)
                return 1
            }
            var handler: PluginCallback?
            if lifeline_isfunction(L, handlerIndex) != 0 {
                guard let fn = ref(L, plugin, handlerIndex) else { return LIFELINE_NOMEM }
                handler = { fn.call() }
            }
            // taskBegan, then taskEnded or taskExpiring and taskEnded.
            guard plugin.chargeEvents(3, text: name?.utf8.count ?? 0) else { return LIFELINE_NOMEM }
            let id = context._withUnsafeGuaranteedRef { $0.beginBackgroundTask(name: name, expirationHandler: handler) }
            lua_pushinteger(L, lua_Integer(id))
            return 1
        }
    }

    /// lifeline.endBackgroundTask(id) -> boolean
    static let endBackgroundTask: lifeline_bridged = { L in
        guard let L else { return 0 }
        var isInteger: Int32 = 0
        let id = lua_tointegerx(L, 1, &isInteger)
        guard lua_type(L, 1) == LUA_TNUMBER, isInteger != 0 else {
            if lua_type(L, 1) == LUA_TNUMBER {
                return argError(L, 1, "lifeline.endBackgroundTask", "number has no integer representation")
            }
            return typeError(L, 1, "lifeline.endBackgroundTask", "integer")
        }
        return withPlugin(L) { plugin in
            guard let context = plugin.unretainedContext else {
                lua_pushboolean(L, 0)
                return 1
            }
            // An unknown id is recorded (endUnknownTask); a known one's end was counted at its begin.
            guard plugin.chargeEvents(1) else { return LIFELINE_NOMEM }
            let ended = context._withUnsafeGuaranteedRef { $0.endBackgroundTask(Int(id)) }
            if ended { plugin.refundEvents(1) }
            lua_pushboolean(L, ended ? 1 : 0)
            return 1
        }
    }

    /// lifeline.backgroundTimeRemaining() -> seconds (math.huge in the foreground)
    static let backgroundTimeRemaining: lifeline_bridged = { L in
        guard let L else { return 0 }
        let remaining = context(L)?.1.backgroundTimeRemaining ?? .greatestFiniteMagnitude
        lua_pushnumber(L, remaining == .greatestFiniteMagnitude ? lifeline_huge() : remaining)
        return 1
    }

    /// lifeline.state() -> "inactive" | "active" | "background"
    static let state: lifeline_bridged = { L in
        guard let L else { return 0 }
        push(L, context(L)?.1.state.rawValue ?? "inactive")
        return 1
    }

    /// lifeline.profile() -> {name, budget, expirationLead, launchLimit, backgroundLimit,
    /// transitionLimit, terminateLimit, expirationHandlerLimit, taskLimit}: the figures in force,
    /// flags included, so a plugin can plan its work against the budget it really has.
    static let profile: lifeline_bridged = { L in
        guard let L else { return 0 }
        let plugin = LuaPlugin.from(L)
        guard let profile = context(L)?.1.profile else { return 0 }
        let figures: [(String, Double)] = [
            ("budget", profile.budget), ("expirationLead", profile.expirationLead),
            ("launchLimit", profile.launchLimit), ("backgroundLimit", profile.backgroundLimit),
            ("transitionLimit", profile.transitionLimit), ("terminateLimit", profile.terminateLimit),
            ("expirationHandlerLimit", profile.expirationHandlerLimit),
        ]
        // Pushed with the cap lifted, so it must fit first.
        guard plugin.fits(LuaStore.tableBytes + (figures.count + 2) * (LuaStore.slotBytes + LuaStore.stringBytes + 32))
        else { return LIFELINE_NOMEM }
        lua_createtable(L, 0, Int32(figures.count + 2))  // stack: t
        push(L, profile.name)
        lua_setfield(L, -2, "name")
        for (key, value) in figures {
            lua_pushnumber(L, value)
            lua_setfield(L, -2, key)
        }
        lua_pushinteger(L, lua_Integer(profile.taskLimit))
        lua_setfield(L, -2, "taskLimit")  // stack: t
        return 1
    }

    /// lifeline.now() -> seconds since the host started
    static let now: lifeline_bridged = { L in
        guard let L else { return 0 }
        lua_pushnumber(L, context(L)?.1.now ?? 0)
        return 1
    }

    /// os.time() and os.date(): wall-clock seconds on the host's clock.
    static let epochNow: lifeline_bridged = { L in
        guard let L else { return 0 }
        lua_pushnumber(L, context(L)?.1.epochNow ?? 0)
        return 1
    }

    /// lifeline.after(seconds, fn) -> handle
    static let after: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.after"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard lua_type(L, 1) == LUA_TNUMBER else { return typeError(L, 1, fname, "number") }
        var isNumber: Int32 = 0
        let seconds = lua_tonumberx(L, 1, &isNumber)
        guard seconds.isFinite, seconds >= 0 else {
            return argError(L, 1, fname, "seconds must be a finite number >= 0")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        return withPlugin(L) { plugin in
            guard let context = plugin.unretainedContext else { return 0 }
            guard let fn = ref(L, plugin, 2) else { return LIFELINE_NOMEM }
            let id = context._withUnsafeGuaranteedRef {
                $0.startTimer(after: seconds, callback: { fn.call() })
            }
            lifeline_push_handle(L, timerHandle, lua_Integer(id))
            return 1
        }
    }

    /// handle:cancel()
    static let cancelHandle: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_handle(L, 1) else {
            return typeError(L, 1, "cancel", "lifeline.handle")
        }
        guard let (_, context) = context(L) else { return 0 }
        switch handle.pointee.kind {
        case subscriptionHandle: context.cancelSubscription(Int(handle.pointee.id))
        case timerHandle: context.cancelTimer(Int(handle.pointee.id))
        default: break
        }
        return 0
    }

    /// lifeline.config: plugin.toml's [config] table, as Lua values.
    static let pushConfig: lifeline_bridged = { L in
        guard let L else { return 0 }
        let plugin = LuaPlugin.from(L)
        // Pushed with the cap lifted, so it must fit first; a config past the cap fails the load.
        guard plugin.fits(footprint(plugin.config)) else { return LIFELINE_NOMEM }
        pushTable(L, plugin.config)
        return 1
    }

    /// About what pushing a config table allocates in the state; a little more, never less.
    private static func footprint(_ table: TOMLTable) -> Int {
        table.entries.reduce(LuaStore.tableBytes) { $0 + LuaStore.slotBytes + LuaStore.stringBytes + $1.key.utf8.count + footprint($1.value) }
    }

    private static func footprint(_ value: TOMLValue) -> Int {
        switch value {
        case .string(let s): return LuaStore.stringBytes + s.utf8.count
        case .integer, .float, .bool: return 0
        case .array(let items): return items.reduce(LuaStore.tableBytes) { $0 + LuaStore.slotBytes + footprint($1) }
        case .table(let t): return footprint(t)
        }
    }

    private static func pushTable(_ L: OpaquePointer, _ table: TOMLTable) {
        lua_createtable(L, 0, Int32(table.entries.count))
        for entry in table.entries {
            push(L, entry.value)
            setField(L, entry.key)
        }
    }

    private static func push(_ L: OpaquePointer, _ value: TOMLValue) {
        switch value {
        case .string(let s): push(L, s)
        case .integer(let i): lua_pushinteger(L, lua_Integer(i))
        case .float(let d): lua_pushnumber(L, d)
        case .bool(let b): lua_pushboolean(L, b ? 1 : 0)
        case .array(let items):
            lua_createtable(L, Int32(items.count), 0)
            for (i, item) in items.enumerated() {
                push(L, item)
                lua_rawseti(L, -2, lua_Integer(i + 1))
            }
        case .table(let t): pushTable(L, t)
        }
    }

    /// print(...) and lifeline.log.*(...): the host log, tagged with the plugin's name.
    /// A line the report keeps is a `log` event: it counts against the plugin's cap, so a print
    /// loop past the cap gets Lua's memory error instead of growing the host.
    static let logSink: lifeline_log_sink = { L, level, message, length in
        guard let L, let message else { return 0 }
        let plugin = LuaPlugin.from(L)
        let text = LuaPlugin.boundedText(message, length)
        let logger = plugin.context?.logger ?? Logger(label: "plugin.\(plugin.name)")
        let logLevel: Logger.Level =
            switch level {
            case 0: .debug
            case 2: .warning
            case 3: .error
            default: .info
            }
        guard logLevel >= logger.logLevel else { return 0 }
        if plugin.context != nil, !plugin.chargeEvents(1, text: text.utf8.count) { return LIFELINE_NOMEM }
        logger.log(level: logLevel, "\(text)")
        return 0
    }
}
