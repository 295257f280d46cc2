// lifeline.json.encode: Lua values to JSON text, with object keys in byte order so the same table
// gives the same text on every run. See json.c for how it allocates.

#include "json.h"

#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct JsonOut {
    int slot;     // the stack slot of the userdata that holds the bytes
    char *bytes;  // that userdata's memory (kept alive by the slot)
    size_t used, size;
} JsonOut;

// Makes room for `need` more bytes: a new userdata of twice the size (or more), which replaces
// the old one in its slot. Raises a memory error past the cap.
static void json_grow(lua_State *L, JsonOut *out, size_t need) {
    size_t size = out->size;
    while (size - out->used < need) {
        if (size > ((size_t)-1) / 2) {
            lua_pushliteral(L, "not enough memory");
            lua_error(L);
        }
        size *= 2;
    }
    char *bytes = (char *)lua_newuserdatauv(L, size, 0);  // stack: ..., new
    memcpy(bytes, out->bytes, out->used);
    lua_replace(L, out->slot);                            // stack: ...
    out->bytes = bytes;
    out->size = size;
}

static void json_add(lua_State *L, JsonOut *out, const char *s, size_t n) {
    if (out->size - out->used < n) json_grow(L, out, n);
    memcpy(out->bytes + out->used, s, n);
    out->used += n;
}

static void json_add_char(lua_State *L, JsonOut *out, char ch) {
    if (out->used == out->size) json_grow(L, out, 1);
    out->bytes[out->used++] = ch;
}

// Pushes "Cannot serialise TYPE: reason", in lua-cjson's words, and returns -1.
static int json_refuse(lua_State *L, int idx, const char *reason) {
    lua_pushfstring(L, "Cannot serialise %s: %s", luaL_typename(L, idx), reason);
    return -1;
}

// Writes the number at `idx` into `text` (at least 32 bytes); returns its length, or 0 for NaN
// and infinities. Integers are exact; a float gets the fewest significant digits (up to 17) that
// read back as the same float.
static size_t json_format_number(lua_State *L, int idx, char *text) {
    if (lua_isinteger(L, idx)) {
        return (size_t)snprintf(text, 32, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
    }
    double d = (double)lua_tonumber(L, idx);
    if (isnan(d) || isinf(d)) return 0;
    int n = 0;
    // From 15 (DBL_DIG): a normal float that some decimal of up to 15 digits reads back as prints
    // as that decimal at 15, so starting lower would find nothing shorter. Subnormals have fewer
    // digits of precision: they start from 1.
    for (int precision = (d != 0 && fabs(d) < DBL_MIN) ? 1 : 15; precision <= 17; precision++) {
        n = snprintf(text, 32, "%.*g", precision, d);
        if (strtod(text, NULL) == d) break;
    }
    // JSON's decimal point is '.', whatever the C locale says.
    char point = localeconv()->decimal_point[0];
    if (point != '.') {
        for (int i = 0; i < n; i++) {
            if (text[i] == point) text[i] = '.';
        }
    }
    return (size_t)n;
}

// Appends `s` as a JSON string. Returns -1 (message pushed) when it is not valid UTF-8: JSON
// text is UTF-8, and a string of other bytes would come out as something no parser reads back.
static int json_add_string(lua_State *L, JsonOut *out, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    json_add_char(L, out, '"');
    while (p < end) {
        // A run of bytes that go out as they are.
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\') p++;
        if (p > run) json_add(L, out, (const char *)run, (size_t)(p - run));
        if (p == end) break;
        unsigned c = *p;
        if (c >= 0x80) {
            size_t len = json_utf8_length(p, end);
            if (len == 0) {
                lua_pushfstring(L, "Cannot serialise string: invalid UTF-8 at byte %I", (lua_Integer)(p - (const unsigned char *)s + 1));
                return -1;
            }
            json_add(L, out, (const char *)p, len);
            p += len;
            continue;
        }
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t len = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:  // the other control characters, and DEL
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            len = 6;
        }
        json_add(L, out, esc, len);
        p++;
    }
    json_add_char(L, out, '"');
    return 0;
}

static int json_encode_value(lua_State *L, JsonOut *out, int idx, int depth);

// A table with only keys 1..n (n >= 1, holes allowed unless too sparse): its largest key, or 0
// when it is to be an object, or -1 (message pushed) for an array too sparse to write.
static lua_Integer json_array_length(lua_State *L, int idx) {
    lua_Integer max = 0, items = 0;
    lua_pushnil(L);                  // stack: ..., nil
    while (lua_next(L, idx) != 0) {  // stack: ..., key, value
        lua_pop(L, 1);               // stack: ..., key
        lua_Integer k;
        if (!lua_isinteger(L, -1) || (k = lua_tointeger(L, -1)) < 1) {
            lua_pop(L, 1);           // stack: ...
            return 0;
        }
        if (k > max) max = k;
        items++;
    }
    // lua-cjson's rule: more than half holes, past index 10, is refused, not padded with nulls.
    if (max > 10 && max > items * 2) {
        return json_refuse(L, idx, "excessively sparse array");
    }
    return max;
}

static int json_encode_array(lua_State *L, JsonOut *out, int idx, lua_Integer n, int depth) {
    json_add_char(L, out, '[');
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) json_add_char(L, out, ',');
        lua_rawgeti(L, idx, i);  // stack: ..., item
        if (json_encode_value(L, out, lua_gettop(L), depth) != 0) return -1;
        lua_pop(L, 1);           // stack: ...
    }
    json_add_char(L, out, ']');
    return 0;
}

// One key of an object, as it will be written.
typedef struct JsonKey {
    const char *text;  // kept alive by the entries table
    size_t length;
    int number;        // 1: the key is a number (written as its digits); sorts before an equal string
    lua_Integer slot;  // the key's text and value are at 2 * slot - 1 and 2 * slot in the entries table
} JsonKey;

