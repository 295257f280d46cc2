// The bridge: the one trampoline through which Lua calls Swift, and the protected calls through
// which the host calls Lua. Swift never raises or yields (SPEC 6.4): a bridged Swift function
// returns a code, and the trampoline here raises, yields or raises the memory error for it. Every
// call from the host into a state runs inside lua_pcall, so no error escapes or crosses Swift.

#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

// ---------------------------------------------------------------- trampoline and errors

// Where a waiting call continues when the host resumes its coroutine. The stack holds the call's
// arguments (ctx of them), then what the host passed: true and the results, or false and an error.
static char lifeline_nomem_key;
void lifeline_push_nomem(lua_State *L) { lua_pushlightuserdata(L, &lifeline_nomem_key); }

static int lifeline_wait_k(lua_State *L, int status, lua_KContext ctx) {
    (void)status;
    int base = (int)ctx;
    if (!lua_toboolean(L, base + 1)) {
        if (lua_touserdata(L, base + 2) == &lifeline_nomem_key) return lifeline_raise_nomem(L);
        lua_settop(L, base + 2);
        return lua_error(L);
    }
    return lua_gettop(L) - (base + 1);
}

static int lifeline_bridge_call(lua_State *L, lifeline_bridged fn) {
    LifelineControl *c = lifeline_control_of(L);
    // While Swift runs, an allocation past the cap must not raise: the error would longjmp
    // through Swift frames. The few bytes a bridged call allocates are counted, and the cap
    // applies again at the next allocation Lua makes itself.
    c->in_bridge++;
    int n = fn(L);
    c->in_bridge--;
    // No cap check here: the call's effects (a task begun, a timer set) have happened, and an
    // error now would lose the id that undoes them. The next allocation Lua makes is checked.
    if (n == LIFELINE_RAISE) return lua_error(L);  // the message is on top
    if (n == LIFELINE_NOMEM) return lifeline_raise_nomem(L);
    if (n == LIFELINE_YIELD) return lua_yieldk(L, 0, (lua_KContext)lua_gettop(L), lifeline_wait_k);
    return n;
}

static int lifeline_trampoline(lua_State *L) {
    return lifeline_bridge_call(L, (lifeline_bridged)lua_touserdata(L, lua_upvalueindex(1)));
}

// The Swift function behind every completion: one for the process, as the module's list is.
static _Atomic(lifeline_bridged) lifeline_completion_fn;

void lifeline_set_completion(lifeline_bridged fn) {
    atomic_store_explicit(&lifeline_completion_fn, fn, memory_order_release);
}

// Pushes a function that calls the host's completion `id` (its second upvalue).
void lifeline_push_completion(lua_State *L, long long id) {
    lua_pushlightuserdata(L, (void *)atomic_load_explicit(&lifeline_completion_fn, memory_order_acquire));
    lua_pushinteger(L, (lua_Integer)id);
    lua_pushcclosure(L, lifeline_trampoline, 2);
}

long long lifeline_completion_id(lua_State *L) { return (long long)lua_tointeger(L, lua_upvalueindex(2)); }

void lifeline_pushbridged(lua_State *L, lifeline_bridged fn) {
    lua_pushlightuserdata(L, (void *)fn);       // stack: ..., fn
    lua_pushcclosure(L, lifeline_trampoline, 1);  // stack: ..., closure
}

// The module's listed functions are pushed as light C functions, not closures: each position of
// the list has a trampoline of its own, which finds the Swift function at its position. A state
// then makes no object per function (a closure each was an eighth of what opening the module
// cost, and more for the collector to free). The list is the process's one `LuaModule.registry`:
// the first list seen is kept for good; another one, or a position past the slots, gets
// closures.
static _Atomic(const LifelineReg *) lifeline_slot_list;

#define LIFELINE_SLOT(b, d)                                                                  \
    static int lifeline_slot_##b##_##d(lua_State *L) {                                        \
        const LifelineReg *list = atomic_load_explicit(&lifeline_slot_list, memory_order_acquire); \
        return lifeline_bridge_call(L, list[(b) * 10 + (d)].fn);                              \
    }
#define LIFELINE_SLOTS10(b)                                                                  \
    LIFELINE_SLOT(b, 0) LIFELINE_SLOT(b, 1) LIFELINE_SLOT(b, 2) LIFELINE_SLOT(b, 3) LIFELINE_SLOT(b, 4) \
    LIFELINE_SLOT(b, 5) LIFELINE_SLOT(b, 6) LIFELINE_SLOT(b, 7) LIFELINE_SLOT(b, 8) LIFELINE_SLOT(b, 9)
