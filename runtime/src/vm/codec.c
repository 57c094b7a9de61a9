/* codec: Lua values to the wire format (base/wire.h) in the sender's state, and back in the
 * receiver's (copy semantics, like Erlang's term copying). Tables are read raw through ljx;
 * counts in a table header are checked against the bytes left (each value needs at least one
 * byte), minus those the enclosing tables still need, so preallocation never exceeds the
 * message size. The encoder writes H in one reserved byte after iterating and moves the
 * table's bytes only if H >= 128. Channel endpoints and sockets are userdata of the library
 * above: the runtime installs how to recognise one and how to push a new one
 * (codec_set_endpoints). */
#include "vm/codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/intern.h"
#include "vm/flat.h"
#include "vm/ljx.h"

#define PATH_MAX_LEN 160 /* error paths longer than this keep the root and the innermost part */
#define MAX_RX 16        /* channel receivers and sockets one message may carry */

static const codec_endpoints *endpoints;

void codec_set_endpoints(const codec_endpoints *ep)
{
    __atomic_store_n(&endpoints, ep, __ATOMIC_RELEASE);
}

static const codec_endpoints *eps(void) { return __atomic_load_n(&endpoints, __ATOMIC_ACQUIRE); }

flat_endpoint_fn codec_endpoint(void)
{
    const codec_endpoints *ep = eps();
    return ep ? ep->endpoint : NULL;
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
    wire_buf *b;
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

/* b has room for 9 more bytes */
static inline void put_number(wire_buf *b, double d)
{
    b->len = (size_t)(wire_number_at(b->data + b->len, d) - b->data);
}

static int enc_string(enc *e, const char *s, size_t n)
{
    wire_buf *b = e->b;
    if (n > WIRE_MAX_BYTES || b->len - e->start > WIRE_MAX_BYTES - n)
        return enc_fail(e, "message too large");
    if (wire_buf_reserve(b, n + 11))
        return enc_fail(e, "out of memory");
    if (n <= WIRE_SSTR_MAX) {
        b->data[b->len++] = (char)(WIRE_SSTR + n);
    } else {
        b->data[b->len++] = WIRE_STR;
        wire_put_varint(b, n);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static int enc_table(enc *e, const void *t, int depth, const visit *up);

static int enc_value(enc *e, const ljx_val *v, int depth, const visit *up)
{
    wire_buf *b = e->b;
    if (wire_buf_reserve(b, 16))
        return enc_fail(e, "out of memory");
    switch (v->type) {
    case LUA_TNIL:
        b->data[b->len++] = WIRE_NIL;
        return 0;
    case LUA_TBOOLEAN:
        b->data[b->len++] = v->num != 0 ? WIRE_TRUE : WIRE_FALSE;
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
        b->data[b->len++] = v->type == LJX_TUINT64 ? WIRE_UINT64 : WIRE_INT64;
        memcpy(b->data + b->len, &v->bits, 8);
        b->len += 8;
        return 0;
    case LUA_TFUNCTION:
        return enc_fail(e, "cannot send a function");
    case LUA_TTHREAD:
        return enc_fail(e, "cannot send a coroutine");
    case LUA_TUSERDATA: {
        void *c = NULL;
        const codec_endpoints *ep = eps();
        int kind = v->ud && ep ? ep->endpoint(v->ud, v->len, &c) : 0;
        if (!kind)
            return enc_fail(e, "cannot send a userdata");
        if (!c) /* the object let go of what it held */
            return enc_fail(e, kind == WIRE_REF_SOCK ? "cannot send a socket that was closed or "
                                                       "sent to another actor"
                               : kind == WIRE_REF_RX
                                   ? "cannot send a channel rx that was "
                                     "released or sent to another actor"
                                   : "cannot send a channel tx that was released");
        void *p = c;
        if (kind == WIRE_REF_RX || kind == WIRE_REF_SOCK) {
            /* these move: one object, once, into one message */
            ends *en = e->ends;
            int sock = kind == WIRE_REF_SOCK;
            for (int i = 0; i < en->nrx; i++)
                if (en->rx[i] == v->ud)
                    return enc_fail(e, sock ? "cannot send the same socket twice"
                                            : "cannot send the same channel rx twice");
            if (en->nrx == MAX_RX)
                return enc_fail(e, "cannot send more than 16 channel rx and sockets in one "
                                   "message");
            en->rx[en->nrx++] = v->ud;
            p = v->ud; /* the object: the commit moves its reference into the message */
        }
        b->data[b->len++] = kind == WIRE_REF_TX   ? WIRE_TX
                            : kind == WIRE_REF_RX ? WIRE_RX
                                                  : WIRE_SOCK;
        memcpy(b->data + b->len, &p, 8);
        b->len += 8;
        e->ends->n++;
        return 0;
    }
    case LUA_TLIGHTUSERDATA: {
        /* atoms and remote pids are interned records: the pointer is the value */
        void *p = ljx_lightud(e->L, v->bits);
        if (!intern_lookup(p))
            return enc_fail(e, "cannot send a light userdata");
        b->data[b->len++] = WIRE_INTERN;
        memcpy(b->data + b->len, &p, 8);
        b->len += 8;
        return 0;
    }
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
    wire_buf *b = e->b;
    for (const visit *v = up; v != NULL; v = v->up)
        if (v->table == t)
            return enc_fail(e, "cannot send a cyclic table");
    if (depth >= WIRE_MAX_DEPTH)
        return enc_fail(e, "message nested too deeply");
    /* Bounds the time a DAG of shared subtables can take, not only the memory. */
    if (b->len - e->start > WIRE_MAX_BYTES)
        return enc_fail(e, "message too large");
    visit self = {t, up};
    ljx_val k, v;

    /* Keys 1..#t (raw length) go in the array section, holes as nil. */
    size_t narr = ljx_table_len(t);
    b->data[b->len++] = WIRE_TABLE; /* enc_value reserved 16 bytes */
    wire_put_varint(b, narr);
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
        int extra = wire_varint_len(nhash) - 1;
        if (wire_buf_reserve(b, (size_t)extra))
            return enc_fail(e, "out of memory");
        memmove(b->data + hpos + 1 + extra, b->data + hpos + 1, b->len - hpos - 1);
        size_t end = b->len + (size_t)extra;
        b->len = hpos;
        wire_put_varint(b, nhash);
        b->len = end;
    }
    return 0;
}

static int abs_index(lua_State *L, int idx)
{
    return idx < 0 && idx > LUA_REGISTRYINDEX ? lua_gettop(L) + idx + 1 : idx;
}

/* root names the value in an error ("arg <argno>" when argno > 0): it is formatted only
 * when there is an error, since a spawn encodes its arguments one root each. */
static int enc_root(enc *e, int idx, const char *root, int argno, char *err, size_t errlen)
{
    ljx_val v;
    ljx_read(e->L, idx, &v);
    if (enc_value(e, &v, 0, NULL) == 0)
        return 0;
    e->b->len = e->start;
    char arg[24];
    if (argno > 0) {
        snprintf(arg, sizeof arg, "arg %d", argno);
        root = arg;
    }
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s (%sat %s%s%s)", e->what, e->in_key ? "in a table key, " : "",
                 root, e->truncated ? "..." : "", e->path + e->pathpos);
    return -1;
}

static void enc_init(enc *e, lua_State *L, wire_buf *out, ends *en)
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

/* The value's encoding with the encoder's own walk (codec_encode without the fast path). */
static int encode_general(lua_State *L, int idx, wire_buf *out, const char *root, char *err,
                          size_t errlen)
{
    enc e;
    ends en = {0, 0, {0}};
    size_t at = out->len;
    enc_init(&e, L, out, &en);
    if (enc_root(&e, idx, root ? root : "value", 0, err, errlen))
        return -1;
    if (en.n && wire_refs_commit(out, at, at, WIRE_REFS)) {
        out->len = at;
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int codec_encode_general(lua_State *L, int idx, wire_buf *out, const char *root, char *err,
                         size_t errlen)
{
    return encode_general(L, abs_index(L, idx), out, root, err, errlen);
}

int codec_encode(lua_State *L, int idx, wire_buf *out, const char *root, char *err, size_t errlen)
{
    size_t at = out->len;
    idx = abs_index(L, idx);
    /* flat and nested tables with txs (vm/flat.h): the same bytes without the encoder's
     * set-up per value and its second walk for the references */
    if (idx > 0 && wire_buf_reserve(out, FLAT_DEEP_MAX) == 0) {
        flat_out r;
        size_t k = flat_encode_deep(L, idx, out->data + at, FLAT_DEEP_MAX, codec_endpoint(), &r);
        if (k > 0) {
            out->len += k;
            if (r.ntx && wire_refs_commit_txs(out, at, r.txs, r.ntx)) {
                out->len = at;
                if (err != NULL && errlen > 0)
                    snprintf(err, errlen, "out of memory");
                return -1;
            }
            return 0;
        }
    }
    return encode_general(L, idx, out, root, err, errlen);
}

int codec_encode_args(lua_State *L, int first, int n, wire_buf *out, char *err, size_t errlen)
{
    first = abs_index(L, first);
    size_t start = out->len;
    /* scalars only (most spawns' arguments: pids, numbers, short strings): the same bytes
     * (vm/flat.h) without the encoder's set-up per value (125 of a spawn's 336 instructions
     * here; a decoder of its own saved nothing over the codec's), into the room the buffer
     * has (a spawn's payload reserved some) */
    if (wire_buf_reserve(out, 16) == 0) {
        size_t k = flat_encode_args(L, first, n, out->data + out->len, out->cap - out->len);
        if (k > 0) {
            out->len += k;
            return 0;
        }
    }
    if (n < 0 || wire_buf_reserve(out, 10)) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, n < 0 ? "negative argument count" : "out of memory");
        return -1;
    }
    wire_put_varint(out, (uint64_t)n);
    size_t values = out->len;
    ends en = {0, 0, {0}};
    for (int i = 0; i < n; i++) {
        enc e;
        enc_init(&e, L, out, &en);
        e.start = start; /* the limit and the rollback cover the whole list */
        if (enc_root(&e, first + i, NULL, i + 1, err, errlen))
            return -1;
    }
    if (en.n && wire_refs_commit(out, start, values, WIRE_REFS_ARGS)) {
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
    if (tag >= WIRE_FIXINT) {
        lua_pushnumber(L, (lua_Number)(tag - WIRE_FIXINT));
        return 0;
    }
    if (tag >= WIRE_SSTR) {
        size_t n = tag - WIRE_SSTR;
        if ((q = get_bytes(d, n)) == NULL)
            return -1;
        ljx_push_short_string(L, (const char *)q, n);
        return 0;
    }
    switch (tag) {
    case WIRE_NIL:
        lua_pushnil(L);
        return 0;
    case WIRE_FALSE:
    case WIRE_TRUE:
        lua_pushboolean(L, tag == WIRE_TRUE);
        return 0;
    case WIRE_DOUBLE:
    case WIRE_I8:
    case WIRE_I16:
    case WIRE_I32: {
        double x;
        if ((q = get_bytes(d, wire_number_len(tag))) == NULL)
            return -1;
        wire_number_get(tag, q, &x);
        lua_pushnumber(L, x);
        return 0;
    }
    case WIRE_INT64:
    case WIRE_UINT64: {
        uint64_t x;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&x, q, 8);
        ljx_push_int64(L, x, tag == WIRE_UINT64);
        return 0;
    }
    case WIRE_STR: {
        uint64_t n = 0; /* set by get_varint (GCC at -O3 cannot tell) */
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
    case WIRE_TABLE:
        return dec_table(d, depth);
    case WIRE_INTERN: {
        void *p;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&p, q, 8);
        if (!intern_lookup(p))
            return dec_fail(d, "not an atom or a pid (at byte %zu)", (size_t)(d->p - d->start - 9));
        lua_pushlightuserdata(L, p);
        return 0;
    }
    case WIRE_TX:
    case WIRE_RX:
    case WIRE_SOCK: {
        void *c;
        if (!d->trusted)
            break;
        if ((q = get_bytes(d, 8)) == NULL)
            return -1;
        memcpy(&c, q, 8);
        /* the message's reference moves to the new object */
        eps()->push(L, c,
                    tag == WIRE_TX   ? WIRE_REF_TX
                    : tag == WIRE_RX ? WIRE_REF_RX
                                     : WIRE_REF_SOCK);
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
    uint64_t narr = 0, nhash = 0; /* set by get_varint (GCC at -O3 cannot tell) */
    if (depth >= WIRE_MAX_DEPTH)
        return dec_fail(d, "nested deeper than %d tables (at byte %zu)", WIRE_MAX_DEPTH, at);
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
    /* the table stays at the top between its elements: each is pushed and set at once */
    void *t = ljx_new_table(L, (uint32_t)narr, (uint32_t)nhash);
    for (uint64_t i = 1; i <= narr; i++) {
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        ljx_set_index(L, t, (uint32_t)i);
    }
    for (uint64_t i = 0; i < nhash; i++) {
        size_t kat = (size_t)(d->p - d->start);
        /* only these tags make a nil or a NaN */
        unsigned ktag = d->p < d->end ? *d->p : 0;
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        if (ktag == WIRE_NIL || (ktag == WIRE_DOUBLE && isnan(lua_tonumber(L, -1))))
            return dec_fail(d, "%s table key (at byte %zu)", ktag == WIRE_NIL ? "nil" : "NaN", kat);
        d->pending--;
        if (dec_value(d, depth + 1))
            return -1;
        ljx_set_pair(L, t);
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
 * "taken", so a later wire_release of the same bytes leaves them alone). */
static void dec_refs(dec *d, const char *data, size_t len, int tag)
{
    if (!wire_refs_live(data, len, tag))
        return;
    wire_refs_taken((char *)data);
    d->p += WIRE_REFS_LEN;
    d->trusted = 1;
}

/* How decode takes the bytes: the codec's walk alone; the nested fast path first, after its
 * check; or the fast path without the check (bytes a send's pass wrote: MSG_DEEP). */
enum { DEC_GENERAL, DEC_CHECKED, DEC_MARKED };

static int decode(lua_State *L, const char *data, size_t len, char *err, size_t errlen, int how)
{
    dec d;
    int top = lua_gettop(L);
    dec_init(&d, L, data, len, err, errlen);
    dec_refs(&d, data, len, WIRE_REFS);
    if (!lua_checkstack(L, 2)) {
        dec_fail(&d, "Lua stack exhausted");
        return -1;
    }
    const codec_endpoints *ep = eps();
    int txs = d.trusted && ep != NULL; /* a tx is made by the endpoints' push */
    size_t left = dec_left(&d);
    /* marked bytes are a table with a live refs prefix (now taken) or with none at all; a
     * prefix taken before leaves them to the checked decode, which refuses their tx tags */
    int marked = how == DEC_MARKED && left > 0 && *d.p == WIRE_TABLE && (txs || d.p == d.start);
    if (marked || (how == DEC_CHECKED && flat_deep_decodable(L, (const char *)d.p, left, txs))) {
        flat_decode_deep(L, (const char *)d.p, left, txs ? ep->push : NULL);
        return 0;
    }
    if (dec_value(&d, 0) == 0) {
        if (d.p == d.end)
            return 0;
        dec_fail(&d, "%zu trailing bytes (at byte %zu)", dec_left(&d), (size_t)(d.p - d.start));
    }
    lua_settop(L, top);
    return -1;
}

int codec_decode(lua_State *L, const char *data, size_t len, char *err, size_t errlen)
{
    return decode(L, data, len, err, errlen, DEC_CHECKED);
}

int codec_decode_general(lua_State *L, const char *data, size_t len, char *err, size_t errlen)
{
    return decode(L, data, len, err, errlen, DEC_GENERAL);
}

int codec_decode_marked(lua_State *L, const char *data, size_t len, char *err, size_t errlen)
{
    return decode(L, data, len, err, errlen, DEC_MARKED);
}

int codec_decode_args(lua_State *L, const char *data, size_t len, int *n, char *err, size_t errlen)
{
    dec d;
    int top = lua_gettop(L);
    uint64_t count = 0; /* set by get_varint (GCC at -O3 cannot tell) */
    *n = 0;
    dec_init(&d, L, data, len, err, errlen);
    dec_refs(&d, data, len, WIRE_REFS_ARGS);
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
