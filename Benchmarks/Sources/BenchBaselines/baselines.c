#include "BenchBaselines.h"
#include "CLuaShims.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int count;
    lua_State **states;
} BenchStates;

// `count` states with the standard libraries, each having run `source` and kept `results` of
// what it returned on its stack.
static BenchStates *bench_make_states(int count, const char *source, int results) {
    BenchStates *s = malloc(sizeof *s);
    s->count = count;
    s->states = calloc((size_t)count, sizeof(lua_State *));
    for (int i = 0; i < count; i++) {
        lua_State *L = luaL_newstate();
        luaL_openlibs(L);
        if (luaL_loadstring(L, source) != LUA_OK || lua_pcall(L, 0, results, 0) != LUA_OK) {
            fprintf(stderr, "benchmark baseline: %s\n", lua_tostring(L, -1));
            abort();
        }
        s->states[i] = L;
    }
    return s;
}

void *bench_states_new(int count, const char *handler_source) {
    return bench_make_states(count, handler_source, 1);  // stack: handler
}

void bench_states_free(void *states) {
    BenchStates *s = states;
    for (int i = 0; i < s->count; i++) lua_close(s->states[i]);
    free(s->states);
    free(s);
}

long bench_states_dispatch(void *states, long rounds) {
    BenchStates *s = states;
    long failed = 0;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < s->count; i++) {
            lua_State *L = s->states[i];
            lua_pushvalue(L, 1);        // stack: handler, handler
            lua_createtable(L, 0, 3);   // stack: handler, handler, event
            lua_pushstring(L, "didReceiveMemoryWarning");
            lua_setfield(L, -2, "name");
            lua_pushnumber(L, (lua_Number)r);
            lua_setfield(L, -2, "time");
            lua_pushstring(L, "active");
            lua_setfield(L, -2, "state");
            if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
                failed++;
                lua_pop(L, 1);
            }
        }
    }
    return failed;
}

static int bench_empty(lua_State *L) {
    (void)L;
    return 0;
}

// `bench.keep(seconds, f)` keeps f, as a timer keeps its function; `bench.take()` gives it back.
static char bench_kept_key;

static int bench_keep(lua_State *L) {
    lua_settop(L, 2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &bench_kept_key);
    return 0;
}

static int bench_take(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &bench_kept_key);
    return 1;
}

int bench_run_plain(const char *source, char *error, int error_size) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_newtable(L);
    lua_pushcfunction(L, bench_empty);
    lua_setfield(L, -2, "empty");
    lua_pushcfunction(L, bench_keep);
    lua_setfield(L, -2, "keep");
    lua_pushcfunction(L, bench_take);
    lua_setfield(L, -2, "take");
    lua_setglobal(L, "bench");
    int status = luaL_loadstring(L, source);
    if (status == LUA_OK) status = lua_pcall(L, 0, 0, 0);
    if (status != LUA_OK && error && error_size > 0) snprintf(error, (size_t)error_size, "%s", lua_tostring(L, -1));
    lua_close(L);
    return status;
}

int64_t bench_resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long size = 0, resident = 0;
    int got = fscanf(f, "%ld %ld", &size, &resident);
    fclose(f);
    if (got != 2) return -1;
    return (int64_t)resident * sysconf(_SC_PAGESIZE);
}

void *bench_plain_states_new(int count, const char *source) { return bench_make_states(count, source, 0); }

void bench_plain_states_free(void *states) { bench_states_free(states); }

// The sandboxed states of plugins.load's baseline: what every plugin's state needs, and nothing
// of the host: the capped allocator, the sandbox, and the plugin's source compiled.
typedef struct {
    int count;
    LifelineControl **controls;
} BenchSandboxed;

void *bench_sandboxed_states_new(int count, const char *source) {
    BenchSandboxed *s = malloc(sizeof *s);
    s->count = count;
    s->controls = calloc((size_t)count, sizeof(LifelineControl *));
    for (int i = 0; i < count; i++) {
        LifelineControl *c = lifeline_control_new(32u << 20, NULL);
        lua_State *L = c ? lifeline_control_state(c) : NULL;
        if (!L || lifeline_open_sandbox(L, "/nonexistent") != LUA_OK || luaL_loadstring(L, source) != LUA_OK) {
            fprintf(stderr, "benchmark baseline: %s\n", L ? lua_tostring(L, -1) : "out of memory");
            abort();
        }
        lua_settop(L, 0);
        s->controls[i] = c;
    }
    return s;
}

void bench_sandboxed_states_free(void *states) {
    BenchSandboxed *s = states;
    for (int i = 0; i < s->count; i++) lifeline_control_free(s->controls[i]);
    free(s->controls);
    free(s);
}

void bench_malloc_trim(void) { malloc_trim(0); }
