#ifndef CLUACJSON_SHIM_H
#define CLUACJSON_SHIM_H
#include <lua5.4/lua.h>
// lua-cjson's two openers (Debian's header names only the first).
int luaopen_cjson(lua_State *L);
int luaopen_cjson_safe(lua_State *L);
#endif
