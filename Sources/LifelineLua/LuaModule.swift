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

    /// The module as C sees it; built once, never freed (it lives as long as the process).
    nonisolated(unsafe) static var spec: LifelineModuleSpec = {
        let functions: [(String, lifeline_bridged)] = [
            ("on", on),
            ("beginBackgroundTask", beginBackgroundTask),
            ("endBackgroundTask", endBackgroundTask),
            ("backgroundTimeRemaining", backgroundTimeRemaining),
            ("state", state),
            ("now", now),
            ("after", after),
        ]
        let regs = UnsafeMutablePointer<LifelineReg>.allocate(capacity: functions.count + 1)
        for (i, (name, fn)) in functions.enumerated() {
            regs[i] = LifelineReg(name: strdup(name), fn: fn)
        }
        regs[functions.count] = LifelineReg(name: nil, fn: nil)
        return LifelineModuleSpec(
            functions: regs, log_sink: logSink, handle_cancel: cancelHandle, epoch_now: epochNow, clock_now: now)
    }()

    // MARK: - Helpers

    private static func context(_ L: OpaquePointer) -> (LuaPlugin, PluginContext)? {
        let plugin = LuaPlugin.from(L)
        guard let context = plugin.context else { return nil }
        return (plugin, context)
    }

    private static func typeError(_ L: OpaquePointer, _ arg: Int32, _ fname: String, _ expected: String) -> Int32 {
        lifeline_push_typeerror(L, arg, fname, expected)
        return LIFELINE_RAISE
    }

    private static func argError(_ L: OpaquePointer, _ arg: Int32, _ fname: String, _ message: String) -> Int32 {
        lifeline_push_argerror(L, arg, fname, message)
        return LIFELINE_RAISE
    }

    /// The string at `idx`, which must be a Lua string (so no conversion, which could allocate).
    private static func string(_ L: OpaquePointer, _ idx: Int32) -> String {
        var len = 0
        guard let p = lua_tolstring(L, idx, &len) else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: p, count: len), as: UTF8.self)
    }

    private static func ref(_ L: OpaquePointer, _ plugin: LuaPlugin, _ idx: Int32) -> LuaRef {
        LuaRef(plugin: plugin, ref: lifeline_ref_function(L, idx))
    }

    // MARK: - Functions

    /// lifeline.on(event, fn) -> handle
    static let on: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.on"
        guard lua_type(L, 1) == LUA_TSTRING else { return typeError(L, 1, fname, "string") }
        let eventName = string(L, 1)
        guard let event = LifecycleEventName(rawValue: eventName) else {
            return argError(
                L, 1, fname, "unknown event '\(eventName)'; the events are: \(LifecycleEventName.validNames)")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        guard let (plugin, context) = context(L) else { return 0 }
        let fn = ref(L, plugin, 2)
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
        var name: String?
        var handlerIndex: Int32 = 2
        switch lua_type(L, 1) {
        case LUA_TSTRING: name = String(string(L, 1).prefix(maximumNameLength))
        case LUA_TNIL, LUA_TNONE: break
        case LUA_TFUNCTION: handlerIndex = 1  // beginBackgroundTask(onExpire)
        default: return typeError(L, 1, fname, "string or function")
        }
        if handlerIndex == 2 && lifeline_isnoneornil(L, 2) == 0 && lifeline_isfunction(L, 2) == 0 {
            return typeError(L, 2, fname, "function")
        }
        guard let (plugin, context) = context(L) else {
            lua_pushinteger(L, 0)
            return 1
        }
        var handler: PluginCallback?
        if lifeline_isfunction(L, handlerIndex) != 0 {
            let fn = ref(L, plugin, handlerIndex)
            handler = { plugin.call(ref: fn.ref, event: nil) }
        }
        let id = context.beginBackgroundTask(name: name, expirationHandler: handler)
        lua_pushinteger(L, lua_Integer(id))
        return 1
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
        let ended = context(L)?.1.endBackgroundTask(Int(id)) ?? false
        lua_pushboolean(L, ended ? 1 : 0)
        return 1
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
        lua_pushstring(L, context(L)?.1.state.rawValue ?? "inactive")
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
        guard lua_type(L, 1) == LUA_TNUMBER else { return typeError(L, 1, fname, "number") }
        var isNumber: Int32 = 0
        let seconds = lua_tonumberx(L, 1, &isNumber)
        guard seconds.isFinite, seconds >= 0 else {
            return argError(L, 1, fname, "seconds must be a finite number >= 0")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        guard let (plugin, context) = context(L) else { return 0 }
        let fn = ref(L, plugin, 2)
        let id = context.startTimer(after: seconds, callback: { plugin.call(ref: fn.ref, event: nil) })
        lifeline_push_handle(L, timerHandle, lua_Integer(id))
        return 1
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

    /// print(...) and lifeline.log.*(...): the host log, tagged with the plugin's name.
    static let logSink: lifeline_log_sink = { L, level, message in
        guard let L, let message else { return }
        let plugin = LuaPlugin.from(L)
        let text = String(String(cString: message).prefix(LuaPlugin.maximumMessageBytes))
        let logger = plugin.context?.logger ?? Logger(label: "plugin.\(plugin.name)")
        switch level {
        case 0: logger.debug("\(text)")
        case 2: logger.warning("\(text)")
        case 3: logger.error("\(text)")
        default: logger.info("\(text)")
        }
    }
}
