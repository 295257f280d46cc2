// The sandbox (SPEC 6.3): the standard libraries a plugin gets, from an explicit list as linit.c
// opens them, and the base functions replaced so that a plugin reads only its own folder, cannot
// load binary chunks, cannot set a finalizer, and iterates tables in the same order on every run.

#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LIFELINE_LOADED "lifeline.loaded"
#define LIFELINE_PLUGIN_DIR "lifeline.plugindir"
/// The plugin folder's real path (every link resolved): what a plugin loads must lie below it.
#define LIFELINE_PLUGIN_ROOT "lifeline.pluginroot"

// Lua's message for a binary chunk names no file: the file is named here.
int lifeline_loadfile_text(lua_State *L, const char *path, int *why) {
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_ROOT);             // stack: ..., root
    int status = lifeline_load_inside(L, lua_tostring(L, -1), path, why);  // stack: ..., root, chunk | message
    lua_remove(L, -2);                                                    // stack: ..., chunk | message
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        if (msg != NULL && strstr(msg, path) == NULL) {
            lua_pushfstring(L, "%s:1: %s", path, msg);  // stack: ..., message, full
            lua_remove(L, -2);                          // stack: ..., full
        }
    }
    return status;
}

// ---------------------------------------------------------------- deterministic iteration

// Lua seeds its string hashes at random in every state, so next() visits string keys in a
// different order on every run. `pairs` sorts the keys instead, so that `lifeline simulate` gives
// the same report for the same inputs: numbers in numeric order, then strings in byte order, then
// booleans (false first); other keys (tables, functions) last, in next() order.

typedef struct LifelineKey {
    int rank;            // 0 number, 1 string, 2 boolean, 3 other
    int isint;
    lua_Integer i;
    lua_Number n;
    const char *s;       // kept alive by the keys table
    size_t len;
    int slot;            // position in next() order, for a stable sort
} LifelineKey;

static int lifeline_key_compare(const void *a, const void *b) {
    const LifelineKey *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    switch (x->rank) {
    case 0:
        if (x->isint && y->isint) {
            if (x->i != y->i) return x->i < y->i ? -1 : 1;
        } else {
            lua_Number p = x->isint ? (lua_Number)x->i : x->n, q = y->isint ? (lua_Number)y->i : y->n;
            if (p != q) return p < q ? -1 : 1;
        }
        break;
    case 1: {
        size_t m = x->len < y->len ? x->len : y->len;
        int c = memcmp(x->s, y->s, m);
        if (c != 0) return c;
        if (x->len != y->len) return x->len < y->len ? -1 : 1;
        break;
    }
    case 2:
        if (x->i != y->i) return x->i < y->i ? -1 : 1;
        break;
    }
    return x->slot < y->slot ? -1 : (x->slot > y->slot);
}

// The iterator: upvalue 1 is the sorted keys, upvalue 2 the next position.
static int lifeline_sorted_next(lua_State *L) {
    // A plugin may call the iterator itself, with anything: raw access to a non-table would
    // crash the host, so it is refused as next() refuses it.
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer pos = lua_tointeger(L, lua_upvalueindex(2));
    for (;;) {
        pos++;
        if (lua_rawgeti(L, lua_upvalueindex(1), pos) == LUA_TNIL) return 1;  // stack: t, _, nil: done
        lua_pushvalue(L, -1);   // stack: t, _, k, k
        lua_rawget(L, 1);       // stack: t, _, k, v
        if (!lua_isnil(L, -1)) break;
        lua_pop(L, 2);          // removed while iterating: skip it, as next() would
    }
    lua_pushinteger(L, pos);
    lua_replace(L, lua_upvalueindex(2));
    return 2;
}

