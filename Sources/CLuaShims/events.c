// Lifecycle events handed to Lua handlers: the event table each handler gets, and the protected
// call that gives it. Every handler call of a plain event comes through here, so it is written to
// allocate nothing once warm (docs/lua-api.md: the table is lent).

#include "internal.h"
#include "json.h"

// The strings every event table holds (its keys, the event names, the states), made once per
// state and kept in a registry table by slot: pushing one is an array read, not a hash of its text.
// After the keys, event name n (from 1) is in slot SLOT_FIRST_VALUE + n, and state n in
// SLOT_STATES + n.
enum { SLOT_NAME = 1, SLOT_TIME, SLOT_STATE, SLOT_FIRST_VALUE };
enum { SLOT_STATES = SLOT_FIRST_VALUE + LIFELINE_EVENT_NAME_SLOTS };
// Then the event table reused for event name n, in SLOT_TABLES + n, and the metatable that marks
// a table still fit for reuse.
enum { SLOT_TABLES = SLOT_STATES + LIFELINE_EVENT_NAME_SLOTS };
enum { SLOT_GUARD = SLOT_TABLES + LIFELINE_EVENT_NAME_SLOTS + 1 };

// Pushes the string in `slot` of the cache at `cache` (an absolute index), making it from `text`
// the first time; slot 0 pushes `text` without caching.
static void lifeline_push_cached(lua_State *L, int cache, int slot, const char *text) {
    if (slot <= 0) {
        lua_pushstring(L, text);
        return;
    }
    if (lua_rawgeti(L, cache, slot) == LUA_TSTRING) return;
    lua_pop(L, 1);
    lua_pushstring(L, text);
    lua_pushvalue(L, -1);
    lua_rawseti(L, cache, slot);
}

// A handler added a field to its event table: the table becomes the handler's own, and the next
// event of its kind gets a new one. A field the table already has is only refilled, so no
// handler sees what an earlier one wrote.
static int lifeline_event_newindex(lua_State *L) {
    lua_settop(L, 3);
    lua_rawset(L, 1);
    lua_pushnil(L);
    lua_setmetatable(L, 1);
    return 0;
}

// Pushes the event table for a plain event (name, time and state only). Each state keeps one per
// event name and refills it, so that a handler call allocates nothing once every kind has been
// seen: a new table per call was garbage for a collector whose memory is cold by the next event.
// A table that a handler changed beyond refilling (a field added, a metatable of its own) is left
// to the handler and replaced. `cache` is the absolute index of the strings cache.
static void lifeline_push_event_table(lua_State *L, int cache, const LifelineEvent *ev) {
    int slot = SLOT_TABLES + ev->name_slot;
    int reusable = 0;
    if (lua_rawgeti(L, cache, slot) == LUA_TTABLE) {    // stack: ..., t
        if (lua_getmetatable(L, -1)) {                   // stack: ..., t, mt
            lua_rawgeti(L, cache, SLOT_GUARD);           // stack: ..., t, mt, guard
            reusable = lua_rawequal(L, -1, -2);
            lua_pop(L, 2);                               // stack: ..., t
        }
    }
    if (!reusable) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 3);                        // stack: ..., t
        if (lua_rawgeti(L, cache, SLOT_GUARD) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_createtable(L, 0, 1);                    // stack: ..., t, guard
            lua_pushcfunction(L, lifeline_event_newindex);
            lua_setfield(L, -2, "__newindex");
            lua_pushvalue(L, -1);
            lua_rawseti(L, cache, SLOT_GUARD);
        }
        lua_setmetatable(L, -2);                         // stack: ..., t
        lua_pushvalue(L, -1);
        lua_rawseti(L, cache, slot);
    }
    int t = lua_gettop(L);
    lifeline_push_cached(L, cache, SLOT_NAME, "name");
    lifeline_push_cached(L, cache, SLOT_FIRST_VALUE + ev->name_slot, ev->name);
    lua_rawset(L, t);
    lifeline_push_cached(L, cache, SLOT_TIME, "time");
    lua_pushnumber(L, ev->time);
    lua_rawset(L, t);
    lifeline_push_cached(L, cache, SLOT_STATE, "state");
    lifeline_push_cached(L, cache, ev->state_slot > 0 ? SLOT_STATES + ev->state_slot : 0, ev->state);
    lua_rawset(L, t);
}

