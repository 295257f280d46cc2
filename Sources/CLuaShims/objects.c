// The values the `lifeline` module hands out: handles (on, after), task handles (background),
// queues and operations, each a userdata of a class whose methods are Swift functions; and the
// error values of waits and requests.

#include "internal.h"

#include <string.h>

#define LIFELINE_HANDLE "lifeline.handle"
#define LIFELINE_TASK "lifeline.task"
#define LIFELINE_ERROR "lifeline.error"
#define LIFELINE_QUEUE "lifeline.queue"
#define LIFELINE_OPERATION "lifeline.operation"

// Pushes a new table of the entries of `functions` named "class:method", by method.
static void lifeline_push_methods(lua_State *L, const LifelineReg *functions, const char *class) {
    size_t n = strlen(class);
    lua_newtable(L);  // stack: ..., methods
    for (const LifelineReg *r = functions; r != NULL && r->name; r++) {
        if (strncmp(r->name, class, n) != 0 || r->name[n] != ':') continue;
        lifeline_push_listed(L, functions, r);
        lua_setfield(L, -2, r->name + n + 1);
    }
}

// Sets the metatable of the value on top of the stack to class `tname`, making the class first
// if this state has none yet (lifeline_push_class).
static void lifeline_set_class(lua_State *L, const char *tname);

// ---------------------------------------------------------------- handles

LifelineHandle *lifeline_push_handle(lua_State *L, int kind, lua_Integer id) {
    LifelineHandle *h = (LifelineHandle *)lua_newuserdatauv(L, sizeof(LifelineHandle), 0);  // stack: ..., h
    h->kind = kind;
    h->id = id;
    lifeline_set_class(L, LIFELINE_HANDLE);
    return h;
}

LifelineHandle *lifeline_to_handle(lua_State *L, int idx) {
    return (LifelineHandle *)luaL_testudata(L, idx, LIFELINE_HANDLE);
}

// ---------------------------------------------------------------- task handles

// task.id, and the methods (upvalue 1).
static int lifeline_task_index(lua_State *L) {
    LifelineTaskHandle *h = (LifelineTaskHandle *)luaL_checkudata(L, 1, LIFELINE_TASK);
    const char *key = lua_tostring(L, 2);
    if (key != NULL && strcmp(key, "id") == 0) {
        lua_pushinteger(L, h->id);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

LifelineTaskHandle *lifeline_push_task(lua_State *L, lua_Integer id, lua_Integer work) {
    LifelineTaskHandle *h = (LifelineTaskHandle *)lua_newuserdatauv(L, sizeof(LifelineTaskHandle), 2);
    h->id = id;
    h->work = work;
    h->outcome = 0;
    h->results = 0;
    lifeline_set_class(L, LIFELINE_TASK);
    return h;
}

LifelineTaskHandle *lifeline_to_task(lua_State *L, int idx) {
    return (LifelineTaskHandle *)luaL_testudata(L, idx, LIFELINE_TASK);
}

// ---------------------------------------------------------------- queues and operations

// obj.id, obj.name (user value 1), and the methods (upvalue 1). Upvalue 2: the metatable's name.
static int lifeline_object_index(lua_State *L) {
    LifelineObject *o = (LifelineObject *)luaL_checkudata(L, 1, lua_tostring(L, lua_upvalueindex(2)));
    const char *key = lua_tostring(L, 2);
    if (key != NULL && strcmp(key, "id") == 0) {
        lua_pushinteger(L, o->id);
        return 1;
    }
    if (key != NULL && strcmp(key, "name") == 0) {
        lua_getiuservalue(L, 1, 1);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

static LifelineObject *lifeline_push_object(lua_State *L, const char *tname, lua_Integer id, const char *name) {
    LifelineObject *o = (LifelineObject *)lua_newuserdatauv(L, sizeof(LifelineObject), 1);
    o->id = id;
    o->flags = 0;
    lifeline_set_class(L, tname);
    if (name != NULL) {
        lua_pushstring(L, name);
        lua_setiuservalue(L, -2, 1);
    }
    return o;
}

LifelineObject *lifeline_push_queue(lua_State *L, const char *name) {
    return lifeline_push_object(L, LIFELINE_QUEUE, 0, name);
}

LifelineObject *lifeline_to_queue(lua_State *L, int idx) {
    return (LifelineObject *)luaL_testudata(L, idx, LIFELINE_QUEUE);
}

static void lifeline_new_class(lua_State *L, const char *tname, const LifelineReg *functions, const char *class);

LifelineObject *lifeline_push_operation(lua_State *L, lua_Integer id, const char *name) {
    return lifeline_push_object(L, LIFELINE_OPERATION, id, name);
}

LifelineObject *lifeline_to_operation(lua_State *L, int idx) {
    return (LifelineObject *)luaL_testudata(L, idx, LIFELINE_OPERATION);
}

int lifeline_takes_arguments(lua_State *L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    if (!lua_getinfo(L, ">u", &ar)) return 1;
    return ar.nparams > 0 || ar.isvararg;
}

int lifeline_function_line(lua_State *L, int idx, char *source, size_t size) {
    lua_Debug ar;
    if (size > 0) source[0] = '\0';
    lua_pushvalue(L, idx);
    if (!lua_getinfo(L, ">S", &ar) || ar.linedefined <= 0) return 0;
    if (size > 0) {
        // A file's chunk name whole ("@plugins/sync/init.lua"), as the plugin's error messages
        // give it; short_src would cut a long path to "...".
        const char *name = (ar.source[0] == '@' || ar.source[0] == '=') ? ar.source + 1 : ar.short_src;
        size_t n = strlen(name);
        if (n >= size) n = size - 1;
        memcpy(source, name, n);
        source[n] = '\0';
    }
    return ar.linedefined;
}

// Queues and operations: `id`, `name` and the methods, through __index.
static void lifeline_new_class(lua_State *L, const char *tname, const LifelineReg *functions, const char *class) {
    luaL_newmetatable(L, tname);                  // stack: ..., mt
    lifeline_push_methods(L, functions, class);   // stack: ..., mt, methods
    lua_pushstring(L, tname);
    lua_pushcclosure(L, lifeline_object_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, tname);
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);                 // stack: ...
}

// ---------------------------------------------------------------- error values

static int lifeline_error_tostring(lua_State *L) {
    lua_getfield(L, 1, "message");
    return 1;
}

void lifeline_push_error(lua_State *L, const char *kind, const char *message, size_t len) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, kind);
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, message, len);
    lua_setfield(L, -2, "message");
    if (strcmp(kind, "expired") == 0 || strcmp(kind, "cancelled") == 0) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, kind);
    }
    lifeline_set_class(L, LIFELINE_ERROR);
}

