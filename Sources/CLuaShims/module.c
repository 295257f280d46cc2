// The `lifeline` module (SPEC 6.2). Most of it is Swift: the host hands over one list of bridged
// functions, each named for its place ("on", "http.request", "task:wait"), and the hooks the C
// parts below call. The C parts are listed in lifeline_parts, as linit.c lists the libraries.

#include "internal.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- lifeline.log and print

static int lifeline_log_thunk(lua_State *L) {
    lifeline_log_sink sink = (lifeline_log_sink)lua_touserdata(L, lua_upvalueindex(1));
    int level = (int)lua_tointeger(L, lua_upvalueindex(2));
    int n = lua_gettop(L);
    // Every argument becomes a string first, in its own slot: luaL_tolstring pushes, and nothing
    // may be pushed between a luaL_Buffer's operations (its box may sit on top of the stack).
    for (int i = 1; i <= n; i++) {
        luaL_tolstring(L, i, NULL);  // may call __tostring: we are in C, so an error is fine
        lua_replace(L, i);
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1) luaL_addchar(&b, '\t');
        size_t len;
        const char *s = lua_tolstring(L, i, &len);
        luaL_addlstring(&b, s, len);
    }
    luaL_pushresult(&b);  // stack: args..., line
    size_t len;
    const char *line = lua_tolstring(L, -1, &len);
    if (sink(L, level, line, len) == LIFELINE_NOMEM) return lifeline_raise_nomem(L);
    return 0;
}

static void lifeline_push_log(lua_State *L, lifeline_log_sink sink, int level) {
    lua_pushlightuserdata(L, (void *)sink);
    lua_pushinteger(L, level);
    lua_pushcclosure(L, lifeline_log_thunk, 2);
}

// lifeline.log.debug/info/warning/error, tagged with the plugin's name. (print, at info, is set
// as the module opens: this area is made later, at its first read, when the plugin may have put a
// print of its own in place.)
static int lifeline_open_log(lua_State *L) {
    const LifelineHooks *hooks = (const LifelineHooks *)lua_touserdata(L, 1);
    static const char *const levels[] = {"debug", "info", "warning", "error", NULL};
    lua_newtable(L);  // stack: hooks, log
    for (int i = 0; levels[i]; i++) {
        lifeline_push_log(L, hooks->log, i);
        lua_setfield(L, -2, levels[i]);
    }
    return 1;
}

// ---------------------------------------------------------------- lifeline.queue

// lifeline.queue(name, opts): __call of the lifeline.queue table. Upvalue 1: the bridged function.
static int lifeline_queue_call(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_replace(L, 1);  // the table gives way to the function
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

// lifeline.queue: callable, with the global queue as `background`.
static int lifeline_open_queue(lua_State *L) {
    const LifelineHooks *hooks = (const LifelineHooks *)lua_touserdata(L, 1);
    lua_newtable(L);                          // stack: hooks, queue
    lifeline_push_queue(L, "background");
    lua_setfield(L, -2, "background");
    lua_createtable(L, 0, 2);                 // stack: hooks, queue, mt
    lifeline_pushbridged(L, hooks->queue_new);
    lua_pushcclosure(L, lifeline_queue_call, 1);
    lua_setfield(L, -2, "__call");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);                  // stack: hooks, queue
    return 1;
}

// ---------------------------------------------------------------- lifeline.store.transaction

// lifeline.store.transaction(fn). Upvalues: begin and commit (bridged), rollback (light userdata).
// fn runs under lua_pcall, which cannot yield, and the waiting calls refuse to wait while the
// transaction is open. Whatever fn does, raise, get stopped by the watchdog or run out of memory,
// the rollback is a plain C call here: it runs even when Lua cannot run another instruction.
static int lifeline_store_transaction(lua_State *L) {
    lifeline_store_rollback rollback = (lifeline_store_rollback)lua_touserdata(L, lua_upvalueindex(3));
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);                        // stack: fn
    lua_pushvalue(L, lua_upvalueindex(1));   // stack: fn, begin
    lua_call(L, 0, 0);                       // stack: fn
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {   // stack: err
        rollback(L);
        return lua_error(L);
    }
    lua_pushvalue(L, lua_upvalueindex(2));   // stack: commit
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {   // stack: err
        rollback(L);
        return lua_error(L);
    }
    return 0;
}

