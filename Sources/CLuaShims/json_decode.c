// lifeline.json.decode: JSON text to Lua values, with lua-cjson's messages. See json.c for how it
// allocates.

#include "json.h"

#include <string.h>

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
int lifeline_json_decode(lua_State *L) {
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


// lifeline.store.get's decoder: the stored JSON text, decoded straight into Lua values, so the
// host holds no parsed copy of the value beside the text and the Lua value. Runs protected.
static int json_decode_text_thunk(lua_State *L) {
    const char *text = (const char *)lua_touserdata(L, 1);
    size_t n = (size_t)lua_tointeger(L, 2);
    lua_settop(L, 1);
    lua_pushnil(L);  // stack: text pointer, scratch (none yet)
    JsonIn in = {text, text, text + n, 2, NULL, 0, 0};
    if (json_decode_value(L, &in, "value") != 0) return lua_error(L);
    json_skip_space(&in);
    if (in.p < in.end) {
        json_fail(L, &in, "the end");
        return lua_error(L);
    }
    return 1;
}

int lifeline_json_decode_text(lua_State *L, const char *text, size_t n) {
    // None of these pushes allocates: a light C function, a light userdata, an integer.
    lua_pushcfunction(L, json_decode_text_thunk);
    lua_pushlightuserdata(L, (void *)text);
    lua_pushinteger(L, (lua_Integer)n);
    return lua_pcall(L, 2, 1, 0);
}
