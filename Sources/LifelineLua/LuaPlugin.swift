import CLua
import CLuaShims
import Lifeline
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A Lua plugin: one lua_State, sandboxed, with the `lifeline` module (SPEC 6).
///
/// Ownership: the instance owns its control block and lua_State and frees them in `close()` (or
/// `deinit`). The block holds an unretained pointer back to the instance, which the bridged
/// functions read; since the instance frees the block, that pointer never outlives the instance.
///
/// Threading: main executor only, except `preemptor`, which the watchdog calls from its thread.
public final class LuaPlugin: PluginInstance {
    public let name: String
    public var kind: PluginKind { .lua }
    /// The plugin's folder, as given (it names the chunks, so reports do not depend on the machine).
    public let directory: String
    private var control: OpaquePointer?
    private let lua: LuaPreemptor
    /// The context of the launch this instance belongs to; set by `start`, dropped by `close`.
    private(set) var context: PluginContext?
    /// `context`, for the module's calls, which use it without a retain (`LuaModule.withPlugin`).
    private(set) var unretainedContext: Unmanaged<PluginContext>?
    /// Whether the report keeps the events this plugin causes (`PluginContext.reportKeepsEvents`),
    /// read once at `start`: it holds for the launch, and the charges ask it in every call.
    private var keepsEvents = true
    /// The store whose transaction `lifeline.store.transaction` has open while it runs its
    /// function: waiting calls refuse to wait then, and the commit or rollback goes to this store.
    var openTransaction: PluginStore?
    /// plugin.toml's [config], which Lua reads as `lifeline.config`.
    let config: TOMLTable
    /// Whether this plugin is still there, for what the host keeps of it and may hold after it is
    /// gone: its functions' references, its charges, its finished operations.
    let link = Link<LuaPlugin>()
    /// `lifeline.background` works that have not finished, by task id.
    // Every `lifeline.background` touches these; no access to them calls out, so none can overlap
    // another, and the runtime's check on each is skipped.
    @exclusivity(unchecked) private var works = IDSlots<AnyObject>()
    /// Works and operations' coroutines that have not finished.
    @exclusivity(unchecked) private var liveWorks = 0
    /// The work whose coroutine the host is resuming (or closing) now: a waiting call finds its
    /// work here. Only one runs at a time, since slices run as host jobs and the plugin's own
    /// coroutine library refuses the host's coroutines.
    @exclusivity(unchecked) var runningWork: LuaBackgroundWork?

    /// Creates the state and opens the sandbox. Nothing of the plugin's code runs yet.
    ///
    /// - Parameters:
    ///   - directory: the plugin's folder; `init.lua` in it runs at `start`.
    ///   - memoryLimit: the cap in bytes for everything the state allocates.
    public init(
        name: String, directory: String, memoryLimit: Int, config: TOMLTable = TOMLTable()
    ) throws(LifelineError) {
        self.name = name
        self.directory = directory
        self.config = config
        let control = lifeline_control_new(memoryLimit, nil)
        guard let control else { throw .internalError("could not create a Lua state for plugin '\(name)'") }
        self.control = control
        self.lua = LuaPreemptor(control: control)
        lifeline_control_set_owner(control, Unmanaged.passUnretained(self).toOpaque())
        link.set(self)
        let L = lifeline_control_state(control)!
        if lifeline_open_sandbox(L, directory) != LUA_OK || LuaModule.open(L) != LUA_OK {
            let message = LuaPlugin.popMessage(L)
            close()
            throw .internalError("could not open the Lua libraries for plugin '\(name)': \(message)")
        }
    }

    deinit {
        link.set(nil)
        close()
    }

    public var preemptor: (any Preemptible)? { lua }

    /// The plugin's state; nil once closed.
    var state: OpaquePointer? { control.flatMap { lifeline_control_state($0) } }

    /// Bytes the plugin's state holds now, with what the host keeps for it (`HostCharge`).
    public var memoryUsed: Int { control.map { Int(lifeline_memory_used($0)) } ?? 0 }
    /// How many blocks the plugin's state has allocated or grown since it was made.
    public var allocationCount: Int { control.map { Int(lifeline_allocation_count($0)) } ?? 0 }

    /// What the host keeps for each function a plugin hands it (the function's registry slot is
    /// the state's own): the record, the closure around it, the executor's job, measured with
    /// 100,000 timers: about 530 bytes each beyond the Lua side (see docs/guarantees.md).
    static let recordBytes = 640

    func charge(_ bytes: Int) -> Bool {
        guard let control else { return false }
        return lifeline_charge(control, bytes) != 0
    }

    func uncharge(_ bytes: Int) {
        if let control { lifeline_uncharge(control, bytes) }
    }

