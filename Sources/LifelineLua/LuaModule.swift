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
            ("profile", profile),
            ("after", after),
            ("background", background),
            ("sleep", sleep),
        ]
        let regs = UnsafeMutablePointer<LifelineReg>.allocate(capacity: functions.count + 1)
        for (i, (name, fn)) in functions.enumerated() {
            regs[i] = LifelineReg(name: strdup(name), fn: fn)
        }
        regs[functions.count] = LifelineReg(name: nil, fn: nil)
        return LifelineModuleSpec(
            functions: regs, log_sink: logSink, handle_cancel: cancelHandle, epoch_now: epochNow, clock_now: now,
            config: pushConfig,
            tables: subtables([
                ("http", [("request", httpRequest)]), ("store", LuaStore.functions),
                ("transfers", LuaTransfers.functions),
            ]),
            task_methods: registrations([("cancel", taskCancel), ("done", taskDone), ("wait", taskWait)]),
            queue_new: queueNew,
            queue_methods: registrations([
                ("add", queueAdd), ("addSequential", queueAddSequential), ("suspend", queueSuspend),
                ("resume", queueResume), ("cancelAll", queueCancelAll), ("on", queueOn), ("count", queueCount),
                ("isSuspended", queueIsSuspended),
            ]),
            operation_methods: registrations([
                ("finish", operationFinish), ("cancel", operationCancel), ("isCancelled", operationIsCancelled),
                ("isFinished", operationIsFinished), ("wait", operationWait),
            ]),
            store_begin: LuaStore.begin, store_commit: LuaStore.commit, store_rollback: LuaStore.rollback)
    }()

    /// A C array of registrations, ended by {NULL, NULL}; never freed (it lives as long as the process).
    private static func registrations(_ functions: [(String, lifeline_bridged)]) -> UnsafePointer<LifelineReg> {
        let regs = UnsafeMutablePointer<LifelineReg>.allocate(capacity: functions.count + 1)
        for (i, (name, fn)) in functions.enumerated() {
            regs[i] = LifelineReg(name: strdup(name), fn: fn)
        }
        regs[functions.count] = LifelineReg(name: nil, fn: nil)
        return UnsafePointer(regs)
    }

    /// A C array of sub-tables, ended by {NULL, NULL}; never freed (it lives as long as the process).
    private static func subtables(_ tables: [(String, [(String, lifeline_bridged)])]) -> UnsafePointer<LifelineSubtable> {
        let list = UnsafeMutablePointer<LifelineSubtable>.allocate(capacity: tables.count + 1)
        for (i, (name, functions)) in tables.enumerated() {
            list[i] = LifelineSubtable(name: strdup(name), functions: registrations(functions))
        }
        list[tables.count] = LifelineSubtable(name: nil, functions: nil)
        return UnsafePointer(list)
    }

    // MARK: - Helpers

    static func context(_ L: OpaquePointer) -> (LuaPlugin, PluginContext)? {
        let plugin = LuaPlugin.from(L)
        guard let context = plugin.context else { return nil }
        return (plugin, context)
    }

    /// The running app's context, or pushes "`fname`: the app is not running" and returns nil.
    static func runningContext(_ L: OpaquePointer, _ fname: String) -> PluginContext? {
        guard let (_, context) = context(L) else {
            lifeline_push_where_message(L, "\(fname): the app is not running")
            return nil
        }
        return context
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
        guard let charge = HostCharge(plugin, bytes: LuaPlugin.recordBytes) else { return nil }
        return LuaRef(plugin: plugin, ref: lifeline_ref_function(L, idx), charge: charge)
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
        guard let (plugin, context) = context(L) else {
            lua_pushinteger(L, 0)
            return 1
        }
        var handler: PluginCallback?
        if lifeline_isfunction(L, handlerIndex) != 0 {
            guard let fn = ref(L, plugin, handlerIndex) else { return LIFELINE_NOMEM }
            handler = { plugin.call(ref: fn.ref, event: nil) }
        }
        // taskBegan, then taskEnded or taskExpiring and taskEnded.
        guard plugin.chargeEvents(3, text: name?.utf8.count ?? 0) else { return LIFELINE_NOMEM }
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
        guard let (plugin, context) = context(L) else {
            lua_pushboolean(L, 0)
            return 1
        }
        // An unknown id is recorded (endUnknownTask); a known one's end was counted at its begin.
        guard plugin.chargeEvents(1) else { return LIFELINE_NOMEM }
        let ended = context.endBackgroundTask(Int(id))
        if ended { plugin.refundEvents(1) }
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
        guard lua_type(L, 1) == LUA_TNUMBER else { return typeError(L, 1, fname, "number") }
        var isNumber: Int32 = 0
        let seconds = lua_tonumberx(L, 1, &isNumber)
        guard seconds.isFinite, seconds >= 0 else {
            return argError(L, 1, fname, "seconds must be a finite number >= 0")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        guard let (plugin, context) = context(L) else { return 0 }
        guard let fn = ref(L, plugin, 2) else { return LIFELINE_NOMEM }
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

    // MARK: - Async work

    /// lifeline.background([name], fn, ...) -> task
    static let background: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.background"
        var name: String?
        switch lua_type(L, 1) {
        case LUA_TSTRING:
            guard let n = LuaModule.name(L, 1, arg: 1, fname) else { return LIFELINE_RAISE }
            name = n
        case LUA_TNIL: break
        default: return typeError(L, 1, fname, "string")
        }
        guard lifeline_isfunction(L, 2) != 0 else { return typeError(L, 2, fname, "function") }
        guard let (plugin, context) = context(L) else { return 0 }
        // The work, its task and its waits: what the host keeps while it runs.
        guard let charge = HostCharge(plugin, bytes: 2 * LuaPlugin.recordBytes),
            plugin.chargeEvents(3, text: name?.utf8.count ?? 0)
        else { return LIFELINE_NOMEM }
        let top = lua_gettop(L)
        final class Box { weak var work: LuaBackgroundWork? }
        let box = Box()
        let id = context.beginBackgroundTask(name: name) {
            box.work?.interrupt(.expired)
            return .returned
        }
        guard id != 0 else {
            // The app is not running, or the task limit was passed (the caller is being stopped).
            lifeline_push_task(L, 0)
            return 1
        }
        guard let co = lua_newthread(L), lua_checkstack(co, top + 2) != 0 else {
            push(L, "lifeline.background: cannot create a coroutine")
            return LIFELINE_RAISE
        }
        lifeline_mark_host_thread(L, co)
        let threadRef = luaL_ref(L, lifeline_registryindex())  // pops the thread
        lifeline_push_task(L, lua_Integer(id))                   // stack: args..., handle
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
        let work = LuaBackgroundWork(
            taskID: id, number: id, name: name, plugin: plugin, context: context, thread: co,
            threadRef: threadRef, handleRef: handleRef, arguments: 1 + max(0, top - 2), charge: charge)
        box.work = work
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
        guard lua_type(L, 1) == LUA_TNUMBER else { return typeError(L, 1, fname, "number") }
        let seconds = lua_tonumberx(L, 1, nil)
        guard seconds.isFinite, seconds >= 0 else {
            return argError(L, 1, fname, "seconds must be a finite number >= 0")
        }
        guard let work = waitingWork(L, fname) else { return LIFELINE_RAISE }
        guard let (_, context) = context(L) else { return 0 }
        let waitID = context.sleep(seconds) { [weak work] slept in
            if slept { work?.deliver(LuaBackgroundWork.results { _ in 0 }) }
        }
        guard waitID != 0 else { return 0 }
        work.waiting(on: waitID)
        return LIFELINE_YIELD
    }

    /// lifeline.http.request{method, url, headers, body, timeout} -> response | nil, err
    static let httpRequest: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.http.request"
        guard lua_type(L, 1) == LUA_TTABLE else { return typeError(L, 1, fname, "table") }
        // Raw reads only: a metamethod could raise through this Swift frame.
        func field(_ key: String) -> Int32 {
            push(L, key)
            return lua_rawget(L, 1)
        }
        guard field("url") == LUA_TSTRING, let url = text(L, -1), HTTPURL(url) != nil else {
            return argError(L, 1, fname, "field 'url' must be an absolute http:// or https:// URL")
        }
        lifeline_pop(L, 1)
        var method = "GET"
        switch field("method") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            method = string(L, -1).uppercased()
            guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A || $0 == 0x2D }) else {
                return argError(L, 1, fname, "field 'method' must be an HTTP method such as GET or POST")
            }
        default: return argError(L, 1, fname, "field 'method' must be a string")
        }
        lifeline_pop(L, 1)
        var body: [UInt8] = []
        switch field("body") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            var length = 0
            if let p = lua_tolstring(L, -1, &length) {
                body = Array(UnsafeRawBufferPointer(start: p, count: length))
            }
        default: return argError(L, 1, fname, "field 'body' must be a string")
        }
        lifeline_pop(L, 1)
        var timeout = HTTPRequest.defaultTimeout
        switch field("timeout") {
        case LUA_TNIL: break
        case LUA_TNUMBER:
            timeout = lua_tonumberx(L, -1, nil)
            guard timeout.isFinite, timeout > 0 else {
                return argError(L, 1, fname, "field 'timeout' must be a number of seconds > 0")
            }
        default: return argError(L, 1, fname, "field 'timeout' must be a number")
        }
        lifeline_pop(L, 1)
        var headers: [HTTPHeader] = []
        switch field("headers") {
        case LUA_TNIL: break
        case LUA_TTABLE:
            lua_pushnil(L)
            while lua_next(L, -2) != 0 {
                guard lua_type(L, -2) == LUA_TSTRING, lua_type(L, -1) == LUA_TSTRING, let name = text(L, -2),
                    let value = text(L, -1)
                else {
                    return argError(L, 1, fname, "field 'headers' must map header names to strings of UTF-8 text")
                }
                guard HTTPHeader.isValid(name: name, value: value) else {
                    return argError(
                        L, 1, fname,
                        "header '\(name)' is not a valid header line: a name is a token, and neither part may hold "
                            + "a NUL, CR or LF byte")
                }
                headers.append(HTTPHeader(name, value))
                lifeline_pop(L, 1)
            }
            // In name order, so the same plugin sends the same request on every run.
            headers.sort { $0.name < $1.name }
        default: return argError(L, 1, fname, "field 'headers' must be a table")
        }
        lifeline_pop(L, 1)
        guard let work = waitingWork(L, fname) else { return LIFELINE_RAISE }
        guard let (plugin, context) = context(L) else { return 0 }
        // The body the host sends is counted against the cap until the request ends, and the
        // response may be no longer than what is left under the cap.
        guard let bodyCharge = HostCharge(plugin, bytes: body.count),
            plugin.chargeEvents(2, text: 2 * (url.utf8.count + method.utf8.count))
        else { return LIFELINE_NOMEM }
        let room = plugin.memoryRoom
        var request = HTTPRequest(method: method, url: url, headers: headers, body: body, timeout: timeout)
        let cappedByMemory = room < request.maximumBodyBytes
        request.maximumBodyBytes = min(request.maximumBodyBytes, room)
        let waitID = context.http(request) { [weak work] result in
            withExtendedLifetime(bodyCharge) {}
            if cappedByMemory, case .failure(let failure) = result, failure.kind == .tooLarge {
                work?.deliver(LuaBackgroundWork.outOfMemory)
                return
            }
            let size = (try? result.get()).map { r in r.body.count + r.headers.reduce(256) { $0 + 64 + $1.name.utf8.count + $1.value.utf8.count } } ?? 0
            work?.deliver(LuaBackgroundWork.results(fitting: size) { L in pushResult(L, result) })
        }
        guard waitID != 0 else { return 0 }
        work.waiting(on: waitID)
        return LIFELINE_YIELD
    }

    /// `{status, headers, body}`, or `nil, err`. Header names are lowercased; repeated headers are
    /// joined with ", ".
    private static func pushResult(_ L: OpaquePointer, _ result: Result<HTTPResponse, HTTPFailure>) -> Int32 {
        switch result {
        case .success(let response):
            lua_createtable(L, 0, 3)
            lua_pushinteger(L, lua_Integer(response.status))
            lua_setfield(L, -2, "status")
            var merged: [(String, String)] = []
            for header in response.headers {
                let name = header.name.lowercased()
                if let i = merged.firstIndex(where: { $0.0 == name }) {
                    merged[i].1 += ", " + header.value
                } else {
                    merged.append((name, header.value))
                }
            }
            lua_createtable(L, 0, Int32(merged.count))
            for (name, value) in merged {
                push(L, value)
                setField(L, name)
            }
            lua_setfield(L, -2, "headers")
            response.body.withUnsafeBufferPointer { buffer in
                _ = buffer.baseAddress.map { p in
                    p.withMemoryRebound(to: CChar.self, capacity: buffer.count) { lua_pushlstring(L, $0, buffer.count) }
                } ?? lua_pushlstring(L, "", 0)
            }
            lua_setfield(L, -2, "body")
            return 1
        case .failure(let failure):
            lua_pushnil(L)
            lifeline_push_error(L, failure.kind.rawValue, failure.message)
            return 2
        }
    }

    /// task:cancel()
    static let taskCancel: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "cancel", "lifeline.task") }
        LuaPlugin.from(L).work(id: Int(handle.pointee.id))?.interrupt(.cancelled)
        return 0
    }

    /// task:done() -> boolean
    static let taskDone: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "done", "lifeline.task") }
        lua_pushboolean(L, LuaPlugin.from(L).work(id: Int(handle.pointee.id)) == nil ? 1 : 0)
        return 1
    }

    /// task:wait() -> true | false, err
    static let taskWait: lifeline_bridged = { L in
        guard let L else { return 0 }
        guard let handle = lifeline_to_task(L, 1) else { return typeError(L, 1, "wait", "lifeline.task") }
        let plugin = LuaPlugin.from(L)
        guard let target = plugin.work(id: Int(handle.pointee.id)) else {
            // Finished: what became of it is in the handle.
            let outcome = LuaBackgroundWork.Outcome(rawValue: handle.pointee.outcome) ?? .cancelled
            lua_getiuservalue(L, 1, 1)
            let message = lua_type(L, -1) == LUA_TSTRING ? string(L, -1) : nil
            lifeline_pop(L, 1)
            return LuaBackgroundWork.pushOutcome(L, outcome, message)
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
