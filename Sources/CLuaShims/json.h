// What json_encode.c and json_decode.c share: the nesting cap and stack reservation, and the
// UTF-8 check both sides apply.
#ifndef LIFELINE_JSON_H
#define LIFELINE_JSON_H

#include "internal.h"

/// The deepest nesting encode and decode accept (a table inside a table counts 2).
#define LIFELINE_JSON_DEPTH 128

/// Stack slots one level of nesting may use, plus two spare for an error message.
#define JSON_SLOTS 8

// Raises Lua's "not enough memory" when the stack cannot grow (it only fails for memory: the
// nesting cap keeps us far below LUAI_MAXSTACK). The caller's reservation left slots for the message.
static inline void json_reserve(lua_State *L) {
    if (!lua_checkstack(L, JSON_SLOTS)) {
        lua_pushliteral(L, "not enough memory");
        lua_error(L);
    }
}

// The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not valid UTF-8: no overlong
// forms, no surrogates (U+D800 to U+DFFF), nothing above U+10FFFF.
static inline size_t json_utf8_length(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c < 0xC2) return 0;
    else if (c < 0xE0) n = 2;
    else if (c < 0xF0) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c < 0xF5) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    }
    return n;
}

/// lifeline.json.encode(value): the JSON text, or nil and why not.
LIFELINE_FUNC int lifeline_json_encode(lua_State *L);
/// lifeline.json.decode(text): the value, or nil and why not.
LIFELINE_FUNC int lifeline_json_decode(lua_State *L);

#endif