int lifeline_is_interruption(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx)) return 0;  // stack: ..., mt
    luaL_getmetatable(L, LIFELINE_ERROR);                                    // stack: ..., mt, ours
    int ok = 0;
    if (lua_rawequal(L, -1, -2)) {
        lua_pushliteral(L, "kind");
        lua_rawget(L, idx);                                                  // stack: ..., mt, ours, kind
        const char *kind = lua_tostring(L, -1);
        ok = kind != NULL && (strcmp(kind, "expired") == 0 || strcmp(kind, "cancelled") == 0);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return ok;
}

// ---------------------------------------------------------------- the classes

// Each class is made the first time a value of it is pushed: most plugins hand out few kinds of
// value, and making all five at once was a tenth of what a plugin's state cost to make. Nothing
// can look for a class before: its values are the only ones that carry it, and a test for one
// (luaL_testudata, lifeline_is_interruption) finds none until then.
static void lifeline_make_class(lua_State *L, const char *tname) {
    const LifelineReg *functions = lifeline_control_of(L)->functions;
    if (strcmp(tname, LIFELINE_HANDLE) == 0) {
        // Handles returned by on() and after(): a userdata with a cancel method.
        luaL_newmetatable(L, LIFELINE_HANDLE);               // stack: ..., mt
        lifeline_push_methods(L, functions, "handle");       // stack: ..., mt, methods
        lua_setfield(L, -2, "__index");                      // stack: ..., mt
        // Plugins cannot reach the metatable, so they cannot give handles a __gc (see setmetatable).
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);                                       // stack: ...
    } else if (strcmp(tname, LIFELINE_TASK) == 0) {
        // Task handles: `id` and the methods, through __index.
        luaL_newmetatable(L, LIFELINE_TASK);                 // stack: ..., mt
        lifeline_push_methods(L, functions, "task");         // stack: ..., mt, methods
        lua_pushcclosure(L, lifeline_task_index, 1);
        lua_setfield(L, -2, "__index");
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);                                       // stack: ...
    } else if (strcmp(tname, LIFELINE_ERROR) == 0) {
        // Error values of waits and requests.
        luaL_newmetatable(L, LIFELINE_ERROR);                // stack: ..., mt
        lua_pushcfunction(L, lifeline_error_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pop(L, 1);                                       // stack: ...
    } else if (strcmp(tname, LIFELINE_QUEUE) == 0) {
        lifeline_new_class(L, LIFELINE_QUEUE, functions, "queue");
    } else {
        lifeline_new_class(L, LIFELINE_OPERATION, functions, "operation");
    }
}

static void lifeline_set_class(lua_State *L, const char *tname) {
    if (luaL_getmetatable(L, tname) == LUA_TNIL) {  // stack: ..., value, mt | nil
        lua_pop(L, 1);
        lifeline_make_class(L, tname);
        luaL_getmetatable(L, tname);
    }
    lua_setmetatable(L, -2);                        // stack: ..., value
}

void lifeline_open_objects(lua_State *L, const LifelineReg *functions) {
    // The classes are made as their first values are (lifeline_set_class), from this list.
    lifeline_control_of(L)->functions = functions;
}
