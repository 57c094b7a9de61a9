/* codec: the message format. Values are encoded in the sender's lua_State into bytes and
 * decoded in the receiver's (copy semantics, like Erlang's term copying).
 *
 * Byte format (messages never leave the process: numbers are in native byte order). A value
 * is one tag byte followed by its payload:
 *
 *   0x00          nil
 *   0x01 / 0x02   false / true
 *   0x03 d8       a double (any: -0.0, inf, nan, non-integers, integers beyond int32)
 *   0x04 i1       an integer-valued double in int8 range (used for -128..-1)
 *   0x05 i2       ... in int16 range
 *   0x06 i4       ... in int32 range
 *   0x07 u8       an int64_t cdata (its 64 bits)
 *   0x08 u8       a uint64_t cdata
 *   0x09 vN b*N   a string of N >= 64 bytes (vN: unsigned LEB128, at most 10 bytes)
 *   0x0a vA vH    a table: A array values (keys 1..A, nil allowed for holes), then H key/value
 *                 pairs (keys never nil or NaN); the decoder preallocates A and H
 *   0x0b p8 / 0x0c p8   a channel tx / rx: the channel's address (only after a refs prefix)
 *   0x40+N b*N    a string of N < 64 bytes
 *   0x80+I        an integer I in 0..127
 *   anything else is malformed.
 *
 * Counts in a table header are checked against the bytes left (each value needs at least one
 * byte), minus those the enclosing tables still need, so preallocation never exceeds the
 * message size. The encoder writes H in one reserved byte after iterating and moves the
 * table's bytes only if H >= 128. Argument lists (codec_*_args) are vN then N values.
 *
 * Channel endpoints carry references: a message holding any starts with a refs prefix, 0x0d
 * (a value) or 0x0e (an argument list) and an 8-byte cookie, so that arbitrary bytes can
 * never be taken for channel addresses. Encoding takes one reference per endpoint (an rx
 * moves: the sender's object lets go of it) once the whole message encoded; decoding hands
 * them to the new objects and turns the prefix into 0x0f; codec_release drops those of a
 * message freed undelivered. */
#include "codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "chan_lua.h"
#include "ljx.h"

enum {
    T_NIL = 0x00,
    T_FALSE = 0x01,
    T_TRUE = 0x02,
    T_DOUBLE = 0x03,
    T_I8 = 0x04,
    T_I16 = 0x05,
    T_I32 = 0x06,
    T_INT64 = 0x07,
    T_UINT64 = 0x08,
    T_STR = 0x09,
    T_TABLE = 0x0a,
    T_TX = 0x0b,
    T_RX = 0x0c,
    T_REFS = 0x0d,
    T_REFS_ARGS = 0x0e,
    T_REFS_TAKEN = 0x0f,
    REFS_LEN = 9,
    T_SSTR = 0x40,
    SSTR_MAX = 63,
    T_FIXINT = 0x80,
    FIXINT_MAX = 127,
};

#define PATH_MAX_LEN 160 /* error paths longer than this keep the root and the innermost part */
#define MAX_RX 16        /* channel receivers one message may carry */

/* The refs prefix cookie: fixed for the process, unguessable by chance (ASLR'd address). */
static const char cookie_anchor;
static uint64_t refs_cookie(void)
{
    return (uint64_t)(uintptr_t)&cookie_anchor * 0x9E3779B97F4A7C15ull;
}

/* -- Buffer ---------------------------------------------------------------------------- */

void codec_buf_init(codec_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
}

void codec_buf_free(codec_buf *b)
{
    free(b->data);
    codec_buf_init(b);
}

void codec_buf_reset(codec_buf *b) { b->len = 0; }