    /// Gives back what `chargeEvents` counted for events that were not recorded after all.
    func refundEvents(_ events: Int) {
        guard keepsEvents else { return }
        uncharge(events * TimelineEvent.recordedBytes)
    }

    public func chargeRecorded(_ bytes: Int) {
        guard keepsEvents else { return }
        if let control { lifeline_charge_always(control, bytes) }
    }

    /// Counts, for good, what the report keeps for the events a call will cause (`events` of
    /// them, with `text` bytes of strings); false when it does not fit under the cap. The report
    /// keeps every event for the run's life, so a plugin's events count against its cap: a loop
    /// that begins and ends tasks cannot grow the host without bound.
    func chargeEvents(_ events: Int, text: Int = 0) -> Bool {
        guard keepsEvents else { return true }  // `run` with no --report keeps none
        return charge(events * TimelineEvent.recordedBytes + text)
    }

    /// Whether `bytes` more would fit under the cap now (after a collection if need be).
    func fits(_ bytes: Int) -> Bool {
        guard charge(bytes) else { return false }
        uncharge(bytes)
        return true
    }

    /// Bytes left under the cap.
    var memoryRoom: Int {
        guard let control else { return 0 }
        return max(0, Int(lifeline_memory_limit(control)) - Int(lifeline_memory_used(control)))
    }

    public func start(_ context: PluginContext) -> CallOutcome {
        self.context = context
        unretainedContext = Unmanaged.passUnretained(context)
        keepsEvents = context.reportKeepsEvents
        guard let L = state else { return .returned }
        let path = directory.hasSuffix("/") ? directory + "init.lua" : directory + "/init.lua"
        return outcome(lifeline_run_file(L, path), L)
    }

    /// A reload is ending this generation: the module's calls that start work raise from now on.
    private(set) var isUnloading = false

    public func beginUnloading() { isUnloading = true }

    public func resetPreemption() {
        if let control, lifeline_preempt_requested(control) != 0 { lifeline_preempt_clear(control) }
    }

    public func close() {
        guard let control else { return }
        self.control = nil
        lua.invalidate()
        context = nil
        unretainedContext = nil
        keepsEvents = true
        works.removeAll()
        heldWorks.removeAll()
        liveWorks = 0
        runningWork = nil
        operations.removeAll()
        lifeline_control_free(control)
    }

    // MARK: - Calling into Lua

    /// Calls the function at registry `ref`, with an event table when `event` is given.
    func call(ref: Int32, event: LifecycleEvent?) -> CallOutcome {
        guard let L = state else { return .returned }
        guard let event else { return outcome(lifeline_call_ref(L, ref, nil), L) }
        // The state keeps one Lua string per event name and state, by these numbers (from 1).
        let nameSlot = Int32(event.name.ordinal + 1), stateSlot = Int32(event.state.ordinal + 1)
        let name = LuaPlugin.eventNames[event.name.ordinal], st = LuaPlugin.stateNames[event.state.ordinal]
        guard let transfer = event.transfer else {
            guard event.completion == nil else { return callWithCompletion(L, ref: ref, event) }
            var ev = LifelineEvent(
                name: name, time: event.time, state: st, transfer_id: nil, reason: nil, received: -1,
                total: -1, name_slot: nameSlot, state_slot: stateSlot, completion: 0, payload: nil)
            return outcome(lifeline_call_ref(L, ref, &ev), L)
        }
        return transfer.id.withCString { id in
            LuaPlugin.withOptionalCString(transfer.reason) { reason in
                var ev = LifelineEvent(
                    name: name, time: event.time, state: st, transfer_id: id, reason: reason,
                    received: transfer.received ?? -1, total: transfer.total ?? -1, name_slot: nameSlot,
                    state_slot: stateSlot, completion: Int64(event.completion ?? 0), payload: nil)
                return outcome(lifeline_call_ref(L, ref, &ev), L)
            }
        }
    }

    /// An event with a completion (a fetch, a push, the end of a batch of transfer events): rare,
    /// so it takes the plain path.
    private func callWithCompletion(_ L: OpaquePointer, ref: Int32, _ event: LifecycleEvent) -> CallOutcome {
        LuaPlugin.withOptionalCString(event.payload) { payload in
            var ev = LifelineEvent(
                name: LuaPlugin.eventNames[event.name.ordinal], time: event.time,
                state: LuaPlugin.stateNames[event.state.ordinal], transfer_id: nil, reason: nil, received: -1, total: -1,
                name_slot: Int32(event.name.ordinal + 1), state_slot: Int32(event.state.ordinal + 1),
                completion: Int64(event.completion ?? 0), payload: payload)
            return outcome(lifeline_call_ref(L, ref, &ev), L)
        }
    }

