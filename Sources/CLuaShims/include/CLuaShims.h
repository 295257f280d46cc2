// What Swift calls of the C shim: the per-plugin control block (control.c: memory accounting and
// watchdog preemption), the bridge (bridge.c: the trampoline that raises and yields for Swift, and
// the protected calls into Lua), the sandbox (sandbox.c, coroutines.c, files.c), the `lifeline`
// module (module.c, objects.c, json*.c) and Lua's macros as functions. Swift never calls
// lua_error/luaL_error/lua_yield itself (SPEC 6.4). What the C files share among themselves only
// is in internal.h.
#ifndef LIFELINE_CLUASHIMS_H
#define LIFELINE_CLUASHIMS_H

#include <stddef.h>
#include <lua5.4/lua.h>
#include <lua5.4/lauxlib.h>
#include <lua5.4/lualib.h>

/// Returned by a bridged Swift function to ask the trampoline to raise the value on top of the
/// stack as a Lua error.
#define LIFELINE_RAISE (-1)

/// Returned by a bridged Swift function to ask the trampoline to yield the running coroutine (a
/// waiting call). When the host resumes it, the first value passed says how the wait ended: true,
/// and the rest are the call's results; or false, and the second value is raised as an error.
#define LIFELINE_YIELD (-2)

/// Returned by a bridged Swift function to raise Lua's own memory error ("not enough memory",
/// LUA_ERRMEM), as when the plugin's own allocation passes its cap: what the call needed the host
/// to keep would not fit under the cap.
#define LIFELINE_NOMEM (-3)

/// A Swift function bridged to Lua. It returns the number of results, LIFELINE_RAISE,
/// LIFELINE_YIELD or LIFELINE_NOMEM.
typedef int (*lifeline_bridged)(lua_State *L);

/// One plugin's control block: its lua_State, its memory accounting and its preemption flag.
/// Opaque to Swift. Owned by exactly one Swift object, which frees it with lifeline_control_free.
typedef struct LifelineControl LifelineControl;

/// Creates a control block and its lua_State (with no libraries open). NULL if out of memory.
/// `owner` is an unretained pointer handed back by lifeline_owner; it must outlive the block.
LifelineControl *lifeline_control_new(size_t memory_limit, void *owner);
/// Closes the lua_State and frees the block.
void lifeline_control_free(LifelineControl *c);
lua_State *lifeline_control_state(LifelineControl *c);
/// The owner pointer of the control block of any thread (coroutine) of a plugin's state.
void *lifeline_owner(lua_State *L);
void lifeline_control_set_owner(LifelineControl *c, void *owner);
size_t lifeline_memory_used(LifelineControl *c);
size_t lifeline_memory_limit(LifelineControl *c);
/// How many blocks the state's allocator has made or grown since the state was made.
size_t lifeline_allocation_count(LifelineControl *c);
/// Whether the last memory error hit the cap deep in recursion (a stack overflow); clears it.
int lifeline_take_deep_oom(LifelineControl *c);

/// Asks the running Lua code to stop. Safe from any thread, and it never touches the lua_State
/// from another thread: it sets a flag and signals the OS thread inside a call into the state
/// (lifeline_stop_signal), whose handler installs a count hook there; from inside the state's own
/// call it installs the hook at once; with no call running, the next call installs it as it
/// starts. The hook raises an error at every instruction until cleared, so the plugin's own
/// pcall cannot swallow the stop.
void lifeline_preempt(LifelineControl *c);
/// The real-time signal that carries stops to the thread running a state: the highest one that
/// had no handler when the first state was made (its handler is installed then, once per
/// process, with SA_RESTART). 0 if none was free: a stop then lands at the next call only.
int lifeline_stop_signal(void);
int lifeline_preempt_requested(LifelineControl *c);
/// The traceback captured where the stop first hit, or NULL.
const char *lifeline_preempt_traceback(LifelineControl *c);
/// Clears the stop and removes the hook. Only from the thread that runs the plugin, between calls.
void lifeline_preempt_clear(LifelineControl *c);

/// Lifts the memory cap while Swift pushes values onto a state from outside a bridged call (the
/// values a coroutine is resumed with), so no memory error can longjmp through Swift. Balanced by
/// lifeline_bridge_leave.
void lifeline_bridge_enter(lua_State *L);
void lifeline_bridge_leave(lua_State *L);

