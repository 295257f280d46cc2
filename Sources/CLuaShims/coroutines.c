// The coroutine library as a plugin gets it: lcorolib's functions, but resume, wrap and close
// that tell the watchdog which coroutine runs (so a stop reaches code inside one), and refuse the
// coroutines the host runs itself.

#include "internal.h"

// Resumes `co` while recording it as the running thread, so a preemption reaches code inside it.
static int lifeline_auxresume(lua_State *L, lua_State *co, int narg) {
    int status, nres;
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    lua_xmove(L, co, narg);
    LifelineControl *c = lifeline_control_of(L);
    lua_State *prev = atomic_exchange(&c->current, co);
    // A stop signal handled just before the exchange armed only `prev`.
    if (atomic_load(&c->preempt)) lifeline_arm_hook(co);
    status = lua_resume(co, L, narg, &nres);
    atomic_store(&c->current, prev);
    if (atomic_load(&c->preempt)) lifeline_arm_hook(L);  // the stop follows us back out
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    return -1;
}

void lifeline_mark_host_thread(lua_State *co) {
    *(uintptr_t *)lua_getextraspace(co) |= 1;  // see lifeline_control_of
}

/// The coroutine argument of a coroutine function; a coroutine the host runs (a background work,
/// an operation) is refused: resuming it would end the host's wait early with made-up results,
/// and closing it would end the work behind the host's back.
static lua_State *lifeline_getco(lua_State *L) {
    lua_State *co = lua_tothread(L, 1);
    luaL_argexpected(L, co, 1, "coroutine");
    if (lifeline_is_host_thread(co)) {
        luaL_error(L, "this coroutine is run by the host (lifeline.background or a queue's operation): "
                      "only the host may resume or close it; wait for it with task:wait() or stop it with task:cancel()");
    }
    return co;
}

static int lifeline_coclose(lua_State *L) {
    lifeline_getco(L);  // refuses a host-run coroutine
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int lifeline_coresume(lua_State *L) {
    lua_State *co = lifeline_getco(L);
    int r = lifeline_auxresume(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;
}

static int lifeline_auxwrap(lua_State *L) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = lifeline_auxresume(L, co, lua_gettop(L));
    if (r < 0) {
        int stat = lua_status(co);
        if (stat != LUA_OK && stat != LUA_YIELD) {
#if LUA_VERSION_RELEASE_NUM >= 50406
            stat = lua_closethread(co, L);
#else
            stat = lua_resetthread(co);
#endif
            lua_xmove(co, L, 1);
        }
        if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return r;
}

static int lifeline_cowrap(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *NL = lua_newthread(L);  // stack: f, co
    lua_pushvalue(L, 1);               // stack: f, co, f
    lua_xmove(L, NL, 1);               // stack: f, co
    lua_pushcclosure(L, lifeline_auxwrap, 1);
    return 1;
}

// What replaces lcorolib's own; the rest of its table stays as it is.
static const luaL_Reg lifeline_co_funcs[] = {
    {"resume", lifeline_coresume},
    {"wrap", lifeline_cowrap},
    {NULL, NULL}
};

void lifeline_open_coroutines(lua_State *L) {
    luaL_setfuncs(L, lifeline_co_funcs, 0);  // stack: ..., coroutine
    lua_getfield(L, -1, "close");
    lua_pushcclosure(L, lifeline_coclose, 1);
    lua_setfield(L, -2, "close");
}