static int buf_grow(codec_buf *b, size_t n)
{
    if (n > SIZE_MAX / 2 - b->len)
        return -1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

/* Make room for n more bytes; 0 or -1 (out of memory). */
static inline int buf_reserve(codec_buf *b, size_t n);

int codec_buf_append(codec_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static inline int buf_reserve(codec_buf *b, size_t n)
{
    return b->cap - b->len >= n ? 0 : buf_grow(b, n);
}

/* Callers have reserved room: a varint takes at most 10 bytes. */
static inline void put_varint(codec_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        b->data[b->len++] = (char)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (char)v;
}

/* ---- values built from C (notices the runtime composes) ---- */

int codec_put_table(codec_buf *b, unsigned narr, unsigned nhash)
{
    if (buf_reserve(b, 21) != 0)
        return -1;
    b->data[b->len++] = (char)T_TABLE;
    put_varint(b, narr);
    put_varint(b, nhash);
    return 0;
}

int codec_put_string(codec_buf *b, const char *s, size_t n)
{
    if (n > CODEC_MAX_BYTES || buf_reserve(b, n + 11) != 0)
        return -1;
    if (n < 64) {
        b->data[b->len++] = (char)(0x40 + n);
    } else {
        b->data[b->len++] = (char)T_STR;
        put_varint(b, n);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

int codec_put_boolean(codec_buf *b, int v)
{
    if (buf_reserve(b, 1) != 0)
        return -1;
    b->data[b->len++] = (char)(v ? T_TRUE : T_FALSE);
    return 0;
}

int codec_put_number(codec_buf *b, double d)
{
    if (buf_reserve(b, 9) != 0)
        return -1;
    b->data[b->len++] = (char)T_DOUBLE;
    memcpy(b->data + b->len, &d, 8);
    b->len += 8;
    return 0;
}

int codec_has_refs(const char *data, size_t len)
{
    return len > 0 && (unsigned char)data[0] == T_REFS;
}

static int varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* -- Encoder --------------------------------------------------------------------------- */

/* The tables on the path from the root, to refuse cycles (a shared subtable that is not its
 * own ancestor is fine, and copied each time it is reached). Lives in the C frames. */
typedef struct visit {
    const void *table;
    const struct visit *up;
} visit;

/* Endpoints met while encoding one message (all roots of an argument list). */
typedef struct ends {
    int n, nrx;
    void *rx[MAX_RX]; /* rx objects, to refuse the same one twice */
} ends;

typedef struct enc {
    lua_State *L;
    ends *ends;
    codec_buf *b;
    size_t start;     /* b->len on entry: restored on failure, base of the size limit */
    const char *what; /* the failure, e.g. "cannot send a function" */
    int in_key;       /* the failure lies inside a table key */
    int truncated;    /* outer path segments were dropped */
    size_t pathpos;   /* the path is built right to left in path[pathpos..] */
    char path[PATH_MAX_LEN + 1];
} enc;

static int enc_fail(enc *e, const char *what)
{
    e->what = what;
    return -1;
}

static void path_prepend(enc *e, const char *seg, size_t n)
{
    if (e->truncated)
        return;
    if (n > e->pathpos) {
        e->truncated = 1;
        return;
    }
    e->pathpos -= n;
    memcpy(e->path + e->pathpos, seg, n);
}

static int is_identifier(const char *s, size_t n)
{
    static const char *const keywords[] = {
        "and",      "break",  "do",   "else", "elseif", "end",   "false", "for",
        "function", "goto",   "if",   "in",   "local",  "nil",   "not",   "or",
        "repeat",   "return", "then", "true", "until",  "while",
    };
    if (n == 0 || n > 60 || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9')))
            return 0;
    }
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
        if (strlen(keywords[i]) == n && memcmp(keywords[i], s, n) == 0)
            return 0;
    return 1;
}

/* Prepend the path segment for key k: .name, ["two words"], [3], [true], [5LL],
 * [<table key>]. Error path only. */
__attribute__((noinline)) static void path_key(enc *e, const ljx_val *k)
{
    char seg[96];
    int n = 0;
    switch (k->type) {
    case LUA_TSTRING:
        if (is_identifier(k->str, k->len)) {
            n = snprintf(seg, sizeof seg, ".%.*s", (int)k->len, k->str);
            break;
        }
        seg[n++] = '[';
        seg[n++] = '"';
        for (size_t i = 0; i < k->len; i++) {
            unsigned char c = (unsigned char)k->str[i];
            if (i == 40) {
                memcpy(seg + n, "...", 3);
                n += 3;
                break;
            }
            if (c == '"' || c == '\\') {
                seg[n++] = '\\';
                seg[n++] = (char)c;
            } else if (c < 0x20 || c == 0x7f) {
                n += snprintf(seg + n, 5, "\\%d", c);
            } else {
                seg[n++] = (char)c;
            }
        }
        seg[n++] = '"';
        seg[n++] = ']';
        break;
    case LUA_TNUMBER:
        if (k->num == floor(k->num) && fabs(k->num) < 9007199254740992.0)
            n = snprintf(seg, sizeof seg, "[%lld]", (long long)k->num);
        else
            n = snprintf(seg, sizeof seg, "[%.17g]", k->num);
        break;
    case LUA_TBOOLEAN:
        n = snprintf(seg, sizeof seg, "[%s]", k->num != 0 ? "true" : "false");
        break;
    case LJX_TINT64:
        n = snprintf(seg, sizeof seg, "[%lldLL]", (long long)k->bits);
        break;
    case LJX_TUINT64:
        n = snprintf(seg, sizeof seg, "[%lluULL]", (unsigned long long)k->bits);
        break;
    default:
        n = snprintf(seg, sizeof seg, "[<%s key>]",
                     k->type == LJX_TCDATA      ? "cdata"
                     : k->type == LUA_TTABLE    ? "table"
                     : k->type == LUA_TFUNCTION ? "function"
                     : k->type == LUA_TTHREAD   ? "coroutine"
                                                : "userdata");
        break;
    }
    path_prepend(e, seg, (size_t)n);
}

__attribute__((noinline)) static void path_index(enc *e, size_t i)
{
    char seg[32];
    int n = snprintf(seg, sizeof seg, "[%zu]", i);
    path_prepend(e, seg, (size_t)n);
}

/* An integer-valued double in int32 range (not -0.0) gets a compact form. */
static inline void put_number(codec_buf *b, double d)
{
    if (d >= -2147483648.0 && d <= 2147483647.0) {
        int32_t i = (int32_t)d;
        if ((double)i == d && (i != 0 || !signbit(d))) {
            if (i >= 0 && i <= FIXINT_MAX) {
                b->data[b->len++] = (char)(T_FIXINT + i);
            } else if (i >= INT8_MIN && i <= INT8_MAX) {
                b->data[b->len++] = T_I8;
                b->data[b->len++] = (char)(int8_t)i;
            } else if (i >= INT16_MIN && i <= INT16_MAX) {
                int16_t s = (int16_t)i;
                b->data[b->len++] = T_I16;
                memcpy(b->data + b->len, &s, 2);
                b->len += 2;
            } else {
                b->data[b->len++] = T_I32;
                memcpy(b->data + b->len, &i, 4);
                b->len += 4;
            }
            return;
        }
    }
    b->data[b->len++] = T_DOUBLE;
    memcpy(b->data + b->len, &d, 8);
    b->len += 8;
}

static int enc_string(enc *e, const char *s, size_t n)
{
    codec_buf *b = e->b;
    if (n > CODEC_MAX_BYTES || b->len - e->start > CODEC_MAX_BYTES - n)
        return enc_fail(e, "message too large");
    if (buf_reserve(b, n + 11))
        return enc_fail(e, "out of memory");
    if (n <= SSTR_MAX) {
        b->data[b->len++] = (char)(T_SSTR + n);
    } else {
        b->data[b->len++] = T_STR;
        put_varint(b, n);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static int enc_table(enc *e, const void *t, int depth, const visit *up);

static int enc_value(enc *e, const ljx_val *v, int depth, const visit *up)
{
    codec_buf *b = e->b;
    if (buf_reserve(b, 16))
        return enc_fail(e, "out of memory");
    switch (v->type) {
    case LUA_TNIL:
        b->data[b->len++] = T_NIL;
        return 0;
    case LUA_TBOOLEAN:
        b->data[b->len++] = v->num != 0 ? T_TRUE : T_FALSE;
        return 0;
    case LUA_TNUMBER:
        put_number(b, v->num);
        return 0;
    case LUA_TSTRING:
        return enc_string(e, v->str, v->len);
    case LUA_TTABLE:
        return enc_table(e, v->table, depth, up);
    case LJX_TINT64:
    case LJX_TUINT64:
        b->data[b->len++] = v->type == LJX_TUINT64 ? T_UINT64 : T_INT64;
        memcpy(b->data + b->len, &v->bits, 8);
        b->len += 8;
        return 0;
    case LUA_TFUNCTION:
        return enc_fail(e, "cannot send a function");
    case LUA_TTHREAD:
        return enc_fail(e, "cannot send a coroutine");
    case LUA_TUSERDATA: {
        chan *c = NULL;
        int kind = v->ud ? chan_lua_endpoint(v->ud, v->len, &c) : 0;
        if (!kind)
            return enc_fail(e, "cannot send a userdata");
        void *p = c;
        if (kind == CHAN_RX) {
            ends *en = e->ends;
            if (!c)
                return enc_fail(e, "cannot send a channel rx that was sent to another actor");
            for (int i = 0; i < en->nrx; i++)
                if (en->rx[i] == v->ud)
                    return enc_fail(e, "cannot send the same channel rx twice");
            if (en->nrx == MAX_RX)
                return enc_fail(e, "cannot send more than 16 channel rx in one message");
            en->rx[en->nrx++] = v->ud;
            p = v->ud; /* the object: the commit moves its reference into the message */
        }
        b->data[b->len++] = kind == CHAN_TX ? T_TX : T_RX;
        memcpy(b->data + b->len, &p, 8);
        b->len += 8;
        e->ends->n++;
        return 0;
    }
    case LUA_TLIGHTUSERDATA:
        return enc_fail(e, "cannot send a light userdata");
    case LJX_TCDATA:
        return enc_fail(e, "cannot send a cdata other than int64_t/uint64_t");
    default:
        return enc_fail(e, "cannot send a missing value (bad stack index)");
    }
}

/* Tables are read raw through ljx (no metamethods, no Lua stack): nothing runs or allocates
 * in the sender's state meanwhile, so the pointers in ljx_val stay valid. */
static int enc_table(enc *e, const void *t, int depth, const visit *up)
{
    codec_buf *b = e->b;
    for (const visit *v = up; v != NULL; v = v->up)
        if (v->table == t)
            return enc_fail(e, "cannot send a cyclic table");
    if (depth >= CODEC_MAX_DEPTH)
        return enc_fail(e, "message nested too deeply");
    /* Bounds the time a DAG of shared subtables can take, not only the memory. */
    if (b->len - e->start > CODEC_MAX_BYTES)
        return enc_fail(e, "message too large");
    visit self = {t, up};
    ljx_val k, v;

    /* Keys 1..#t (raw length) go in the array section, holes as nil. */
    size_t narr = ljx_table_len(t);
    b->data[b->len++] = T_TABLE; /* enc_value reserved 16 bytes */
    put_varint(b, narr);
    size_t hpos = b->len++; /* H is patched in here */
    for (size_t i = 1; i <= narr; i++) {
        ljx_table_geti(t, i, &v);
        if (enc_value(e, &v, depth + 1, &self)) {
            path_index(e, i);
            return -1;
        }
    }

    uint64_t nhash = 0;
    size_t pos = 0;
    while (ljx_table_next(t, &pos, &k, &v)) {
        if (k.type == LUA_TNUMBER && k.num >= 1 && k.num <= (double)narr &&
            k.num == (double)(size_t)k.num)
            continue;
        int r = enc_value(e, &k, depth + 1, &self);
        if (r)
            e->in_key = 1; /* the innermost key failure sets it; outer ones repeat it */
        else
            r = enc_value(e, &v, depth + 1, &self);
        if (r) {
            path_key(e, &k);
            return -1;
        }
        nhash++;
    }

    if (nhash < 0x80) {
        b->data[hpos] = (char)nhash;
    } else {
        int extra = varint_len(nhash) - 1;
        if (buf_reserve(b, (size_t)extra))
            return enc_fail(e, "out of memory");
        memmove(b->data + hpos + 1 + extra, b->data + hpos + 1, b->len - hpos - 1);
        size_t end = b->len + (size_t)extra;
        b->len = hpos;
        put_varint(b, nhash);
        b->len = end;
    }
    return 0;
}

static int abs_index(lua_State *L, int idx)
{
    return idx < 0 && idx > LUA_REGISTRYINDEX ? lua_gettop(L) + idx + 1 : idx;
}

static int enc_root(enc *e, int idx, const char *root, char *err, size_t errlen)
{
    ljx_val v;
    ljx_read(e->L, idx, &v);
    if (enc_value(e, &v, 0, NULL) == 0)
        return 0;
    e->b->len = e->start;
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s (%sat %s%s%s)", e->what, e->in_key ? "in a table key, " : "",
                 root, e->truncated ? "..." : "", e->path + e->pathpos);
    return -1;
}

static void enc_init(enc *e, lua_State *L, codec_buf *out, ends *en)
{
    e->L = L;
    e->ends = en;
    e->b = out;
    e->start = out->len;
    e->what = NULL;
    e->in_key = e->truncated = 0;
    e->pathpos = PATH_MAX_LEN;
    e->path[PATH_MAX_LEN] = '\0';
}

/* -- References carried by endpoints ----------------------------------------------------- */

enum { WALK_COMMIT, WALK_RELEASE };

/* Steps over one value of trusted bytes, committing or releasing its endpoints. */
static unsigned char *walk_value(unsigned char *p, int mode)
{
    unsigned tag = *p++;
    if (tag >= T_FIXINT)
        return p;
    if (tag >= T_SSTR)
        return p + (tag - T_SSTR);
    uint64_t n, h;
    switch (tag) {
    case T_DOUBLE:
    case T_INT64:
    case T_UINT64:
        return p + 8;
    case T_I8:
        return p + 1;
    case T_I16:
        return p + 2;
    case T_I32:
        return p + 4;
    case T_STR:
        for (n = 0, h = 0;; h += 7) {
            n |= (uint64_t)(*p & 0x7f) << h;
            if (!(*p++ & 0x80))
                break;
        }
        return p + n;
    case T_TABLE:
        for (n = 0, h = 0;; h += 7) {
            n |= (uint64_t)(*p & 0x7f) << h;
            if (!(*p++ & 0x80))
                break;
        }
        {
            uint64_t a = n;
            for (n = 0, h = 0;; h += 7) {
                n |= (uint64_t)(*p & 0x7f) << h;
                if (!(*p++ & 0x80))
                    break;
            }
            for (uint64_t i = 0; i < a + 2 * n; i++)
                p = walk_value(p, mode);
        }
        return p;
    case T_TX:
    case T_RX: {
        void *ptr;
        memcpy(&ptr, p, 8);
        if (mode == WALK_RELEASE) {
            chan_release(ptr, tag == T_TX ? CHAN_TX : CHAN_RX);
        } else if (tag == T_TX) {
            chan_retain(ptr, CHAN_TX);
        } else {
            chan *c = chan_lua_take_rx(ptr); /* the object's reference moves here */
            memcpy(p, &c, 8);
        }
        return p + 8;
    }
    default: /* nil, false, true */
        return p;
    }
}

static unsigned char *skip_varint(unsigned char *p)
{
    while (*p++ & 0x80)
        ;
    return p;
}

/* After a successful encoding with endpoints: take their references, then put the refs
 * prefix in front of out[at..]; the values start at `values`, up to out->len. 0 or -1 (OOM:
 * nothing taken). */
static int refs_commit(codec_buf *out, size_t at, size_t values, int tag)
{
    if (buf_reserve(out, REFS_LEN))
        return -1;
    unsigned char *p = (unsigned char *)out->data + values, *end;
    end = (unsigned char *)out->data + out->len;
    while (p < end)
        p = walk_value(p, WALK_COMMIT);
    memmove(out->data + at + REFS_LEN, out->data + at, out->len - at);
    out->data[at] = (char)tag;
    uint64_t ck = refs_cookie();
    memcpy(out->data + at + 1, &ck, 8);
    out->len += REFS_LEN;
    return 0;
}

/* Whether data starts with a live refs prefix of the given kind. */
static int has_refs(const char *data, size_t len, int tag)
{
    uint64_t ck;
    if (len < REFS_LEN || (unsigned char)data[0] != tag)
        return 0;
    memcpy(&ck, data + 1, 8);
    return ck == refs_cookie();
}

void codec_release(char *data, size_t len)
{
    int args = has_refs(data, len, T_REFS_ARGS);
    if (!args && !has_refs(data, len, T_REFS))
        return;
    data[0] = (char)T_REFS_TAKEN;
    unsigned char *p = (unsigned char *)data + REFS_LEN, *end = (unsigned char *)data + len;
    if (args)
        p = skip_varint(p);
    while (p < end)
        p = walk_value(p, WALK_RELEASE);
}

int codec_encode(lua_State *L, int idx, codec_buf *out, const char *root, char *err, size_t errlen)
{
    enc e;
    ends en = {0, 0, {0}};
    size_t at = out->len;
    enc_init(&e, L, out, &en);
    if (enc_root(&e, abs_index(L, idx), root ? root : "value", err, errlen))
        return -1;
    if (en.n && refs_commit(out, at, at, T_REFS)) {
        out->len = at;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int codec_encode_args(lua_State *L, int first, int n, codec_buf *out, char *err, size_t errlen)
{
    first = abs_index(L, first);
    size_t start = out->len;
    if (n < 0 || buf_reserve(out, 10)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, n < 0 ? "negative argument count" : "out of memory");
        return -1;
    }
    put_varint(out, (uint64_t)n);
    size_t values = out->len;
    ends en = {0, 0, {0}};
    for (int i = 0; i < n; i++) {
        enc e;
        char root[24];
        enc_init(&e, L, out, &en);
        e.start = start; /* the limit and the rollback cover the whole list */
        snprintf(root, sizeof root, "arg %d", i + 1);
        if (enc_root(&e, first + i, root, err, errlen))
            return -1;
    }
    if (en.n && refs_commit(out, start, values, T_REFS_ARGS)) {
        out->len = start;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* -- Decoder --------------------------------------------------------------------------- */

typedef struct dec {
    lua_State *L;
    const unsigned char *start, *p, *end;
    size_t pending; /* bytes the open tables still need for elements not yet started */
    int trusted;    /* the bytes had a refs prefix: endpoint tags are honoured */
    char *err;
    size_t errlen;
} dec;

static int dec_fail(dec *d, const char *fmt, ...)
{
    if (d->err != NULL && d->errlen > 0) {
        int n = snprintf(d->err, d->errlen, "malformed message: ");
        if (n >= 0 && (size_t)n < d->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(d->err + n, d->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static size_t dec_left(const dec *d) { return (size_t)(d->end - d->p); }

static int get_varint(dec *d, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (d->p >= d->end)
            return dec_fail(d, "truncated (at byte %zu)", (size_t)(d->p - d->start));
        unsigned c = *d->p++;
        if (shift == 63 && c > 1)
            break;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (c < 0x80) {
            *v = x;
            return 0;
        }
    }
    return dec_fail(d, "bad length (at byte %zu)", (size_t)(d->p - d->start));
}

/* Read n payload bytes; NULL (after dec_fail) if fewer are left. */
static const unsigned char *get_bytes(dec *d, size_t n)
{
    if (dec_left(d) < n) {
        dec_fail(d, "truncated (at byte %zu)", (size_t)(d->p - d->start));
        return NULL;
    }
    const unsigned char *q = d->p;
    d->p += n;
    return q;
}

static int dec_table(dec *d, int depth);

/* Push one value; on failure return -1 (what was pushed is cleaned up by the caller). */
static int dec_value(dec *d, int depth)
{
    lua_State *L = d->L;
    const unsigned char *q;
    if (d->p >= d->end)
        return dec_fail(d, "truncated (at byte %zu)", (size_t)(d->p - d->start));
    unsigned tag = *d->p++;
    if (tag >= T_FIXINT) {
        lua_pushnumber(L, (lua_Number)(tag - T_FIXINT));
        return 0;
    }
    if (tag >= T_SSTR) {
        size_t n = tag - T_SSTR;
        if ((q = get_bytes(d, n)) == NULL)
            return -1;
        lua_pushlstring(L, (const char *)q, n);
        return 0;
    }
    switch (tag) {
    case T_NIL:
        lua_pushnil(L);
        return 0;
    case T_FALSE:
    case T_TRUE:
        lua_pushboolean(L, tag == T_TRUE);
        return 0;
    case T_DOUBLE: {
        double x;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&x, q, 8);
        lua_pushnumber(L, x);
        return 0;
    }
    case T_I8:
        if ((q = get_bytes(d, 1)) == NULL)
            return -1;
        lua_pushnumber(L, (lua_Number)(int8_t)q[0]);
        return 0;
    case T_I16: {
        int16_t x;
        if ((q = get_bytes(d, 2)) == NULL)
            return -1;
        memcpy(&x, q, 2);
        lua_pushnumber(L, x);
        return 0;
    }
    case T_I32: {
        int32_t x;
        if ((q = get_bytes(d, 4)) == NULL)
            return -1;
        memcpy(&x, q, 4);
        lua_pushnumber(L, x);
        return 0;
    }
    case T_INT64:
    case T_UINT64: {
        uint64_t x;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&x, q, 8);
        ljx_push_int64(L, x, tag == T_UINT64);
        return 0;
    }
    case T_STR: {
        uint64_t n;
        if (get_varint(d, &n))
            return -1;
        if (n > dec_left(d))
            return dec_fail(d, "string longer than the message (at byte %zu)",
                            (size_t)(d->p - d->start));
        q = d->p;
        d->p += n;
        lua_pushlstring(L, (const char *)q, (size_t)n);
        return 0;
    }
    case T_TABLE:
        return dec_table(d, depth);
    case T_TX:
    case T_RX: {
        void *c;
        if (!d->trusted)
            break;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&c, q, 8);
        /* the message's reference moves to the new object */
        chan_lua_push(L, c, tag == T_TX ? CHAN_TX : CHAN_RX);
        return 0;
    }
    default:
        break;
    }
    return dec_fail(d, "bad tag 0x%02x (at byte %zu)", tag, (size_t)(d->p - d->start - 1));
}

static int dec_table(dec *d, int depth)
{
    lua_State *L = d->L;
    size_t at = (size_t)(d->p - d->start - 1);
    uint64_t narr, nhash;
    if (depth >= CODEC_MAX_DEPTH)
        return dec_fail(d, "nested deeper than %d tables (at byte %zu)", CODEC_MAX_DEPTH, at);
    if (get_varint(d, &narr) || get_varint(d, &nhash))
        return -1;
    /* Each array value takes >= 1 byte, each pair >= 2, and the enclosing tables still need
     * `pending` bytes: so preallocation stays below the message size. */
    size_t left = dec_left(d);
    /* pending may exceed what is left in a truncated message: no room then, not a wrap */
    size_t room = left > d->pending ? left - d->pending : 0;
    if (narr > room || nhash > (room - narr) / 2)
        return dec_fail(d, "table larger than the message (at byte %zu)", at);
    if (!lua_checkstack(L, 4))
        return dec_fail(d, "Lua stack exhausted (at byte %zu)", at);
    d->pending += (size_t)(narr + 2 * nhash);
    lua_createtable(L, (int)narr, (int)nhash);
    for (uint64_t i = 1; i <= narr; i++) {
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        lua_rawseti(L, -2, (int)i);
    }
    for (uint64_t i = 0; i < nhash; i++) {
        size_t kat = (size_t)(d->p - d->start);
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        int kt = lua_type(L, -1);
        if (kt == LUA_TNIL || (kt == LUA_TNUMBER && isnan(lua_tonumber(L, -1))))
            return dec_fail(d, "%s table key (at byte %zu)", kt == LUA_TNIL ? "nil" : "NaN", kat);
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        lua_rawset(L, -3);
    }
    return 0;
}

static void dec_init(dec *d, lua_State *L, const char *data, size_t len, char *err, size_t errlen)
{
    d->L = L;
    d->start = d->p = (const unsigned char *)data;
    d->end = d->start + len;
    d->pending = 0;
    d->err = err;
    d->errlen = errlen;
    d->trusted = 0;
}

/* Skips a refs prefix of the given kind, taking over the references (the prefix becomes
 * "taken", so a later codec_release of the same bytes leaves them alone). */
static void dec_refs(dec *d, const char *data, size_t len, int tag)
{
    if (!has_refs(data, len, tag))
        return;
    ((char *)data)[0] = (char)T_REFS_TAKEN;
    d->p += REFS_LEN;
    d->trusted = 1;
}

int codec_decode(lua_State *L, const char *data, size_t len, char *err, size_t errlen)
{
    dec d;
    int top = lua_gettop(L);
    dec_init(&d, L, data, len, err, errlen);
    dec_refs(&d, data, len, T_REFS);
    if (!lua_checkstack(L, 2)) {
        dec_fail(&d, "Lua stack exhausted");
        return -1;
    }
    if (dec_value(&d, 0) == 0) {
        if (d.p == d.end)
            return 0;
        dec_fail(&d, "%zu trailing bytes (at byte %zu)", dec_left(&d), (size_t)(d.p - d.start));
    }
    lua_settop(L, top);
    return -1;
}

int codec_decode_args(lua_State *L, const char *data, size_t len, int *n, char *err, size_t errlen)
{
    dec d;
    int top = lua_gettop(L);
    uint64_t count;
    *n = 0;
    dec_init(&d, L, data, len, err, errlen);
    dec_refs(&d, data, len, T_REFS_ARGS);
    if (get_varint(&d, &count))
        return -1;
    if (count > dec_left(&d))
        return dec_fail(&d, "more arguments than bytes");
    if (count > 100000 || !lua_checkstack(L, (int)count + 2))
        return dec_fail(&d, "too many arguments (%llu)", (unsigned long long)count);
    d.pending = (size_t)count;
    for (uint64_t i = 0; i < count; i++) {
        d.pending--;
        if (dec_value(&d, 0)) {
            lua_settop(L, top);
            return -1;
        }
    }
    if (d.p != d.end) {
        dec_fail(&d, "%zu trailing bytes (at byte %zu)", dec_left(&d), (size_t)(d.p - d.start));
        lua_settop(L, top);
        return -1;
    }
    *n = (int)count;
    return 0;
}