/// Counts `bytes` that the host keeps for the plugin against its cap, beside what its state
/// allocates. Returns 1, or 0 (counting nothing) when they would pass the cap even after a full
/// garbage collection.
int lifeline_charge(LifelineControl *c, size_t bytes);
/// Counts `bytes` even past the cap: the plugin's next allocation then fails.
void lifeline_charge_always(LifelineControl *c, size_t bytes);
/// Gives back bytes counted by `lifeline_charge`.
void lifeline_uncharge(LifelineControl *c, size_t bytes);
/// Pushes the value that makes a waiting call raise Lua's memory error when the host resumes it
/// with `false` and this value (see LIFELINE_YIELD).
void lifeline_push_nomem(lua_State *L);

/// Records `co` as a coroutine the host runs: the plugin's coroutine.resume and coroutine.close
/// refuse it. A bit in the thread's own extra space; allocates nothing.
void lifeline_mark_host_thread(lua_State *co);

/// Resumes a host-run coroutine `co` of the state whose main thread is `L`, with the `nargs`
/// values on top of co's stack, while telling the watchdog that co runs. Returns the status. On
/// LUA_YIELD, co's results are popped. On LUA_OK (the coroutine returned), its results stay on
/// top of co's stack, and their count is stored in `*nresults`: `task:wait()` answers them. On an
/// error, a copy of the error value is pushed on L, and co keeps it for `lifeline_close_thread`.
int lifeline_resume(lua_State *L, lua_State *co, int nargs, int *nresults);
/// Closes a suspended or dead coroutine, running its pending to-be-closed variables (with the
/// error it died of, if any) while the watchdog knows it runs. Returns LUA_OK when they ran
/// cleanly; otherwise the status of the error a __close raised, whose value is pushed on L.
int lifeline_close_thread(lua_State *L, lua_State *co);
/// Replaces the error value on top of L with "message\nstack traceback:\n..." for coroutine co.
void lifeline_traceback_of(lua_State *L, lua_State *co);

/// Pushes `msg` prefixed with where the running Lua function was called, as luaL_error does.
void lifeline_push_where_message(lua_State *L, const char *msg, size_t len);
/// Pushes the message luaL_argerror would raise, without raising it.
void lifeline_push_argerror(lua_State *L, int arg, const char *fname, const char *msg, size_t len);
/// Pushes the message luaL_typeerror would raise, without raising it.
void lifeline_push_typeerror(lua_State *L, int arg, const char *fname, const char *expected);

/// Opens the sandboxed standard libraries from an explicit allow-list (SPEC 6.3): base without
/// dofile/loadfile and with a text-only load, string, table, math, utf8, coroutine, and os reduced
/// to time, clock, date and difftime. `require` resolves `lifeline` and files under `plugin_dir`.
/// Returns LUA_OK or an error status with a message on the stack.
int lifeline_open_sandbox(lua_State *L, const char *plugin_dir);
/// Opens `path` to read when the file it names, once every link is resolved, lies below the
/// folder whose real path is `root`. Returns the descriptor, or -1 with errno set: EXDEV when the
/// file lies outside, EISDIR for a folder, EINVAL for another file that is not a plain file (a
/// FIFO, a device), else open's own (ELOOP for a link loop).
int lifeline_open_inside(const char *root, const char *path);

/// How lifeline_push_file ended.
enum {
    LIFELINE_FILE_READ_OK = 0,      // the bytes are pushed as one string
    LIFELINE_FILE_READ_FAILED = 1,  // read(2) failed: errno says why; nothing pushed
    LIFELINE_FILE_READ_GREW = 2,    // the file holds more than `size` bytes by now; nothing pushed
    LIFELINE_FILE_READ_NOMEM = 3,   // no memory for the bytes; nothing pushed
};
/// Reads the plain file open as `fd`, `size` bytes long when it was sized, from where it is to its
/// end, and pushes its bytes as one Lua string. The bytes are read straight into the memory of
/// the string (the state's allocator takes the block they were read into), so the file is held
/// once, never twice. Call it only inside a bridged call, after checking that `size` bytes fit
/// under the cap. `seen` is set to the bytes found.
int lifeline_push_file(lua_State *L, int fd, size_t size, size_t *seen);
/// Decodes the JSON text `text` (`n` bytes) into Lua values, as lifeline.json.decode does, and
/// pushes the value; or pushes why not. Protected: returns LUA_OK or the error's status.
int lifeline_json_decode_text(lua_State *L, const char *text, size_t n);
/// How many event names a state's string cache keeps, by `name_slot` from 1 up to this; the
/// states' strings come after them. The host has at most this many lifecycle events (a test
/// holds it to that).
#define LIFELINE_EVENT_NAME_SLOTS 64