static int lifeline_open_store_transaction(lua_State *L) {
    const LifelineHooks *hooks = (const LifelineHooks *)lua_touserdata(L, 1);
    lifeline_pushbridged(L, hooks->store_begin);
    lifeline_pushbridged(L, hooks->store_commit);
    lua_pushlightuserdata(L, (void *)hooks->store_rollback);
    lua_pushcclosure(L, lifeline_store_transaction, 3);
    return 1;
}

// ---------------------------------------------------------------- lifeline.config

// The plugin's [config] table, made once, as the module opens.
static int lifeline_open_config(lua_State *L) {
    const LifelineHooks *hooks = (const LifelineHooks *)lua_touserdata(L, 1);
    lifeline_pushbridged(L, hooks->config);  // stack: hooks, config()
    lua_call(L, 0, 1);                       // stack: hooks, config
    return 1;
}

// ---------------------------------------------------------------- os on the host's clock

// os.time() with no argument, os.date() with no time, and os.clock() read the host's clock, so
// that a simulation in virtual time sees virtual time (and reports stay byte-identical).
// Upvalue 1: the original function; upvalue 2: the bridged clock.
static int lifeline_os_time(lua_State *L) {
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_pushvalue(L, lua_upvalueindex(2));  // stack: clock
        lua_call(L, 0, 1);                      // stack: seconds
        lua_Number t = lua_tonumber(L, -1);
        lua_pushinteger(L, (lua_Integer)t);
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int lifeline_os_date(lua_State *L) {
    if (lua_gettop(L) < 1) lua_pushliteral(L, "%c");
    lua_settop(L, 2);                            // stack: format, time|nil
    if (lua_isnil(L, 2)) {
        lua_pushvalue(L, lua_upvalueindex(2));   // stack: format, nil, clock
        lua_call(L, 0, 1);                       // stack: format, nil, seconds
        lua_pushinteger(L, (lua_Integer)lua_tonumber(L, -1));
        lua_replace(L, 2);
        lua_pop(L, 1);                           // stack: format, time
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);                            // stack: date, format, time
    lua_call(L, 2, 1);
    return 1;
}

// Each wraps the original (upvalue 1) and reads the host's wall clock (upvalue 2).
static const luaL_Reg lifeline_os_funcs[] = {
    {"time", lifeline_os_time},
    {"date", lifeline_os_date},
    {NULL, NULL}
};

static void lifeline_open_os(lua_State *L, const LifelineHooks *hooks) {
    lua_getglobal(L, LUA_OSLIBNAME);             // stack: ..., os
    for (const luaL_Reg *f = lifeline_os_funcs; f->name; f++) {
        lua_getfield(L, -1, f->name);            // stack: ..., os, original
        lifeline_pushbridged(L, hooks->epoch_now);  // stack: ..., os, original, clock
        lua_pushcclosure(L, f->func, 2);         // stack: ..., os, wrapped
        lua_setfield(L, -2, f->name);
    }
    lifeline_pushbridged(L, hooks->clock_now);
    lua_setfield(L, -2, "clock");
    lua_pop(L, 1);                               // stack: ...
}

// ---------------------------------------------------------------- the module

// The parts of the module made in C. Each opener gets the hooks and returns the value of
// lifeline[name]; a name "table.key" goes into lifeline.table, as a Swift function's does.
static const luaL_Reg lifeline_parts[] = {
    {"log", lifeline_open_log},
    {"store.transaction", lifeline_open_store_transaction},
    {"json", lifeline_open_json},
    {"queue", lifeline_open_queue},
    {"config", lifeline_open_config},
    {NULL, NULL}
};

// Sets lifeline[name] to the value on top of the stack and pops it. A name "table.key" sets
// lifeline.table.key, and makes lifeline.table on first use. Stack: lifeline, value.
static void lifeline_place(lua_State *L, const char *name) {
    const char *dot = strchr(name, '.');
    if (dot == NULL) {
        lua_setfield(L, -2, name);                    // stack: lifeline
        return;
    }
    lua_pushlstring(L, name, (size_t)(dot - name));   // stack: lifeline, value, tname
    lua_pushvalue(L, -1);                             // stack: lifeline, value, tname, tname
    if (lua_rawget(L, -4) != LUA_TTABLE) {            // stack: lifeline, value, tname, table | nil
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);                         // stack: lifeline, value, tname, table, table
        lua_rotate(L, -3, 1);                         // stack: lifeline, value, table, tname, table
        lua_rawset(L, -5);                            // stack: lifeline, value, table
    } else {
        lua_remove(L, -2);                            // stack: lifeline, value, table
    }
    lua_insert(L, -2);                                // stack: lifeline, table, value
    lua_setfield(L, -2, dot + 1);
    lua_pop(L, 1);                                    // stack: lifeline
}