static int lifeline_call_thunk(lua_State *L) {
    lua_Integer ref = lua_tointeger(L, 1);
    const LifelineEvent *ev = (const LifelineEvent *)lua_touserdata(L, 2);
    if (ev == NULL) {
        lua_settop(L, 0);
        lua_rawgeti(L, LUA_REGISTRYINDEX, ref);  // stack: f
        lua_call(L, 0, 0);
        return 0;
    }
    LifelineControl *c = lifeline_control_of(L);
    if (c->strings_ref == 0) {
        lua_newtable(L);
        c->strings_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    // The cache goes under the function, so the call leaves it there: no value is moved.
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, c->strings_ref);  // stack: cache
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);             // stack: cache, f
    if (ev->transfer_id == NULL && ev->completion <= 0 && ev->payload == NULL && ev->name_slot > 0 &&
        ev->name_slot <= LIFELINE_EVENT_NAME_SLOTS) {
        lifeline_push_event_table(L, 1, ev);            // stack: cache, f, event
        lua_call(L, 1, 0);                              // stack: cache
        return 0;
    }
    lua_createtable(L, 0, ev->transfer_id ? 7 : 5);     // stack: cache, f, event
    lifeline_push_cached(L, 1, SLOT_NAME, "name");
    lifeline_push_cached(L, 1, ev->name_slot > 0 ? SLOT_FIRST_VALUE + ev->name_slot : 0, ev->name);
    lua_rawset(L, 3);
    lifeline_push_cached(L, 1, SLOT_TIME, "time");
    lua_pushnumber(L, ev->time);
    lua_rawset(L, 3);
    lifeline_push_cached(L, 1, SLOT_STATE, "state");
    lifeline_push_cached(L, 1, ev->state_slot > 0 ? SLOT_STATES + ev->state_slot : 0, ev->state);
    lua_rawset(L, 3);
    if (ev->transfer_id) {
        lua_pushstring(L, ev->transfer_id);
        lua_setfield(L, -2, "id");
        if (ev->reason) {
            lua_pushstring(L, ev->reason);
            lua_setfield(L, -2, "reason");
        }
        if (ev->received >= 0) {
            lua_pushinteger(L, (lua_Integer)ev->received);
            lua_setfield(L, -2, "received");
        }
        if (ev->total >= 0) {
            lua_pushinteger(L, (lua_Integer)ev->total);
            lua_setfield(L, -2, "total");
        }
    }
    if (ev->completion > 0) {
        lifeline_push_completion(L, ev->completion);
        lua_setfield(L, -2, "complete");
    }
    if (ev->payload) {
        lua_pushcfunction(L, lifeline_json_decode);  // stack: cache, f, event, decode
        lua_pushstring(L, ev->payload);
        lua_call(L, 1, 1);                           // stack: cache, f, event, payload
        lua_setfield(L, -2, "payload");
    }
    lua_call(L, 1, 0);                  // stack: cache
    return 0;
}

int lifeline_call_ref(lua_State *L, int ref, const LifelineEvent *event) {
    lifeline_control_of(L)->deep_oom = 0;
    // Pushed in the order the call wants them, so nothing is moved under the function: this runs
    // for every handler.
    int base = lua_gettop(L) + 1;
    lua_pushcfunction(L, lifeline_msgh);        // stack: msgh
    lua_pushcfunction(L, lifeline_call_thunk);  // stack: msgh, thunk (light C functions: no allocation)
    lua_pushinteger(L, ref);                    // stack: msgh, thunk, ref
    lua_pushlightuserdata(L, (void *)event);    // stack: msgh, thunk, ref, event
    return lifeline_pcall_at(L, base, 2, 0);    // stack: (empty) or message
}