#define LIFELINE_REF(b, d) lifeline_slot_##b##_##d,
#define LIFELINE_REFS10(b)                                                                   \
    LIFELINE_REF(b, 0) LIFELINE_REF(b, 1) LIFELINE_REF(b, 2) LIFELINE_REF(b, 3) LIFELINE_REF(b, 4) \
    LIFELINE_REF(b, 5) LIFELINE_REF(b, 6) LIFELINE_REF(b, 7) LIFELINE_REF(b, 8) LIFELINE_REF(b, 9)

LIFELINE_SLOTS10(0) LIFELINE_SLOTS10(1) LIFELINE_SLOTS10(2) LIFELINE_SLOTS10(3) LIFELINE_SLOTS10(4)
LIFELINE_SLOTS10(5) LIFELINE_SLOTS10(6) LIFELINE_SLOTS10(7) LIFELINE_SLOTS10(8) LIFELINE_SLOTS10(9)
LIFELINE_SLOTS10(10) LIFELINE_SLOTS10(11) LIFELINE_SLOTS10(12)

static const lua_CFunction lifeline_slots[] = {
    LIFELINE_REFS10(0) LIFELINE_REFS10(1) LIFELINE_REFS10(2) LIFELINE_REFS10(3) LIFELINE_REFS10(4)
    LIFELINE_REFS10(5) LIFELINE_REFS10(6) LIFELINE_REFS10(7) LIFELINE_REFS10(8) LIFELINE_REFS10(9)
    LIFELINE_REFS10(10) LIFELINE_REFS10(11) LIFELINE_REFS10(12)
};

void lifeline_push_listed(lua_State *L, const LifelineReg *functions, const LifelineReg *r) {
    ptrdiff_t i = r - functions;
    const LifelineReg *list = atomic_load_explicit(&lifeline_slot_list, memory_order_acquire);
    if (list == NULL && atomic_compare_exchange_strong_explicit(
            &lifeline_slot_list, &list, functions, memory_order_acq_rel, memory_order_acquire)) {
        list = functions;
    }
    if (list == functions && i < (ptrdiff_t)(sizeof lifeline_slots / sizeof lifeline_slots[0])) {
        lua_pushcfunction(L, lifeline_slots[i]);
    } else {
        lifeline_pushbridged(L, r->fn);
    }
}

void lifeline_push_where_message(lua_State *L, const char *msg, size_t len) {
    luaL_where(L, 1);              // stack: ..., where
    lua_pushlstring(L, msg, len);  // stack: ..., where, msg
    lua_concat(L, 2);              // stack: ..., full
}

void lifeline_push_argerror(lua_State *L, int arg, const char *fname, const char *msg, size_t len) {
    luaL_where(L, 1);                                              // stack: ..., where
    lua_pushfstring(L, "bad argument #%d to '%s' (", arg, fname);  // stack: ..., where, head
    lua_pushlstring(L, msg, len);                                  // stack: ..., where, head, msg
    lua_pushliteral(L, ")");
    lua_concat(L, 4);                                              // stack: ..., full
}

void lifeline_push_typeerror(lua_State *L, int arg, const char *fname, const char *expected) {
    const char *got = luaL_typename(L, arg);
    const char *msg = lua_pushfstring(L, "%s expected, got %s", expected, got);  // stack: ..., msg
    lifeline_push_argerror(L, arg, fname, msg, strlen(msg));                      // stack: ..., msg, full
    lua_remove(L, -2);                                                            // stack: ..., full
}

// Pushes the text of the error value at index 1, as lua.c's message handler finds it: the value
// itself when it is a string or a number, else what its __tostring returns, else "(error object
// is a T value)". Returns whether it came from __tostring.
static int lifeline_push_error_text(lua_State *L) {
    int type = lua_type(L, 1);
    if (type == LUA_TSTRING || type == LUA_TNUMBER) {
        lua_pushvalue(L, 1);
        lua_tolstring(L, -1, NULL);  // a number becomes its text, on the copy only
        return 0;
    }
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    return 0;
}

// Pushes the error text with a traceback of `co` from `level` on: "text\nstack traceback:...";
// a text from __tostring gets none when `plain_meta` (as lua.c's handler does).
// luaL_traceback takes its message as a C string and would cut it at its first NUL, so the text
// is joined to the traceback as a Lua string: error("a\0b") is reported as "a\0b", whole.
static void lifeline_push_traceback(lua_State *L, lua_State *co, int level, int plain_meta) {
    if (lifeline_push_error_text(L) && plain_meta) return;
    lua_pushliteral(L, "\n");                 // stack: ..., text, "\n"
    luaL_traceback(L, co, NULL, level);       // stack: ..., text, "\n", traceback
    lua_concat(L, 3);                         // stack: ..., message
}

