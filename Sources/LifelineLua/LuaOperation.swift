import CLua
import CLuaShims
import Lifeline

/// One operation a Lua plugin added to a queue: the coroutine that runs `run(op)`, and the
/// handle Lua holds. When the operation finishes, what became of it is written into the handle,
/// so `op:isCancelled()` and `op:wait()` still answer afterwards.
///
/// Threading: main executor only. Ownership: the plugin's `operations` holds it until the
/// operation finishes; it holds a registry reference to the handle, released then.
final class LuaOperation: QueueOperationBody {
    /// What the handle records once the operation finished.
    struct Flags: OptionSet {
        let rawValue: Int32
        static let finished = Flags(rawValue: 1)
        static let cancelled = Flags(rawValue: 2)
        static let timedOut = Flags(rawValue: 4)
        static let expired = Flags(rawValue: 8)
        static let failed = Flags(rawValue: 16)
    }

    /// A finished operation may outlive its plugin.
    private let link: Link<LuaPlugin>
    private var plugin: LuaPlugin? { link.object }
    private let context: PluginContext
    /// `run`, until the operation starts.
    private var run: LuaRef?
    let handleRef: Int32
    /// The coroutine, made when the operation starts: a pending operation holds no coroutine.
    private(set) var work: LuaBackgroundWork?
    weak var operation: QueueOperation?

    init(plugin: LuaPlugin, context: PluginContext, run: LuaRef, handleRef: Int32) {
        link = plugin.link
        self.context = context
        self.run = run
        self.handleRef = handleRef
    }

    func start(_ operation: QueueOperation) {
        guard let plugin, let L = plugin.state, let run else { return operation.codeEnded(failed: false) }
        self.run = nil
        // The cap is lifted: these allocations cannot raise through this frame.
        lifeline_bridge_enter(L)
        guard let co = lua_newthread(L), lua_checkstack(co, 3) != 0 else {
            lifeline_pop(L, 1)
            lifeline_bridge_leave(L)
            return operation.codeEnded(failed: true)
        }
        lifeline_mark_host_thread(co)
        let threadRef = luaL_ref(L, lifeline_registryindex())  // pops the thread
        lua_rawgeti(co, lifeline_registryindex(), lua_Integer(run.ref))
        lua_rawgeti(co, lifeline_registryindex(), lua_Integer(handleRef))  // run(op)
        lifeline_bridge_leave(L)
        let work = LuaBackgroundWork(
            taskID: nil, number: operation.id, name: operation.name, plugin: plugin, context: context,
            thread: co, threadRef: threadRef, handleRef: LUA_NOREF, arguments: 1)
        work.onEnd = { [weak operation] outcome in operation?.codeEnded(failed: outcome == .failed) }
        self.work = work
        plugin.remember(work)
        work.startNow()
    }

    func stop(_ operation: QueueOperation, because reason: QueueOperation.StopReason) {
        switch reason {
        case .cancelled: work?.interrupt(.cancelled)
        case .timedOut: work?.interrupt(.timedOut)
        case .expired: work?.interrupt(.expired)
        }
    }

    func finished(_ operation: QueueOperation) {
        run = nil
        plugin?.operations[operation.id] = nil
        guard let L = plugin?.state else { return }
        lifeline_bridge_enter(L)
        lua_rawgeti(L, lifeline_registryindex(), lua_Integer(handleRef))
        if let handle = lifeline_to_operation(L, -1) { handle.pointee.flags = LuaOperation.flags(of: operation).rawValue }
        lifeline_pop(L, 1)
        lifeline_bridge_leave(L)
        lifeline_unref(L, handleRef)
    }

    static func flags(of op: QueueOperation) -> Flags {
        var flags: Flags = op.isFinished ? .finished : []
        switch op.stopReason {
        case .cancelled?: flags.insert(.cancelled)
        case .timedOut?: flags.insert(.timedOut)
        case .expired?: flags.insert(.expired)
        case nil: break
        }
        if op.failed { flags.insert(.failed) }
        return flags
    }

    /// What `op:wait()` returns: `true`, or `false, why` ("cancelled", "timedOut", "expired",
    /// "failed").
    static func pushOutcome(_ L: OpaquePointer, _ flags: Flags) -> Int32 {
        let why: String? =
            flags.contains(.timedOut) ? "timedOut"
            : flags.contains(.expired) ? "expired"
            : flags.contains(.cancelled) ? "cancelled" : flags.contains(.failed) ? "failed" : nil
        guard let why else {
            lua_pushboolean(L, 1)
            return 1
        }
        lua_pushboolean(L, 0)
        LuaModule.push(L, why)
        return 2
    }
}