static int lifeline_pairs(lua_State *L) {
    luaL_checkany(L, 1);
    if (luaL_getmetafield(L, 1, "__pairs") != LUA_TNIL) {  // stack: t, __pairs
        lua_pushvalue(L, 1);
        lua_call(L, 1, 3);
        return 3;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_Integer n = 0;
    lua_newtable(L);                  // stack: t, keys (in next() order)
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {     // stack: t, keys, k, v
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, 2, ++n);       // stack: t, keys, k
    }
    LifelineKey *ks = (LifelineKey *)lua_newuserdatauv(L, sizeof(LifelineKey) * (size_t)(n > 0 ? n : 1), 0);
    for (lua_Integer j = 1; j <= n; j++) {  // stack: t, keys, ud
        LifelineKey *k = &ks[j - 1];
        memset(k, 0, sizeof *k);
        k->slot = (int)j;
        switch (lua_rawgeti(L, 2, j)) {
        case LUA_TNUMBER:
            k->rank = 0;
            k->isint = lua_isinteger(L, -1);
            if (k->isint) k->i = lua_tointeger(L, -1); else k->n = lua_tonumber(L, -1);
            break;
        case LUA_TSTRING:
            k->rank = 1;
            k->s = lua_tolstring(L, -1, &k->len);
            break;
        case LUA_TBOOLEAN:
            k->rank = 2;
            k->i = lua_toboolean(L, -1);
            break;
        default:
            k->rank = 3;
        }
        lua_pop(L, 1);
    }
    qsort(ks, (size_t)n, sizeof(LifelineKey), lifeline_key_compare);
    lua_createtable(L, (int)n, 0);          // stack: t, keys, ud, sorted
    for (lua_Integer j = 1; j <= n; j++) {
        lua_rawgeti(L, 2, ks[j - 1].slot);
        lua_rawseti(L, -2, j);
    }
    lua_pushinteger(L, 0);                  // stack: t, keys, ud, sorted, 0
    lua_pushcclosure(L, lifeline_sorted_next, 2);  // stack: t, keys, ud, iter
    lua_pushvalue(L, 1);
    lua_pushnil(L);                         // stack: ..., iter, t, nil
    return 3;
}

// setmetatable that refuses __gc: Lua runs finalizers with hooks off, so a runaway finalizer
// could never be stopped by the watchdog, and lua_close would run plugin code after the app ended.
static int lifeline_setmetatable(lua_State *L) {
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL) {
            return luaL_error(L, "__gc metamethods are not available to plugins "
                                 "(the watchdog cannot stop a finalizer)");
        }
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));  // stack: t, mt, setmetatable
    lua_insert(L, 1);                       // stack: setmetatable, t, mt
    lua_settop(L, 3);
    lua_call(L, 2, 1);
    return 1;
}

// load() for text chunks only: the mode argument is forced to "t".
static int lifeline_load_text(lua_State *L) {
    // An absent env must stay absent: passing nil would give the chunk _ENV = nil.
    int nargs = lua_gettop(L) < 3 ? 3 : lua_gettop(L);
    if (nargs > 4) nargs = 4;
    lua_settop(L, nargs);                      // stack: chunk, name, mode[, env]
    lua_pushliteral(L, "t");
    lua_replace(L, 3);                         // stack: chunk, name, "t"[, env]
    lua_pushvalue(L, lua_upvalueindex(1));     // stack: chunk, name, "t"[, env], load
    lua_insert(L, 1);                          // stack: load, chunk, name, "t"[, env]
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L);
}

static int lifeline_require(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    lua_settop(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);  // stack: name, loaded
    lua_getfield(L, 2, name);                            // stack: name, loaded, value
    if (!lua_isnil(L, -1)) return 1;
    lua_pop(L, 1);                                       // stack: name, loaded
    size_t len = strlen(name);
    int ok = len > 0 && name[0] != '.' && name[len - 1] != '.' && strstr(name, "..") == NULL;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = name[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '-' || ch == '.';
    }
    if (!ok) {
        return luaL_error(L, "module '%s' not found: require takes 'lifeline' or a module in the plugin's folder",
                          name);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_DIR);  // stack: name, loaded, dir
    luaL_gsub(L, name, ".", "/");                             // stack: name, loaded, dir, relpath
    const char *dir = lua_tostring(L, 3);
    const char *rel = lua_tostring(L, 4);
    const char *candidates[2];
    candidates[0] = lua_pushfstring(L, "%s/%s.lua", dir, rel);       // stack: ..., path1
    candidates[1] = lua_pushfstring(L, "%s/%s/init.lua", dir, rel);  // stack: ..., path1, path2
    for (int i = 0; i < 2; i++) {
        int why;
        if (lifeline_loadfile_text(L, candidates[i], &why) != LUA_OK) {  // stack: ..., message
            if (why == LIFELINE_FILE_MISSING) {
                lua_pop(L, 1);
                continue;
            }
            if (why == LIFELINE_FILE_OUTSIDE) {
                return luaL_error(L, "module '%s' refused: %s leads outside the plugin's folder (through a link); "
                                     "require loads only files inside the plugin's folder", name, candidates[i]);
            }
            return lua_error(L);
        }                                                                                // stack: ..., chunk
        lua_pushvalue(L, 1);                                                     // stack: ..., chunk, name
        lua_call(L, 1, 1);                                                       // stack: ..., result
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            lua_pushboolean(L, 1);
        }
        lua_pushvalue(L, -1);       // stack: ..., result, result
        lua_setfield(L, 2, name);   // stack: ..., result
        return 1;
    }
    return luaL_error(L, "module '%s' not found in the plugin's folder (tried %s and %s)", name, candidates[0],
                      candidates[1]);
}