/// Objects with at most this many keys sort them in an array on the C stack (kept small: the
/// encoder recurses up to 128 levels deep).
#define JSON_SMALL_OBJECT 8

static int json_key_compare(const void *a, const void *b) {
    const JsonKey *x = a, *y = b;
    size_t m = x->length < y->length ? x->length : y->length;
    int c = memcmp(x->text, y->text, m);
    if (c != 0) return c;
    if (x->length != y->length) return x->length < y->length ? -1 : 1;
    return y->number - x->number;
}

// Writes an object with its keys in byte order, so the same table gives the same text on every
// run (next() order follows Lua's per-state random string hashes). The keys' texts and the
// values go into an entries table first (it keeps the texts alive), then are written sorted.
static int json_encode_object(lua_State *L, JsonOut *out, int idx, int depth) {
    lua_Integer n = 0;
    lua_pushnil(L);                               // stack: ..., nil
    while (lua_next(L, idx) != 0) {               // stack: ..., key, value
        lua_pop(L, 1);                            // stack: ..., key
        int t = lua_type(L, -1);
        if (t != LUA_TSTRING && t != LUA_TNUMBER) return json_refuse(L, -1, "table key must be a number or string");
        n++;
    }
    lua_createtable(L, (int)(n < INT_MAX / 2 ? 2 * n : 0), 0);  // stack: ..., entries
    int entries = lua_gettop(L);
    JsonKey small[JSON_SMALL_OBJECT];
    JsonKey *list = small;
    if (n > JSON_SMALL_OBJECT) {
        list = (JsonKey *)lua_newuserdatauv(L, sizeof(JsonKey) * (size_t)n, 0);  // stack: ..., entries, list
    } else {
        lua_pushnil(L);                           // stack: ..., entries, nil (the list is on the C stack)
    }
    lua_Integer i = 0;
    lua_pushnil(L);                               // stack: ..., entries, list, nil
    while (lua_next(L, idx) != 0) {               // stack: ..., entries, list, key, value
        JsonKey *k = &list[i];
        k->slot = ++i;
        lua_rawseti(L, entries, 2 * i);           // stack: ..., entries, list, key
        k->number = lua_type(L, -1) == LUA_TNUMBER;
        if (k->number) {
            char text[32];
            size_t len = json_format_number(L, -1, text);
            if (len == 0) return json_refuse(L, -1, "must not be NaN or Inf");
            lua_pushlstring(L, text, len);        // stack: ..., entries, list, key, text
        } else {
            lua_pushvalue(L, -1);                 // stack: ..., entries, list, key, text
        }
        k->text = lua_tolstring(L, -1, &k->length);
        lua_rawseti(L, entries, 2 * i - 1);       // stack: ..., entries, list, key
    }
    qsort(list, (size_t)n, sizeof(JsonKey), json_key_compare);
    json_add_char(L, out, '{');
    for (lua_Integer j = 0; j < n; j++) {
        if (j > 0) json_add_char(L, out, ',');
        if (json_add_string(L, out, list[j].text, list[j].length) != 0) return -1;
        json_add_char(L, out, ':');
        lua_rawgeti(L, entries, 2 * list[j].slot);  // stack: ..., entries, list, value
        if (json_encode_value(L, out, lua_gettop(L), depth) != 0) return -1;
        lua_pop(L, 1);                              // stack: ..., entries, list
    }
    json_add_char(L, out, '}');
    lua_pop(L, 2);                                  // stack: ...
    return 0;
}

// Appends the value at `idx` (absolute), a table being at nesting `depth + 1`. Returns 0, or -1
// with the message on top of the stack.
static int json_encode_value(lua_State *L, JsonOut *out, int idx, int depth) {
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        json_add(L, out, "null", 4);
        return 0;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, idx)) json_add(L, out, "true", 4);
        else json_add(L, out, "false", 5);
        return 0;
    case LUA_TNUMBER: {
        char text[32];
        size_t n = json_format_number(L, idx, text);
        if (n == 0) return json_refuse(L, idx, "must not be NaN or Inf");
        json_add(L, out, text, n);
        return 0;
    }
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        return json_add_string(L, out, s, n);
    }
    case LUA_TTABLE: {
        depth++;
        // A cycle ends here too: it nests without end.
        if (depth > LIFELINE_JSON_DEPTH) {
            lua_pushfstring(L, "Cannot serialise, excessive nesting (%d)", depth);
            return -1;
        }
        json_reserve(L);
        lua_Integer n = json_array_length(L, idx);
        if (n < 0) return -1;
        if (n > 0) return json_encode_array(L, out, idx, n, depth);
        return json_encode_object(L, out, idx, depth);
    }
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) {  // lifeline.json.null
            json_add(L, out, "null", 4);
            return 0;
        }
        /* fall through */
    default:
        return json_refuse(L, idx, "type not supported");
    }
}

// lifeline.json.encode(value): the JSON text, or nil and why not.
int lifeline_json_encode(lua_State *L) {
    if (lua_gettop(L) != 1) {
        lifeline_push_argerror(L, 1, "lifeline.json.encode", "expected 1 argument", 19);
        return lua_error(L);
    }
    JsonOut out;
    out.size = 256;
    out.used = 0;
    out.bytes = (char *)lua_newuserdatauv(L, out.size, 0);  // stack: value, bytes
    out.slot = 2;
    if (json_encode_value(L, &out, 1, 0) != 0) {  // stack: value, bytes, ..., message
        lua_pushnil(L);
        lua_insert(L, -2);                        // stack: ..., nil, message
        return 2;
    }
    lua_pushlstring(L, out.bytes, out.used);      // stack: value, bytes, text
    return 1;
}