int lifeline_msgh(lua_State *L) {
    lifeline_push_traceback(L, L, 1, 1);
    return 1;
}

/// lifeline_pcall with the message handler already at `base`, under the function and its args.
int lifeline_pcall_at(lua_State *L, int base, int nargs, int nresults) {
    LifelineControl *c = lifeline_control_of(L);
    LifelineControl *outer = lifeline_enter(c);
    int status = lua_pcall(L, nargs, nresults, base);
    lifeline_leave(c, outer);
    lua_remove(L, base);                   // stack: ..., results or message
    return status;
}

int lifeline_pcall(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;      // index of the function
    lua_pushcfunction(L, lifeline_msgh);   // stack: ..., f, args..., msgh
    lua_insert(L, base);                   // stack: ..., msgh, f, args...
    return lifeline_pcall_at(L, base, nargs, nresults);
}

// ---------------------------------------------------------------- coroutines that the watchdog can reach

void lifeline_bridge_enter(lua_State *L) { lifeline_control_of(L)->in_bridge++; }
void lifeline_bridge_leave(lua_State *L) { lifeline_control_of(L)->in_bridge--; }

int lifeline_resume(lua_State *L, lua_State *co, int nargs, int *nresults) {
    LifelineControl *c = lifeline_control_of(L);
    c->deep_oom = 0;
    int nres = 0;
    LifelineControl *outer = lifeline_enter(c);
    lua_State *prev = atomic_exchange(&c->current, co);
    // A stop signal handled just before the exchange armed only `prev`.
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
    int status = lua_resume(co, L, nargs, &nres);
    atomic_store(&c->current, prev);
    lifeline_leave(c, outer);
    *nresults = 0;
    if (status == LUA_OK) {
        *nresults = nres;  // they stay on co: the work's values, for task:wait()
    } else if (status == LUA_YIELD) {
        lua_pop(co, nres);
    } else {
        // A copy: the error stays on top of co, where closing co hands it to its to-be-closed
        // variables.
        c->in_bridge++;
        lua_pushvalue(co, -1);
        lua_xmove(co, L, 1);
        c->in_bridge--;
    }
    return status;
}

int lifeline_close_thread(lua_State *L, lua_State *co) {
    LifelineControl *c = lifeline_control_of(L);
    int died = lua_status(co) != LUA_OK && lua_status(co) != LUA_YIELD;
    if (died) {  // remember the error it died of, to tell a new one from it
        c->in_bridge++;
        lua_pushvalue(co, -1);
        lua_xmove(co, L, 1);  // stack: ..., original
        c->in_bridge--;
    }
    LifelineControl *outer = lifeline_enter(c);
    lua_State *prev = atomic_exchange(&c->current, co);
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
#if LUA_VERSION_RELEASE_NUM >= 50406
    int status = lua_closethread(co, L);
#else
    int status = lua_resetthread(co);
#endif
    atomic_store(&c->current, prev);
    lifeline_leave(c, outer);
    if (status != LUA_OK) {
        c->in_bridge++;
        lua_xmove(co, L, 1);  // stack: ..., [original,] error
        c->in_bridge--;
    }
    if (died) {
        if (status == LUA_OK || lua_rawequal(L, -1, -2)) {
            lua_settop(L, lua_gettop(L) - (status == LUA_OK ? 1 : 2));  // only the old error: closed cleanly
            return LUA_OK;
        }
        lua_remove(L, -2);  // stack: ..., error
    }
    return status;
}

// Runs protected, with the memory cap on: the error value's __tostring is plugin code.
static int lifeline_traceback_thunk(lua_State *L) {
    lua_State *co = (lua_State *)lua_touserdata(L, 2);  // stack: err, co
    lifeline_push_traceback(L, co, 0, 0);
    return 1;
}

void lifeline_traceback_of(lua_State *L, lua_State *co) {
    // None of these three pushes allocates: a light C function, a light userdata, a rotation.
    lua_pushcfunction(L, lifeline_traceback_thunk);  // stack: ..., err, thunk
    lua_insert(L, -2);                               // stack: ..., thunk, err
    lua_pushlightuserdata(L, co);                    // stack: ..., thunk, err, co
    LifelineControl *c = lifeline_control_of(L);
    LifelineControl *outer = lifeline_enter(c);      // __tostring is plugin code: stoppable
    int status = lua_pcall(L, 2, 1, 0);              // stack: ..., message | failure
    lifeline_leave(c, outer);
    if (status != LUA_OK) {
        c->in_bridge++;
        lua_pop(L, 1);
        lua_pushliteral(L, "(the error object's __tostring failed)");
        c->in_bridge--;
    }
}