void lifeline_preload(lua_State *L, const char *name) {
    lua_getfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);  // stack: ..., value, loaded
    lua_insert(L, -2);                                  // stack: ..., loaded, value
    lua_setfield(L, -2, name);                          // stack: ..., loaded
    lua_pop(L, 1);                                      // stack: ...
}

// The libraries a plugin gets, in the style of linit.c: an explicit list, never luaL_openlibs.
static const luaL_Reg lifeline_allowed_libs[] = {
    {LUA_GNAME, luaopen_base},
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_MATHLIBNAME, luaopen_math},
    {LUA_UTF8LIBNAME, luaopen_utf8},
    {LUA_COLIBNAME, luaopen_coroutine},
    {NULL, NULL}
};

// The base library's functions replaced, in lbaselib's style; a NULL function removes the name
// (dofile and loadfile read files by name).
static const luaL_Reg lifeline_base_funcs[] = {
    {"dofile", NULL},
    {"loadfile", NULL},
    {"pairs", lifeline_pairs},
    {"require", lifeline_require},
    {NULL, NULL}
};

// The base library's functions that a plugin gets through a guard: each closes over the original.
static const luaL_Reg lifeline_base_guards[] = {
    {"load", lifeline_load_text},
    {"setmetatable", lifeline_setmetatable},
    {NULL, NULL}
};

static const char *const lifeline_allowed_os[] = {"time", "clock", "date", "difftime", NULL};

static int lifeline_open_sandbox_protected(lua_State *L) {
    const char *plugin_dir = (const char *)lua_touserdata(L, 1);
    for (const luaL_Reg *lib = lifeline_allowed_libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);  // stack: ..., lib
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L);  // stack: ..., _G
    for (const luaL_Reg *f = lifeline_base_guards; f->name; f++) {
        lua_getfield(L, -1, f->name);       // stack: ..., _G, original
        lua_pushcclosure(L, f->func, 1);    // stack: ..., _G, guarded
        lua_setfield(L, -2, f->name);       // stack: ..., _G
    }
    // A fixed seed, so math.random gives the same numbers on every run.
    lua_getfield(L, -1, LUA_MATHLIBNAME);          // stack: ..., _G, math
    lua_getfield(L, -1, "randomseed");             // stack: ..., _G, math, randomseed
    lua_pushinteger(L, 0);
    lua_call(L, 1, 0);                             // stack: ..., _G, math
    lua_pop(L, 1);                                 // stack: ..., _G

    // os, reduced to what cannot touch the machine.
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);  // stack: ..., _G, fullos
    lua_newtable(L);                                 // stack: ..., _G, fullos, os
    for (const char *const *n = lifeline_allowed_os; *n; n++) {
        lua_getfield(L, -2, *n);
        lua_setfield(L, -2, *n);
    }
    lua_setfield(L, -3, LUA_OSLIBNAME);  // stack: ..., _G, fullos
    lua_pop(L, 1);                       // stack: ..., _G

    lua_getfield(L, -1, LUA_COLIBNAME);  // stack: ..., _G, coroutine
    lifeline_open_coroutines(L);
    lua_pop(L, 1);                       // stack: ..., _G

    // require: `lifeline` and the plugin's own folder, nothing else.
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_LOADED);
    lua_pushstring(L, plugin_dir);
    lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_DIR);
    // Resolved once, here: a link to the plugin's folder is followed (the user made it), and
    // what the plugin loads later must lie below where it led at the start.
    char root[PATH_MAX];
    if (realpath(plugin_dir, root) != NULL) {
        lua_pushstring(L, root);
        lua_setfield(L, LUA_REGISTRYINDEX, LIFELINE_PLUGIN_ROOT);
    }
    for (const luaL_Reg *f = lifeline_base_funcs; f->name; f++) {
        if (f->func != NULL) lua_pushcfunction(L, f->func);
        else lua_pushnil(L);
        lua_setfield(L, -2, f->name);  // stack: ..., _G
    }

    lua_pop(L, 1);  // stack: ...
    // The full libraries stay out of reach: drop what luaL_requiref cached.
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    return 0;
}

int lifeline_open_sandbox(lua_State *L, const char *plugin_dir) {
    lua_pushcfunction(L, lifeline_open_sandbox_protected);
    lua_pushlightuserdata(L, (void *)plugin_dir);
    return lua_pcall(L, 1, 0, 0);
}