// Whether `name` ("store.get", "json") belongs to the area `area` ("store"), given as text and
// length.
static int lifeline_in_area(const char *name, const char *area, size_t len) {
    return strncmp(name, area, len) == 0 && (name[len] == '\0' || name[len] == '.');
}

// The hooks, kept for the areas made after the module opened. They are the same for every state
// (the host's one list), so one copy serves the process: the first one made stays.
static _Atomic(const LifelineHooks *) lifeline_kept_hooks;

static const LifelineHooks *lifeline_keep_hooks(const LifelineHooks *hooks) {
    const LifelineHooks *kept = atomic_load_explicit(&lifeline_kept_hooks, memory_order_acquire);
    if (kept != NULL) return kept;
    LifelineHooks *copy = malloc(sizeof *copy);
    if (copy == NULL) return NULL;
    *copy = *hooks;
    const LifelineHooks *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(
            &lifeline_kept_hooks, &expected, copy, memory_order_acq_rel, memory_order_acquire)) {
        free(copy);
        return expected;
    }
    return copy;
}

// Makes the area `area` (len bytes) of the module at `module`, if it is one: its functions from
// the list, then its C parts, placed as when the whole module was made at once. Leaves the stack
// as it was; returns whether it was an area.
static int lifeline_make_area(lua_State *L, int module, const char *area, size_t len) {
    LifelineControl *c = lifeline_control_of(L);
    const LifelineReg *functions = c->functions;
    const LifelineHooks *hooks = atomic_load_explicit(&lifeline_kept_hooks, memory_order_acquire);
    int found = 0;
    lua_pushvalue(L, module);                 // stack: ..., lifeline
    for (const LifelineReg *r = functions; r->name; r++) {
        if (strchr(r->name, '.') == NULL || strchr(r->name, ':') != NULL) continue;
        if (!lifeline_in_area(r->name, area, len)) continue;
        lifeline_push_listed(L, functions, r);  // stack: ..., lifeline, fn
        lifeline_place(L, r->name);           // stack: ..., lifeline
        found = 1;
    }
    for (const luaL_Reg *part = lifeline_parts; part->name; part++) {
        if (!lifeline_in_area(part->name, area, len) || strcmp(part->name, "config") == 0) continue;
        lua_pushcfunction(L, part->func);
        lua_pushlightuserdata(L, (void *)hooks);
        lua_call(L, 1, 1);                    // stack: ..., lifeline, value
        lifeline_place(L, part->name);        // stack: ..., lifeline
        found = 1;
    }
    lua_pop(L, 1);
    return found;
}

// lifeline's __index: an area (lifeline.store, lifeline.http, ...) is made the first time it is
// read, and from then on it is a plain field. Most plugins use a few of the areas, and making all
// of them was a third of what opening a plugin's state cost.
static int lifeline_module_index(lua_State *L) {
    size_t len;
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &len) : NULL;
    lua_settop(L, 2);
    if (key == NULL || strlen(key) != len || !lifeline_make_area(L, 1, key, len)) return 0;
    lua_rawget(L, 1);
    return 1;
}