/// A lifecycle event as the host hands it to a Lua handler.
typedef struct LifelineEvent {
    const char *name;
    double time;
    const char *state;
    /// Transfer events only (NULL otherwise): the transfer's id, and why it failed (or NULL).
    const char *transfer_id;
    const char *reason;
    /// transferProgress only: bytes so far and the whole size; -1 when not known.
    long long received;
    long long total;
    /// Small numbers (>= 1) naming `name` and `state` among the host's fixed strings, so the
    /// state makes each Lua string once and reuses it; 0: no such number, push the text.
    int name_slot;
    int state_slot;
    /// The completion the handler must call, as `event.complete` (0: none).
    long long completion;
    /// A silent push's payload, a JSON object (NULL otherwise): `event.payload`, decoded.
    const char *payload;
} LifelineEvent;

/// A scheduled task as its Lua handler gets it: a table with `id`, `identifier`, `kind` and
/// `setTaskCompleted`, where the plugin may set `expirationHandler`.
typedef struct LifelineTaskCall {
    long long id;
    const char *identifier;
    const char *kind;
    /// Set by the call: a registry reference to the task's table, or LUA_NOREF when the table
    /// could not be made.
    int table_ref;
} LifelineTaskCall;

/// Calls the function at registry `ref` with a new task table built from `task`, protected, and
/// keeps the table in the registry (`task->table_ref`) for its expiration. Returns the status.
int lifeline_call_task(lua_State *L, int ref, LifelineTaskCall *task);
/// Calls the `expirationHandler` field of the task table at registry `table_ref`, if it is set,
/// protected. Returns the status.
int lifeline_call_task_expiration(lua_State *L, int table_ref);
/// The completion id of the running completion function (its second upvalue).
long long lifeline_completion_id(lua_State *L);

/// Calls the function stored at registry `ref`, with an event table built from `event` (or no
/// argument when NULL), inside lua_pcall with a traceback handler. Returns the status; on error
/// the message (with traceback) is on the stack.
int lifeline_call_ref(lua_State *L, int ref, const LifelineEvent *event);
/// Loads a text chunk from `path` and runs it, protected. Returns LUA_OK, LUA_ERRSYNTAX with the
/// compile error (no traceback), or the run's error status with message and traceback.
int lifeline_run_file(lua_State *L, const char *path);
/// Stores the value at `idx` in the registry and returns its reference.
int lifeline_ref_function(lua_State *L, int idx);
/// Releases a registry reference (never raises).
void lifeline_unref(lua_State *L, int ref);

/// Receives a plugin's log line (from print or lifeline.log.*): level 0 debug, 1 info, 2 warning, 3 error.
/// Returns 0, or LIFELINE_NOMEM when the line does not fit under the plugin's cap.
typedef int (*lifeline_log_sink)(lua_State *L, int level, const char *message, size_t length);

/// One Swift function of the `lifeline` module, named for its place, as luaL_Reg names a C one:
///   "on"            lifeline.on
///   "http.request"  lifeline.http.request (lifeline.http is made on first use)
///   "task:wait"     a method of a class of values the module hands out: "handle" (on, after),
///                   "task" (background), "queue", "operation"
/// A list ends with {NULL, NULL}.
typedef struct LifelineReg {
    const char *name;
    lifeline_bridged fn;
} LifelineReg;

/// Drops a plugin's open store transaction; never raises and touches no Lua stack.
typedef void (*lifeline_store_rollback)(lua_State *L);

/// What the module's C parts (module.c) call on the host. No Lua code sees these by name.
typedef struct LifelineHooks {
    lifeline_log_sink log;          // print and lifeline.log.*
    lifeline_bridged epoch_now;     // os.time() and os.date(): pushes the host clock's wall time (seconds since 1970)
    lifeline_bridged clock_now;     // os.clock(): pushes seconds since the host started, on the host's clock
    lifeline_bridged config;        // lifeline.config: pushes the plugin's [config] table, once
    lifeline_bridged queue_new;     // lifeline.queue(name, opts)
    // lifeline.store.transaction(fn), built in C so that the rollback runs on every path.
    lifeline_bridged store_begin;   // opens the transaction (raises when one is open)
    lifeline_bridged store_commit;  // writes it (raises, e.g. over the quota; closed either way)
    lifeline_store_rollback store_rollback;
    lifeline_bridged complete;      // event.complete(result) and task:setTaskCompleted(success)
} LifelineHooks;

