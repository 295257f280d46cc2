// lifeline.json: a JSON codec that allocates only through the plugin's lua_State.
//
// Every byte it needs (the output being built, a string being unescaped, the keys being sorted)
// is a Lua value: a userdata, a string or a table. So the plugin's memory cap counts all of it,
// and running out is Lua's own memory error, raised where the allocation failed, like any other
// allocation of the plugin's. Nothing here calls malloc, exit or abort.
//
// Problems with the data (a function to encode, bad JSON text) are not raised: encode and decode
// return nil and a message, so a plugin can test the result as it tests an HTTP request's.
// Memory errors and bad arguments are raised.
//
// No luaL_Buffer: encoding walks tables with lua_next while it appends, which would break the
// buffer's rule that nothing be pushed between its operations. The output lives instead in a
// userdata at a fixed stack slot, replaced by a bigger copy when full.

#include "json.h"

// In lbaselib's style: `null` is a placeholder, set below (a light userdata NULL is what decode
// gives for JSON's null, and what encode writes as null).
static const luaL_Reg lifeline_json_funcs[] = {
    {"encode", lifeline_json_encode},
    {"decode", lifeline_json_decode},
    {"null", NULL},
    {NULL, NULL}
};

int lifeline_open_json(lua_State *L) {
    luaL_newlib(L, lifeline_json_funcs);  // stack: ..., json
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    return 1;
}