// ---------------------------------------------------------------- calls from the host

// Everything the host does to a state from outside Lua happens inside lua_pcall, so no error can
// escape unprotected (which would abort) or longjmp through Swift.

static int lifeline_call_task_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    LifelineTaskCall *task = (LifelineTaskCall *)lua_touserdata(L, 2);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);  // stack: f
    lua_createtable(L, 0, 5);                // stack: f, task
    lua_pushinteger(L, (lua_Integer)task->id);
    lua_setfield(L, -2, "id");
    lua_pushstring(L, task->identifier);
    lua_setfield(L, -2, "identifier");
    lua_pushstring(L, task->kind);
    lua_setfield(L, -2, "kind");
    lifeline_push_completion(L, task->id);
    lua_setfield(L, -2, "setTaskCompleted");
    lua_pushvalue(L, -1);                    // stack: f, task, task
    task->table_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_call(L, 1, 0);
    return 0;
}

int lifeline_call_task(lua_State *L, int ref, LifelineTaskCall *task) {
    lifeline_control_of(L)->deep_oom = 0;
    task->table_ref = LUA_NOREF;
    lua_pushcfunction(L, lifeline_call_task_thunk);
    lua_pushinteger(L, ref);
    lua_pushlightuserdata(L, (void *)task);
    return lifeline_pcall(L, 2, 0);
}

static int lifeline_task_expiration_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    lua_settop(L, 0);
    if (lua_rawgeti(L, LUA_REGISTRYINDEX, ref) != LUA_TTABLE) return 0;  // stack: task
    // A plain read: the plugin may have given its table a metatable, and its code runs protected
    // here, under the expiration handler's limit.
    if (lua_getfield(L, 1, "expirationHandler") == LUA_TNIL) return 0;  // stack: task, handler
    lua_call(L, 0, 0);
    return 0;
}

int lifeline_call_task_expiration(lua_State *L, int table_ref) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_task_expiration_thunk);
    lua_pushinteger(L, table_ref);
    return lifeline_pcall(L, 1, 0);
}

static int lifeline_call_value_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    lua_Integer argref = lua_tointeger(L, 2);
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);     // stack: f
    lua_rawgeti(L, LUA_REGISTRYINDEX, argref);  // stack: f, arg
    lua_call(L, 1, 0);
    return 0;
}

int lifeline_call_ref_value(lua_State *L, int ref, int argref) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_call_value_thunk);
    lua_pushinteger(L, ref);
    lua_pushinteger(L, argref);
    return lifeline_pcall(L, 2, 0);
}

static int lifeline_run_file_thunk(lua_State *L) {
    const char *path = (const char *)lua_touserdata(L, 1);
    lua_settop(L, 0);
    int why;
    if (lifeline_loadfile_text(L, path, &why) != LUA_OK) {  // stack: message
        // A compile error is returned, not raised: it needs no traceback.
        lua_pushboolean(L, 0);  // stack: message, false
        lua_insert(L, -2);      // stack: false, message
        return 2;
    }
    lua_call(L, 0, 0);
    lua_pushboolean(L, 1);
    return 1;
}

int lifeline_run_file(lua_State *L, const char *path) {
    lifeline_control_of(L)->deep_oom = 0;
    lua_pushcfunction(L, lifeline_run_file_thunk);
    lua_pushlightuserdata(L, (void *)path);
    int status = lifeline_pcall(L, 1, 2);  // stack: true, nil | false, message | error
    if (status != LUA_OK) return status;
    if (lua_toboolean(L, -2)) {
        lua_pop(L, 2);
        return LUA_OK;
    }
    lua_remove(L, -2);  // stack: message
    return LUA_ERRSYNTAX;
}

void lifeline_unref(lua_State *L, int ref) {
    LifelineControl *c = lifeline_control_of(L);
    c->in_bridge++;
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    c->in_bridge--;
}

int lifeline_ref_function(lua_State *L, int idx) {
    lua_pushvalue(L, idx);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

// ---------------------------------------------------------------- macros

void lifeline_pop(lua_State *L, int n) { lua_pop(L, n); }
int lifeline_isfunction(lua_State *L, int idx) { return lua_isfunction(L, idx); }
int lifeline_isnoneornil(lua_State *L, int idx) { return lua_isnoneornil(L, idx); }
int lifeline_registryindex(void) { return LUA_REGISTRYINDEX; }
lua_Number lifeline_huge(void) { return HUGE_VAL; }