/// Builds the `lifeline` module (global and require-able) from `functions` (ended by {NULL,
/// NULL}) and the C parts (lifeline.log, lifeline.json, lifeline.queue, lifeline.config,
/// lifeline.store.transaction, `print`), makes the classes of the values it hands out, and points
/// os.time, os.date and os.clock at the host's clock; protected. Returns the status. Neither
/// argument is kept: the closures hold the function pointers, and Lua strings the names.
int lifeline_open_module(lua_State *L, const LifelineReg *functions, const LifelineHooks *hooks);

/// Pushes the `lifeline.json` table (json.c). The module opens it as `lifeline.json`; a bare state
/// can open it alone, as the JSON tests do.
int lifeline_open_json(lua_State *L);

/// A handle returned to Lua by on() and after(): what it cancels.
typedef struct LifelineHandle {
    int kind;
    lua_Integer id;
} LifelineHandle;

/// Pushes a new handle (allocates: call from a bridged function only).
LifelineHandle *lifeline_push_handle(lua_State *L, int kind, lua_Integer id);
/// The handle at `idx`, or NULL.
LifelineHandle *lifeline_to_handle(lua_State *L, int idx);

/// The handle lifeline.background returns: `id`, and what became of the work once it finished.
typedef struct LifelineTaskHandle {
    lua_Integer id;    // the background task the work runs under: `task.id`
    lua_Integer work;  // the work's key among the plugin's works: `id` when the work began its task
    int outcome;       // 0 running, else what the host stored (see LuaBackgroundWork.Outcome)
    int results;       // once it returned: how many values it returned, on top of its dead coroutine
} LifelineTaskHandle;

/// Pushes a new task handle (allocates: call with the cap lifted). Its first user value holds the
/// message of a failed task; its second, the work's coroutine until the work finishes, and after,
/// when the work returned values, the dead coroutine that holds them.
LifelineTaskHandle *lifeline_push_task(lua_State *L, lua_Integer id, lua_Integer work);
/// The task handle at `idx`, or NULL.
LifelineTaskHandle *lifeline_to_task(lua_State *L, int idx);

/// Pushes the error value of a failed wait or request: a table {kind = kind, message = message},
/// with `expired = true` or `cancelled = true` for those kinds, and a __tostring that gives the
/// message (allocates: call with the cap lifted).
void lifeline_push_error(lua_State *L, const char *kind, const char *message, size_t len);
/// Whether the value at `idx` is an error value the host raised to interrupt a wait (expired or
/// cancelled).
int lifeline_is_interruption(lua_State *L, int idx);

/// A queue or an operation as Lua sees it: `id`, `name` (user value 1), and methods.
typedef struct LifelineObject {
    lua_Integer id;
    int flags;  // operations: what became of it, once finished (see LuaOperation.Flags)
} LifelineObject;

/// Pushes a queue (allocates: call with the cap lifted).
LifelineObject *lifeline_push_queue(lua_State *L, const char *name);
LifelineObject *lifeline_to_queue(lua_State *L, int idx);
/// Pushes an operation; `name` may be NULL (allocates: call with the cap lifted).
LifelineObject *lifeline_push_operation(lua_State *L, lua_Integer id, const char *name);
LifelineObject *lifeline_to_operation(lua_State *L, int idx);
/// Whether the function at `idx` declares parameters (or is vararg, or a C function).
int lifeline_takes_arguments(lua_State *L, int idx);
/// Where the Lua function at `idx` is defined: its chunk's name into `source` (at most `size`
/// bytes, NUL-terminated) and its first line, or 0 for a C function. Allocates nothing.
int lifeline_function_line(lua_State *L, int idx, char *source, size_t size);
/// Calls the function at registry `ref` with the value at registry `argref`, protected; like
/// lifeline_call_ref.
int lifeline_call_ref_value(lua_State *L, int ref, int argref);

// Lua's macros, as functions Swift can call.
void lifeline_pop(lua_State *L, int n);
int lifeline_isfunction(lua_State *L, int idx);
int lifeline_isnoneornil(lua_State *L, int idx);
int lifeline_registryindex(void);
lua_Number lifeline_huge(void);

#endif
