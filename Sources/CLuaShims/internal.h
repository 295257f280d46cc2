// What the shim's C files share and Swift never sees, as Lua keeps lstate.h and its LUAI_FUNC
// functions to itself. The public header, include/CLuaShims.h, holds only what Swift calls.
#ifndef LIFELINE_INTERNAL_H
#define LIFELINE_INTERNAL_H

#include <stdint.h>
#include "CLuaShims.h"

#include <stdatomic.h>

/// A function one C file of the shim exports to the others, hidden outside the library.
#define LIFELINE_FUNC __attribute__((visibility("hidden"))) extern

// ---------------------------------------------------------------- control.c

struct LifelineControl {
    lua_State *main;
    void *owner;
    size_t used;   // bytes the state holds; touched only by the allocator (the plugin's thread)
    size_t limit;  // the cap; past it allocations fail and Lua raises a memory error
    size_t allocations;  // blocks made or grown so far: what a benchmark reads to show a path allocates nothing
    int in_bridge;  // > 0 while Swift code runs inside a Lua call: the cap is lifted so no error longjmps through it
    int stopping;   // set by the hook once the stop hit: every allocation fails from then on
    int deep_oom;   // the cap was hit this many calls deep or more: runaway recursion, reported as a stack overflow
    atomic_int preempt;                 // a stop is asked for the call now running: set by the watchdog thread
    _Atomic(lua_State *) current;       // the thread (coroutine) running now; executor thread and its signal handler
    atomic_int thread;                  // kernel id of the OS thread inside a call into this state; 0 between calls
    int depth;                          // calls into this state on that thread's stack (executor thread only)
    char *traceback;                    // where the stop first hit; malloc'd, freed on clear
    int strings_ref;                    // registry ref of the event strings made so far; 0: none yet
    const LifelineReg *functions;       // the module's list, for the classes made on first use
    // A block the allocator gives, instead of a new one, to the next new string of exactly
    // `handoff_size` bytes: a file read straight into the memory of the string it becomes (files.c).
    void *handoff;
    size_t handoff_size;
    // While set, the allocator records the block of the next new string (files.c learns where a
    // string's bytes lie in its block).
    int probing;
    void *probed;
    size_t probed_size;
};

/// The control block of any thread (coroutine) of a plugin's state: every thread copies the main
/// thread's extra space, where lifeline_control_new put it. The pointer's lowest bit, always 0 in
/// the block's address, marks a thread the host runs (lifeline_mark_host_thread); a new thread
/// copies the main thread's space, so it starts unmarked.
static inline LifelineControl *lifeline_control_of(lua_State *L) {
    return (LifelineControl *)(*(uintptr_t *)lua_getextraspace(L) & ~(uintptr_t)1);
}

/// Whether `L` is a coroutine the host runs: a background work's or a queue operation's.
static inline int lifeline_is_host_thread(lua_State *L) {
    return (*(uintptr_t *)lua_getextraspace(L) & 1) != 0;
}

/// Raises LUA_ERRMEM, Lua's own "not enough memory", by asking for an allocation the cap refuses.
LIFELINE_FUNC int lifeline_raise_nomem(lua_State *L);

/// Every call from the host into a state goes between these two, on the calling thread: they tell
/// the watchdog where to send the stop, and the signal handler which state to arm. lifeline_enter
/// returns the state this thread was running before (calls may nest), for lifeline_leave.
LIFELINE_FUNC LifelineControl *lifeline_enter(LifelineControl *c);
LIFELINE_FUNC void lifeline_leave(LifelineControl *c, LifelineControl *outer);
/// Installs the stop's hook on `L`; only on the thread that runs it.
LIFELINE_FUNC void lifeline_arm_hook(lua_State *L);

// ---------------------------------------------------------------- bridge.c

/// Pushes a Swift function as a Lua C closure whose only upvalue is the function pointer.
LIFELINE_FUNC void lifeline_pushbridged(lua_State *L, lifeline_bridged fn);
/// Pushes `r`, an entry of the module's list `functions`, as Lua calls it: a light C function
/// when the list has slots, else a closure as `lifeline_pushbridged` makes.
LIFELINE_FUNC void lifeline_push_listed(lua_State *L, const LifelineReg *functions, const LifelineReg *r);
/// lua_pcall with a message handler that appends a traceback to string errors, entered as a call
/// the watchdog can stop. Stack: [f, args...] -> [results...] or [message-with-traceback].
LIFELINE_FUNC int lifeline_pcall(lua_State *L, int nargs, int nresults);
/// The message handler lifeline_pcall uses: appends a traceback to a string error.
LIFELINE_FUNC int lifeline_msgh(lua_State *L);
/// lifeline_pcall with the message handler already at `base`, under the function and its args.
LIFELINE_FUNC int lifeline_pcall_at(lua_State *L, int base, int nargs, int nresults);
/// Pushes a function that calls the host's completion `id` (event.complete, task:setTaskCompleted).
LIFELINE_FUNC void lifeline_push_completion(lua_State *L, long long id);

// ---------------------------------------------------------------- files.c

/// How lifeline_load_inside ended.
enum { LIFELINE_FILE_OK = 0, LIFELINE_FILE_MISSING, LIFELINE_FILE_OUTSIDE, LIFELINE_FILE_ERROR };

/// Loads the text chunk at `path` (named "@path") when it lies inside the folder whose real path
/// is `root` (NULL: unresolved, every load fails). Pushes the chunk and returns LUA_OK, or pushes
/// a message and returns the error status, with `why` saying whether the file was missing or
/// outside. Raises only for memory, and never while the file is open.
LIFELINE_FUNC int lifeline_load_inside(lua_State *L, const char *root, const char *path, int *why);

// ---------------------------------------------------------------- sandbox.c

/// Loads a text chunk from `path`, which must lie inside the plugin's folder: pushes the chunk and
/// returns LUA_OK, or pushes a message that names the file and returns the error status, with
/// `why` (LIFELINE_FILE_*) saying why.
LIFELINE_FUNC int lifeline_loadfile_text(lua_State *L, const char *path, int *why);
/// Registers the value on top of the stack as module `name` for require (pops it).
LIFELINE_FUNC void lifeline_preload(lua_State *L, const char *name);

// ---------------------------------------------------------------- coroutines.c

/// Replaces resume, wrap and close in the coroutine table on top of the stack with the ones that
/// tell the watchdog which coroutine runs and refuse the coroutines the host runs.
LIFELINE_FUNC void lifeline_open_coroutines(lua_State *L);

/// Sets the Swift function every completion calls (`event.complete`, `task:setTaskCompleted`).
LIFELINE_FUNC void lifeline_set_completion(lifeline_bridged fn);

// ---------------------------------------------------------------- objects.c

/// Makes the metatables of the userdata the module hands out (handles, tasks, queues, operations)
/// and of its error values. A class's methods are the entries of `functions` named "class:method".
LIFELINE_FUNC void lifeline_open_objects(lua_State *L, const LifelineReg *functions);

#endif