    /// Calls a scheduled task's handler at registry `ref` with a new task table; returns the
    /// outcome and the table's reference (for its expiration handler), LUA_NOREF if none was made.
    func callTask(ref: Int32, _ task: SystemTaskInfo) -> (CallOutcome, Int32) {
        guard let L = state else { return (.returned, LUA_NOREF) }
        return task.identifier.withCString { identifier in
            task.kind.rawValue.withCString { kind in
                var call = LifelineTaskCall(id: Int64(task.id), identifier: identifier, kind: kind, table_ref: LUA_NOREF)
                let result = outcome(lifeline_call_task(L, ref, &call), L)
                return (result, call.table_ref)
            }
        }
    }

    /// Calls the `expirationHandler` the plugin set on the task table at registry `tableRef`.
    func callTaskExpiration(tableRef: Int32) -> CallOutcome {
        guard let L = state, tableRef != LUA_NOREF else { return .returned }
        return outcome(lifeline_call_task_expiration(L, tableRef), L)
    }

    /// Each event name and state as a C string, by ordinal, made once for the process: a handler
    /// call hands them to C without making C strings each time. Never written after they are
    /// made, so any thread may read them.
    nonisolated(unsafe) private static let eventNames: [UnsafePointer<CChar>] = cStrings(
        LifecycleEventName.allCases.map { ($0.ordinal, $0.rawValue) })
    nonisolated(unsafe) private static let stateNames: [UnsafePointer<CChar>] = cStrings(
        AppState.allCases.map { ($0.ordinal, $0.rawValue) })

    private static func cStrings(_ texts: [(Int, String)]) -> [UnsafePointer<CChar>] {
        var table = [UnsafePointer<CChar>?](repeating: nil, count: texts.count)
        for (ordinal, text) in texts { table[ordinal] = UnsafePointer(strdup(text)!) }
        return table.map { $0! }
    }

    private static func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }

    /// Calls the function at registry `ref` with the value at registry `argRef`.
    func call(ref: Int32, argument argRef: Int32) -> CallOutcome {
        guard let L = state else { return .returned }
        return outcome(lifeline_call_ref_value(L, ref, argRef), L)
    }

    /// What a failed call came to; pops the error message (with its traceback) from L.
    func outcome(_ status: Int32, _ L: OpaquePointer) -> CallOutcome {
        if status == LUA_OK { return .returned }
        let raw = LuaPlugin.popMessage(L)
        if let control, lifeline_preempt_requested(control) != 0 {
            let tb = lifeline_preempt_traceback(control).map { String(cString: $0) } ?? raw
            return .preempted(traceback: tb)
        }
        if status == LUA_ERRMEM {
            let cap = control.map { Int(lifeline_memory_limit($0)) } ?? 0
            if let control, lifeline_take_deep_oom(control) != 0 {
                return .raised(
                    message: "stack overflow: plugin '\(name)' recursed so deep that it reached its memory cap of "
                        + Units.formatBytes(cap),
                    traceback: LuaPlugin.noTraceback)
            }
            return .raised(
                message: "not enough memory: plugin '\(name)' reached its memory cap of "
                    + Units.formatBytes(cap),
                traceback: LuaPlugin.noTraceback)
        }
        // The message handler appended "\nstack traceback:\n..." to string errors.
        if let range = raw.range(of: "\nstack traceback:\n") {
            return .raised(
                message: String(raw[..<range.lowerBound]), traceback: "stack traceback:\n" + raw[range.upperBound...])
        }
        return .raised(message: raw, traceback: "")
    }

    // MARK: - Background works

    /// `lifeline.background` works and queue operations' coroutines that have not finished.
    public var liveBackgroundWorks: Int { liveWorks }

    /// Whether the plugin was told that an operation's run taking a parameter made it
    /// asynchronous (said once per plugin).
    var warnedOfImplicitAsync = false

    /// Operations this plugin added that have not finished, by id.
    var operations: [Int: LuaOperation] = [:]

    /// Works under a task the plugin holds, by their keys (negative, so apart from task ids).
    private var heldWorks: [Int: LuaBackgroundWork] = [:]
    private var lastHeldWorkKey = 0

    /// The key of a new work under a held task.
    func nextHeldWorkKey() -> Int {
        lastHeldWorkKey -= 1
        return lastHeldWorkKey
    }

    /// Keeps a work until it finishes. Task ids only grow, so the works stay in id order.
    func remember(_ work: LuaBackgroundWork) {
        if work.taskID != nil {
            if work.key > 0 { works.append(work.key, work) } else { heldWorks[work.key] = work }
        }
        liveWorks += 1
    }

    func forget(_ work: LuaBackgroundWork) {
        if work.taskID != nil {
            if work.key > 0 { works.remove(work.key) } else { heldWorks[work.key] = nil }
        }
        liveWorks -= 1
    }

    /// The unfinished work with this key (a task handle's `work`).
    func work(id: Int) -> LuaBackgroundWork? {
        if id < 0 { return heldWorks[id] }
        return works.value(id).map { unsafeDowncast($0, to: LuaBackgroundWork.self) }
    }
    /// The work whose coroutine `L` is, if the host runs it and it is running.
    func work(thread L: OpaquePointer) -> LuaBackgroundWork? {
        guard let work = runningWork, work.thread == L else { return nil }
        return work
    }

    /// Lua runs no message handler for memory errors, so there is no traceback to give.
    static let noTraceback = "(none: Lua runs no message handler for memory errors)"

    /// The most of a plugin's error message the host keeps; a plugin cannot make the host hold
    /// more than this for one error.
    static let maximumMessageBytes = 4096

    /// At most `maximumMessageBytes` of a message's bytes, with "…" when it was longer. NUL bytes
    /// stay; bytes that are not UTF-8 show as U+FFFD (messages and log lines are text). The cut
    /// falls between characters, never inside one: valid text stays valid, with no U+FFFD.
    static func boundedText(_ p: UnsafePointer<CChar>, _ length: Int) -> String {
        let bytes = UnsafeRawBufferPointer(start: p, count: length)
        var kept = min(length, maximumMessageBytes)
        // A byte 10xxxxxx continues a character: the cut moves back to where that character starts
        // (a character is at most 4 bytes, so at most 3 steps).
        var steps = 0
        while kept < length, kept > 0, steps < 3, bytes[kept] & 0xC0 == 0x80 {
            kept -= 1
            steps += 1
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<kept]), as: UTF8.self)
            + (length > kept ? "…" : "")
    }

    static func popMessage(_ L: OpaquePointer) -> String {
        var length = 0
        let message = lua_tolstring(L, -1, &length).map { boundedText($0, length) } ?? "(error object is not a string)"
        lifeline_pop(L, 1)
        return message
    }


    /// The plugin that owns `L` (any of its threads).
    static func from(_ L: OpaquePointer) -> LuaPlugin {
        Unmanaged<LuaPlugin>.fromOpaque(lifeline_owner(L)!).takeUnretainedValue()
    }
}

