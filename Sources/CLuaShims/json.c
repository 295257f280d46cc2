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

#include "CLuaShims.h"

#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/// The deepest nesting encode and decode accept (a table inside a table counts 2).
#define LIFELINE_JSON_DEPTH 128

/// Stack slots one level of nesting may use, plus two spare for an error message.
#define JSON_SLOTS 8

// ---------------------------------------------------------------- shared

// Raises Lua's "not enough memory" when the stack cannot grow (it only fails for memory: the
// nesting cap keeps us far below LUAI_MAXSTACK). The caller's reservation left slots for the message.
static void json_reserve(lua_State *L) {
    if (!lua_checkstack(L, JSON_SLOTS)) {
        lua_pushliteral(L, "not enough memory");
        lua_error(L);
    }
}

// The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not valid UTF-8: no overlong
// forms, no surrogates (U+D800 to U+DFFF), nothing above U+10FFFF.
static size_t json_utf8_length(const unsigned char *p, const unsigned char *end) {
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

// ---------------------------------------------------------------- encode

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
static int lifeline_json_encode(lua_State *L) {
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

// ---------------------------------------------------------------- decode

typedef struct JsonIn {
    const char *text, *p, *end;
    int scratch;          // the stack slot of the userdata strings with escapes are decoded into
    char *scratch_bytes;
    size_t scratch_size;
    int depth;
} JsonIn;

static void json_skip_space(JsonIn *in) {
    while (in->p < in->end && (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r')) in->p++;
}

static int json_word_at(const JsonIn *in, const char *word, size_t n) {
    return (size_t)(in->end - in->p) >= n && memcmp(in->p, word, n) == 0;
}

// What stands at the current position, in lua-cjson's words.
static const char *json_token_name(const JsonIn *in) {
    if (in->p >= in->end) return "T_END";
    switch (*in->p) {
    case '{': return "T_OBJ_BEGIN";
    case '}': return "T_OBJ_END";
    case '[': return "T_ARR_BEGIN";
    case ']': return "T_ARR_END";
    case '"': return "T_STRING";
    case ':': return "T_COLON";
    case ',': return "T_COMMA";
    case 't': return json_word_at(in, "true", 4) ? "T_BOOLEAN" : "invalid token";
    case 'f': return json_word_at(in, "false", 5) ? "T_BOOLEAN" : "invalid token";
    case 'n': return json_word_at(in, "null", 4) ? "T_NULL" : "invalid token";
    default: return (*in->p == '-' || (*in->p >= '0' && *in->p <= '9')) ? "T_NUMBER" : "invalid token";
    }
}

// Pushes "Expected WHAT but found FOUND at character N" (N counts bytes from 1) and returns -1.
static int json_fail_at(lua_State *L, const JsonIn *in, const char *what, const char *found, const char *at) {
    lua_pushfstring(L, "Expected %s but found %s at character %I", what, found, (lua_Integer)(at - in->text + 1));
    return -1;
}

static int json_fail(lua_State *L, const JsonIn *in, const char *what) {
    return json_fail_at(L, in, what, json_token_name(in), in->p);
}

static int json_hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static size_t json_put_utf8(char *out, unsigned long cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Pushes the string that starts at the current '"'. The text is checked first (its end, raw
// control characters, UTF-8), then, if it has escapes, decoded into the scratch userdata: the
// decoded bytes are never more than the escaped ones.
static int json_decode_string(lua_State *L, JsonIn *in, const char *what) {
    const char *start = in->p + 1, *q = start;
    int escapes = 0;
    for (;;) {
        if (q >= in->end) return json_fail_at(L, in, what, "unexpected end of string", in->p);
        unsigned char c = (unsigned char)*q;
        if (c == '"') break;
        if (c == '\\') {
            if (in->end - q < 2) return json_fail_at(L, in, what, "unexpected end of string", in->p);
            escapes = 1;
            q += 2;  // the escape is checked below, when decoding
            continue;
        }
        if (c < 0x20) return json_fail_at(L, in, what, "control character in string", q);
        if (c >= 0x80) {
            size_t n = json_utf8_length((const unsigned char *)q, (const unsigned char *)in->end);
            if (n == 0) return json_fail_at(L, in, what, "invalid UTF-8", q);
            q += n;
            continue;
        }
        q++;
    }
    const char *close = q;
    if (!escapes) {
        lua_pushlstring(L, start, (size_t)(close - start));
        in->p = close + 1;
        return 0;
    }
    size_t need = (size_t)(close - start);
    if (in->scratch_size < need) {
        in->scratch_bytes = (char *)lua_newuserdatauv(L, need, 0);  // stack: ..., scratch
        lua_replace(L, in->scratch);                                // stack: ...
        in->scratch_size = need;
    }
    char *out = in->scratch_bytes;
    size_t n = 0;
    for (q = start; q < close;) {
        if (*q != '\\') {
            out[n++] = *q++;
            continue;
        }
        const char *esc = q;
        char c = q[1];
        q += 2;
        switch (c) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            int hi = close - q >= 4 ? json_hex4(q) : -1;
            if (hi < 0) return json_fail_at(L, in, what, "invalid unicode escape code", esc);
            q += 4;
            unsigned long cp = (unsigned long)hi;
            if (hi >= 0xDC00 && hi <= 0xDFFF) return json_fail_at(L, in, what, "invalid unicode escape code", esc);
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                // A high surrogate: the low one must follow, as \uDC00 to \uDFFF.
                int lo = close - q >= 6 && q[0] == '\\' && q[1] == 'u' ? json_hex4(q + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) return json_fail_at(L, in, what, "invalid unicode escape code", esc);
                q += 6;
                cp = 0x10000 + (((unsigned long)hi - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
            }
            n += json_put_utf8(out + n, cp);
            break;
        }
        default:
            return json_fail_at(L, in, what, "invalid escape code", esc);
        }
    }
    lua_pushlstring(L, out, n);
    in->p = close + 1;
    return 0;
}

// Pushes the number at the current position. The grammar is JSON's own (no leading zeros, no
// '+', no hex, no inf or nan words); Lua then reads it: a whole number that fits is an integer,
// anything else a float.
static int json_decode_number(lua_State *L, JsonIn *in, const char *what) {
    const char *p = in->p, *end = in->end;
#define JSON_DIGIT(x) ((x) >= '0' && (x) <= '9')
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') p++;
    else if (p < end && JSON_DIGIT(*p)) while (p < end && JSON_DIGIT(*p)) p++;
    else return json_fail_at(L, in, what, "invalid number", in->p);
    if (p < end && *p == '.') {
        p++;
        if (!(p < end && JSON_DIGIT(*p))) return json_fail_at(L, in, what, "invalid number", in->p);
        while (p < end && JSON_DIGIT(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!(p < end && JSON_DIGIT(*p))) return json_fail_at(L, in, what, "invalid number", in->p);
        while (p < end && JSON_DIGIT(*p)) p++;
    }
#undef JSON_DIGIT
    size_t n = (size_t)(p - in->p);
    char text[64];
    const char *z = text;
    if (n < sizeof text) {
        memcpy(text, in->p, n);
        text[n] = '\0';
    } else {
        z = lua_pushlstring(L, in->p, n);  // stack: ..., digits (a long number: Lua needs it NUL-ended)
    }
    if (lua_stringtonumber(L, z) == 0) return json_fail_at(L, in, what, "invalid number", in->p);
    if (z != text) lua_remove(L, -2);      // stack: ..., number
    in->p = p;
    return 0;
}

static int json_decode_value(lua_State *L, JsonIn *in, const char *what);

// Enters one more level of nesting; -1 (message pushed) past the cap.
static int json_descend(lua_State *L, JsonIn *in) {
    in->depth++;
    if (in->depth > LIFELINE_JSON_DEPTH) {
        lua_pushfstring(L, "Found too many nested data structures (%d) at character %I", in->depth,
                        (lua_Integer)(in->p - in->text + 1));
        return -1;
    }
    json_reserve(L);
    return 0;
}

static int json_decode_array(lua_State *L, JsonIn *in) {
    if (json_descend(L, in) != 0) return -1;
    in->p++;
    lua_newtable(L);  // stack: ..., array
    json_skip_space(in);
    if (in->p < in->end && *in->p == ']') {
        in->p++;
        in->depth--;
        return 0;
    }
    for (lua_Integer i = 1;; i++) {
        if (json_decode_value(L, in, "value") != 0) return -1;  // stack: ..., array, item
        lua_rawseti(L, -2, i);                                   // stack: ..., array
        json_skip_space(in);
        if (in->p < in->end && *in->p == ',') {
            in->p++;
            continue;
        }
        if (in->p < in->end && *in->p == ']') {
            in->p++;
            in->depth--;
            return 0;
        }
        return json_fail(L, in, "comma or array end");
    }
}

static int json_decode_object(lua_State *L, JsonIn *in) {
    if (json_descend(L, in) != 0) return -1;
    in->p++;
    lua_newtable(L);  // stack: ..., object
    json_skip_space(in);
    if (in->p < in->end && *in->p == '}') {
        in->p++;
        in->depth--;
        return 0;
    }
    for (;;) {
        json_skip_space(in);
        if (!(in->p < in->end && *in->p == '"')) return json_fail(L, in, "object key string");
        if (json_decode_string(L, in, "object key string") != 0) return -1;  // stack: ..., object, key
        json_skip_space(in);
        if (!(in->p < in->end && *in->p == ':')) return json_fail(L, in, "colon");
        in->p++;
        if (json_decode_value(L, in, "value") != 0) return -1;  // stack: ..., object, key, value
        lua_rawset(L, -3);                                       // stack: ..., object
        json_skip_space(in);
        if (in->p < in->end && *in->p == ',') {
            in->p++;
            continue;
        }
        if (in->p < in->end && *in->p == '}') {
            in->p++;
            in->depth--;
            return 0;
        }
        return json_fail(L, in, "comma or object end");
    }
}

// Pushes the value at the current position (after white space). Returns 0, or -1 with the
// message on top of the stack.
static int json_decode_value(lua_State *L, JsonIn *in, const char *what) {
    json_skip_space(in);
    if (in->p >= in->end) return json_fail(L, in, what);
    switch (*in->p) {
    case '{': return json_decode_object(L, in);
    case '[': return json_decode_array(L, in);
    case '"': return json_decode_string(L, in, what);
    case 't':
        if (!json_word_at(in, "true", 4)) break;
        lua_pushboolean(L, 1);
        in->p += 4;
        return 0;
    case 'f':
        if (!json_word_at(in, "false", 5)) break;
        lua_pushboolean(L, 0);
        in->p += 5;
        return 0;
    case 'n':
        if (!json_word_at(in, "null", 4)) break;
        lua_pushlightuserdata(L, NULL);  // lifeline.json.null
        in->p += 4;
        return 0;
    default:
        if (*in->p == '-' || (*in->p >= '0' && *in->p <= '9')) return json_decode_number(L, in, what);
    }
    return json_fail(L, in, what);
}

// lifeline.json.decode(text): the value, or nil and why not.
static int lifeline_json_decode(lua_State *L) {
    if (lua_gettop(L) != 1) {
        lifeline_push_argerror(L, 1, "lifeline.json.decode", "expected 1 argument", 19);
        return lua_error(L);
    }
    if (lua_type(L, 1) != LUA_TSTRING && lua_type(L, 1) != LUA_TNUMBER) {
        lifeline_push_typeerror(L, 1, "lifeline.json.decode", "string");
        return lua_error(L);
    }
    size_t n;
    const char *text = lua_tolstring(L, 1, &n);
    lua_pushnil(L);  // stack: text, scratch (none yet)
    JsonIn in = {text, text, text + n, 2, NULL, 0, 0};
    if (json_decode_value(L, &in, "value") != 0) {  // stack: text, scratch, ..., message
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    json_skip_space(&in);
    if (in.p < in.end) {
        json_fail(L, &in, "the end");
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    return 1;  // stack: text, scratch, value
}

void lifeline_push_json(lua_State *L) {
    lua_createtable(L, 0, 3);  // stack: ..., json
    lua_pushcfunction(L, lifeline_json_encode);
    lua_setfield(L, -2, "encode");
    lua_pushcfunction(L, lifeline_json_decode);
    lua_setfield(L, -2, "decode");
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
}