// Every area, made: what pairs(lifeline) and next() see is then the whole module.
static void lifeline_make_areas(lua_State *L, int module) {
    const LifelineReg *functions = lifeline_control_of(L)->functions;
    for (const LifelineReg *r = functions; r->name; r++) {
        const char *dot = strchr(r->name, '.');
        if (dot == NULL || strchr(r->name, ':') != NULL) continue;
        lua_pushlstring(L, r->name, (size_t)(dot - r->name));
        if (lua_rawget(L, module) == LUA_TNIL) lifeline_make_area(L, module, r->name, (size_t)(dot - r->name));
        lua_pop(L, 1);
    }
    for (const luaL_Reg *part = lifeline_parts; part->name; part++) {
        const char *dot = strchr(part->name, '.');
        size_t len = dot ? (size_t)(dot - part->name) : strlen(part->name);
        lua_pushlstring(L, part->name, len);
        if (lua_rawget(L, module) == LUA_TNIL) lifeline_make_area(L, module, part->name, len);
        lua_pop(L, 1);
    }
}

// next(), as the base library's: pairs(lifeline) does not depend on the global.
static int lifeline_next(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);
    if (lua_next(L, 1)) return 2;
    lua_pushnil(L);
    return 1;
}

// pairs(lifeline): the whole module, as when every area was made at once.
static int lifeline_module_pairs(lua_State *L) {
    lua_settop(L, 1);
    lifeline_make_areas(L, 1);
    lua_pushcfunction(L, lifeline_next);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

static int lifeline_open_module_thunk(lua_State *L) {
    const LifelineReg *functions = (const LifelineReg *)lua_touserdata(L, 1);
    const LifelineHooks *hooks = lifeline_keep_hooks((const LifelineHooks *)lua_touserdata(L, 2));
    lua_settop(L, 0);
    if (hooks == NULL) return lifeline_raise_nomem(L);
    lifeline_set_completion(hooks->complete);
    lifeline_open_objects(L, functions);
    // Sized for its fields up front: grown one insert at a time, the table would be rehashed at
    // every power of two, a good part of what a plugin's state costs to make. The areas come later.
    int fields = 1;
    for (const LifelineReg *r = functions; r->name; r++) fields += strpbrk(r->name, ":.") == NULL;
    lua_createtable(L, 0, fields);            // stack: lifeline
    for (const LifelineReg *r = functions; r->name; r++) {
        if (strpbrk(r->name, ":.") != NULL) continue;  // a method (lifeline_open_objects), or an area's
        lifeline_push_listed(L, functions, r);  // stack: lifeline, fn
        lifeline_place(L, r->name);           // stack: lifeline
    }
    // print, at info, goes to the host log; lifeline.log waits for its first use.
    lifeline_push_log(L, hooks->log, 1);
    lua_setglobal(L, "print");
    // lifeline.config is made now: a config past the memory cap fails the load, not a later read.
    lua_pushcfunction(L, lifeline_open_config);
    lua_pushlightuserdata(L, (void *)hooks);
    lua_call(L, 1, 1);                        // stack: lifeline, config
    lifeline_place(L, "config");              // stack: lifeline
    lua_createtable(L, 0, 3);                 // stack: lifeline, mt
    lua_pushcfunction(L, lifeline_module_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, lifeline_module_pairs);
    lua_setfield(L, -2, "__pairs");
    // Plugins cannot take the metatable off, and with it the areas not made yet.
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);                  // stack: lifeline
    lifeline_open_os(L, hooks);
    lua_pushvalue(L, -1);
    lua_setglobal(L, "lifeline");
    lifeline_preload(L, "lifeline");          // stack: (empty)
    return 0;
}

int lifeline_open_module(lua_State *L, const LifelineReg *functions, const LifelineHooks *hooks) {
    lua_pushcfunction(L, lifeline_open_module_thunk);
    lua_pushlightuserdata(L, (void *)functions);
    lua_pushlightuserdata(L, (void *)hooks);
    return lifeline_pcall(L, 2, 0);
}