/// A registry reference to a Lua function, released when the host drops the last closure that
/// holds it. This is the one release of every function a plugin hands the host. What the host
/// keeps beside it (a timer, a subscription, an operation) is counted against the plugin's cap
/// for as long as it lives.
final class LuaRef {
    private let link: Link<LuaPlugin>
    let ref: Int32

    /// A reference to the function at `idx` of `L`, with the record the host keeps for it counted
    /// against the plugin's cap until this is freed (as `HostCharge` counts, in the same object:
    /// a timer's function is one allocation, not two). Nil when the record does not fit.
    init?(_ L: OpaquePointer, _ plugin: LuaPlugin, function idx: Int32) {
        guard plugin.charge(LuaPlugin.recordBytes) else { return nil }
        link = plugin.link
        ref = lifeline_ref_function(L, idx)
    }

    deinit {
        guard let plugin = link.object else { return }
        if let L = plugin.state { lifeline_unref(L, ref) }
        plugin.uncharge(LuaPlugin.recordBytes)
    }

    /// Calls the function; nothing once the plugin is gone. A closure that holds only this
    /// reference (`{ fn.call() }`) needs no allocation of its own, where one that also held the
    /// plugin made one for every timer. (A subscription's closure, made once and called for every
    /// event, keeps the plugin instead: reaching it through the link costs each call a retain.)
    func call() -> CallOutcome {
        guard let plugin = link.object else { return .returned }
        return plugin.call(ref: ref, event: nil)
    }
}

/// Bytes the host keeps on a plugin's behalf (its records of timers, subscriptions, background
/// works and operations, request bodies), counted against the plugin's memory cap beside what its
/// Lua state allocates, from when this is made until it is freed. So a plugin with cap C cannot
/// make the host hold more than C for it, whatever it asks the host to keep.
final class HostCharge {
    private let link: Link<LuaPlugin>
    private let bytes: Int

    /// Nil when the bytes do not fit under the cap (the caller raises Lua's memory error).
    init?(_ plugin: LuaPlugin, bytes: Int) {
        guard plugin.charge(bytes) else { return nil }
        link = plugin.link
        self.bytes = bytes
    }

    deinit { link.object?.uncharge(bytes) }
}

/// Stops a plugin's Lua code from the watchdog's thread (W2) without touching its state there
/// (W4): `lifeline_preempt` sets a flag and signals the thread that runs the state, whose signal
/// handler arms the hook.
final class LuaPreemptor: Preemptible, @unchecked Sendable {
    // Written on the main executor only while no watchdog target refers to it (between calls).
    private var control: OpaquePointer?

    init(control: OpaquePointer) { self.control = control }

    func preempt() { if let control { lifeline_preempt(control) } }
    func invalidate() { control = nil }
}
