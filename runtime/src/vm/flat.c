/* flat: small messages without the codec's machinery (see flat.h). The general codec reads a
 * table through ljx_val copies of every key and value and writes into a growable buffer, and
 * its decoder goes through the Lua API with the GC held: for {hop = k} that was about 1,100
 * of a ring hop's 4,100 instructions. Here one pass over the table's own slots writes into a
 * buffer on the C stack, and the decoder checks the bytes in a pass that allocates nothing,
 * then builds the value with the constructors the VM itself uses. */
#include "vm/flat.h"

#include <stdint.h>
#include <string.h>

#include <lua.h>

#include "base/bytes.h"
#include "base/wire.h"
#include "core/actor.h" /* the receiver's flat_key */
#include "vm/ljx.h"

#include "lj_obj.h"
#include "lj_state.h" /* incr_top, lj_state_checkstack */
#include "lj_tab.h"
#include "lj_str.h"
#include "lj_ctype.h" /* ctype_ctsG: whether the FFI is loaded; CTID_INT64/UINT64 */
#include "lj_cdata.h"
#include "lj_gc.h" /* lj_gc_anybarriert */

/* -- Encoder ---------------------------------------------------------------------------- */

/* The string s into [p, end): the byte after it, or NULL (no room). */
static inline char *enc_str(const GCstr *s, char *p, char *end)
{
    size_t n = s->len;
    if (n <= WIRE_SSTR_MAX) {
        if ((size_t)(end - p) < n + 1)
            return NULL;
        *p++ = (char)(WIRE_SSTR + n);
    } else {
        /* FLAT_MAX bounds n: its length takes two varint bytes at most */
        if (n >= 0x4000 || (size_t)(end - p) < n + 3)
            return NULL;
        *p++ = WIRE_STR;
        if (n >= 0x80)
            *p++ = (char)(n | 0x80);
        *p++ = (char)(n >> (n >= 0x80 ? 7 : 0));
    }
    bytes_copy_short(p, strdata(s), n);
    return p + n;
}

/* enc_scalar's other cases (a boolean, nil, an integer slot, an int64/uint64 cdata), with
 * room for 9 bytes at p: the byte after it, or NULL (not a scalar). */
static char *enc_scalar_rest(cTValue *o, char *p, int *cdata)
{
    if (tvisbool(o)) {
        *p++ = tvistrue(o) ? WIRE_TRUE : WIRE_FALSE;
        return p;
    }
    if (tvisnil(o)) {
        *p++ = WIRE_NIL;
        return p;
    }
    if (tvisint(o))
        return wire_number_at(p, (double)intV(o));
    if (tviscdata(o)) {
        /* exactly int64_t or uint64_t: typedefs of them take the codec's general check */
        const GCcdata *cd = cdataV(o);
        if (cd->ctypeid == CTID_INT64 || cd->ctypeid == CTID_UINT64) {
            *cdata = 1;
            *p++ = cd->ctypeid == CTID_INT64 ? WIRE_INT64 : WIRE_UINT64;
            memcpy(p, cdataptr(cd), 8);
            return p + 8;
        }
    }
    return NULL;
}

/* The scalar o into [p, end): the byte after it, or NULL (not a scalar, or no room). *cdata
 * is set when it is an int64/uint64 cdata. A number or a string, most values, inline; the
 * other kinds out of line. */
static inline char *enc_scalar(cTValue *o, char *p, char *end, int *cdata)
{
    if (end - p < 9)
        return NULL;
    if (tvisnum(o))
        return wire_number_at(p, numV(o));
    if (tvisstr(o))
        return enc_str(strV(o), p, end);
    return enc_scalar_rest(o, p, cdata);
}

/* What the codec writes for t: the sequence 1..n (n its only border, as lj_tab_len finds it
 * when the array part holds exactly 1..n and no key is a number elsewhere), then the
 * string-keyed pairs. */
/* The n of t's sequence 1..n when its array part holds exactly that (nothing at 0, no hole)
 * and n fits a one-byte count; -1 otherwise (or when t is too large to fit, though it may
 * be a sparse one: the codec's). */
static int32_t seq_len(const GCtab *t)
{
    if (t->asize > FLAT_MAX + 1 || t->hmask >= FLAT_MAX)
        return -1;
    cTValue *arr = tvref(t->array);
    uint32_t n = 0;
    if (t->asize > 0) {
        if (!tvisnil(&arr[0])) /* key 0 */
            return -1;
        while (n + 1 < t->asize && !tvisnil(&arr[n + 1]))
            n++;
        for (uint32_t i = n + 1; i < t->asize; i++)
            if (!tvisnil(&arr[i]))
                return -1;
    }
    return n > 0x7f ? -1 : (int32_t)n;
}

static size_t enc_table(const GCtab *t, char *out, char *end, int *cdata)
{
    int32_t sn = seq_len(t);
    if (sn < 0 || end - out < 3)
        return 0;
    uint32_t n = (uint32_t)sn;
    cTValue *arr = tvref(t->array);
    char *p = out;
    p[0] = WIRE_TABLE;
    p[1] = (char)n;
    p += 3; /* the pair count, a byte, goes in p[2] */
    for (uint32_t i = 1; i <= n; i++)
        if ((p = enc_scalar(&arr[i], p, end, cdata)) == NULL)
            return 0;
    const Node *node = noderef(t->node);
    /* a nested table or an endpoint sends the message to the nested pass, which starts over:
     * found first, it wastes nothing (found in the loop below, it wasted the pairs before it,
     * which hash order puts anywhere: a gen_server call's request encoded from 250 to 510
     * instructions from run to run, strings' hashes being seeded per state) */
    for (uint32_t j = 0; j <= t->hmask; j++)
        if (tvistab(&node[j].val) || tvisudata(&node[j].val))
            return 0;
    uint32_t pairs = 0;
    for (uint32_t j = 0; j <= t->hmask; j++) {
        const Node *nd = &node[j];
        if (tvisnil(&nd->val))
            continue;
        if (!tvisstr(&nd->key) || (p = enc_str(strV(&nd->key), p, end)) == NULL)
            return 0;
        if ((p = enc_scalar(&nd->val, p, end, cdata)) == NULL)
            return 0;
        pairs++;
    }
    if (pairs > 0x7f)
        return 0;
    out[2] = (char)pairs;
    return (size_t)(p - out);
}

size_t flat_encode_args(lua_State *L, int first, int n, char *out, size_t cap)
{
    cTValue *o = L->base + (first - 1);
    if (first <= 0 || n < 0 || n > 0x7f || o + n > L->top || cap < 1)
        return 0;
    char *p = out, *end = out + cap;
    *p++ = (char)n; /* the count, a one-byte varint */
    int cdata = 0;
    for (int i = 0; i < n; i++)
        if ((p = enc_scalar(&o[i], p, end, &cdata)) == NULL || cdata)
            return 0;
    return (size_t)(p - out);
}

size_t flat_encode(lua_State *L, int idx, char *out, size_t cap, int *cdata)
{
    cTValue *o = L->base + (idx - 1);
    int cd = 0;
    if (!cdata)
        cdata = &cd;
    *cdata = 0;
    if (idx <= 0 || o >= L->top)
        return 0;
    if (cap > FLAT_MAX)
        cap = FLAT_MAX;
    if (tvistab(o))
        return enc_table(tabV(o), out, out + cap, cdata);
    char *p = enc_scalar(o, out, out + cap, cdata);
    return p ? (size_t)(p - out) : 0;
}

/* -- Decoder ---------------------------------------------------------------------------- */

/* A string's length after WIRE_STR, in one or two varint bytes (checked by scalar_end). */
static inline size_t str_len(const unsigned char *p)
{
    return p[0] < 0x80 ? p[0] : (size_t)(p[0] & 0x7f) | (size_t)p[1] << 7;
}

/* The end of the scalar at p (p < e), or NULL if it is not one flat_decode makes (or is cut
 * short); a string only if strings_only. *cdata is set for an int64/uint64. */
static const unsigned char *scalar_end(const unsigned char *p, const unsigned char *e,
                                       int strings_only, int *cdata)
{
    unsigned tag = *p++;
    size_t left = (size_t)(e - p), n;
    if (tag >= WIRE_FIXINT)
        return strings_only ? NULL : p;
    if (tag >= WIRE_SSTR) {
        n = tag - WIRE_SSTR;
        return n <= left ? p + n : NULL;
    }
    if (tag == WIRE_STR) {
        /* a length in one or two varint bytes (FLAT_MAX bounds it) */
        size_t nb = left > 0 && p[0] < 0x80 ? 1 : left > 1 && p[1] < 0x80 ? 2 : 0;
        if (nb == 0)
            return NULL;
        n = str_len(p);
        p += nb;
        return n <= left - nb ? p + n : NULL;
    }
    if (strings_only)
        return NULL;
    switch (tag) {
    case WIRE_NIL:
    case WIRE_FALSE:
    case WIRE_TRUE:
        n = 0;
        break;
    case WIRE_I8:
    case WIRE_I16:
    case WIRE_I32:
    case WIRE_DOUBLE:
        n = wire_number_len(tag);
        break;
    case WIRE_INT64:
    case WIRE_UINT64:
        *cdata = 1;
        n = 8;
        break;
    default:
        return NULL;
    }
    return n <= left ? p + n : NULL;
}

int flat_decodable(lua_State *L, const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data, *e = p + len;
    int cdata = 0;
    if (len == 0 || len > FLAT_MAX)
        return 0;
    if (*p != WIRE_TABLE) {
        p = scalar_end(p, e, 0, &cdata);
    } else {
        if (len < 3 || p[1] >= 0x80 || p[2] >= 0x80)
            return 0;
        unsigned narr = p[1], npairs = p[2];
        p += 3;
        for (unsigned i = 0; i < narr && p; i++)
            p = p < e ? scalar_end(p, e, 0, &cdata) : NULL;
        for (unsigned i = 0; i < npairs && p; i++) {
            p = p < e ? scalar_end(p, e, 1, &cdata) : NULL;
            /* a nil value makes a key the codec would keep: its way */
            p = p && p < e && *p != WIRE_NIL ? scalar_end(p, e, 0, &cdata) : NULL;
        }
    }
    /* an int64 needs the FFI's C types: loading them runs Lua code, which the codec does */
    return p == e && (!cdata || ctype_ctsG(G(L)) != NULL);
}

/* Writes the scalar at *pp (checked by flat_decodable) into o, advancing *pp. */
static void dec_scalar(lua_State *L, TValue *o, const unsigned char **pp)
{
    const unsigned char *p = *pp;
    unsigned tag = *p++;
    size_t n;
    if (tag >= WIRE_FIXINT) {
        setnumV(o, (lua_Number)(tag - WIRE_FIXINT));
    } else if (tag >= WIRE_SSTR || tag == WIRE_STR) {
        if (tag == WIRE_STR) {
            n = str_len(p);
            p += p[0] < 0x80 ? 1 : 2;
        } else {
            n = tag - WIRE_SSTR;
        }
        setstrV(L, o, lj_str_new(L, (const char *)p, n));
        p += n;
    } else {
        double x;
        switch (tag) {
        case WIRE_NIL:
            setnilV(o);
            break;
        case WIRE_FALSE:
        case WIRE_TRUE:
            setboolV(o, tag == WIRE_TRUE);
            break;
        case WIRE_INT64:
        case WIRE_UINT64: {
            GCcdata *cd =
                lj_cdata_new(ctype_cts(L), tag == WIRE_UINT64 ? CTID_UINT64 : CTID_INT64, 8);
            memcpy(cdataptr(cd), p, 8);
            setcdataV(L, o, cd);
            p += 8;
            break;
        }
        /* a sized number, each case with its tag constant so that wire_number_get's own
         * switch folds away (one merged case costs a second dispatch per number) */
        case WIRE_I8:
            p += wire_number_get(WIRE_I8, p, &x);
            setnumV(o, x);
            break;
        case WIRE_I16:
            p += wire_number_get(WIRE_I16, p, &x);
            setnumV(o, x);
            break;
        case WIRE_I32:
            p += wire_number_get(WIRE_I32, p, &x);
            setnumV(o, x);
            break;
        default: /* WIRE_DOUBLE */
            p += wire_number_get(WIRE_DOUBLE, p, &x);
            /* a NaN's payload from the bytes could read as another type's tag: the one NaN
             * LuaJIT makes (lua_pushnumber, which the codec uses, does the same) */
            if (x != x)
                setnanV(o);
            else
                setnumV(o, x);
            break;
        }
    }
    *pp = p;
}

/* dec_scalar for a value (a key takes dec_scalar or dec_key): most often an integer (a
 * counter, an id, a sequence number), read inline; the rest through dec_scalar. */
static inline void dec_value(lua_State *L, TValue *o, const unsigned char **pp)
{
    const unsigned char *p = *pp;
    unsigned tag = p[0];
    if (tag >= WIRE_FIXINT) {
        setnumV(o, (lua_Number)(tag - WIRE_FIXINT));
        *pp = p + 1;
    } else if (tag == WIRE_I32) { /* a constant tag: wire_number_get's switch folds away */
        double x;
        *pp = p + 1 + wire_number_get(WIRE_I32, p + 1, &x);
        setnumV(o, x);
    } else if (tag == WIRE_I16) {
        double x;
        *pp = p + 1 + wire_number_get(WIRE_I16, p + 1, &x);
        setnumV(o, x);
    } else {
        dec_scalar(L, o, pp);
    }
}

/* -- Templates ---------------------------------------------------------------------------
 * A receiver sees the same few shapes over and over ({hop = k}, {n = i}, a protocol's
 * request). Making such a table key by key costs a new table, a string interning per key and
 * a hash insert per key (~380 instructions for one key); a copy of a private template that
 * already holds the keys (lj_tab_dup, what a table constructor in Lua code does) with the
 * values written straight into their nodes costs about half. A state keeps TPL_SLOTS
 * templates, direct-mapped by a hash of the shape: the array count, the pair count and the
 * keys' bytes. A shape becomes a template the second time in a row it lands in its slot, so
 * one-off shapes never pay for one.
 *
 * The templates hang off a GC root no Lua code can reach: the base metatable of upvalue
 * objects (no Lua value is one, so LuaJIT never looks it up: even jit.util, which hands out
 * prototypes, never hands out an upvalue object). The collector marks it like the
 * other roots, lua_close frees it, and a pooled state's reset, which clears every base
 * metatable, forgets the templates with everything else of the last actor. */

#define TPL_SLOTS 8
#define TPL_ENTRY 3  /* array slots per entry: the template, its signature, the shape seen last */
#define TPL_PAIRS 16 /* records of more pairs (or with an array part) are made key by key */
/* Fewer keys are made key by key too: a template is about five lines of the receiver's
 * memory (the roots, its entry, the signature, the template and its nodes) against two per
 * key (the string table's bucket and the key's string), and in a ring of a thousand actors
 * every receiver's memory is cold (cachegrind: 4 more misses per hop with one-key records
 * from templates, for 150 fewer instructions). */
#define TPL_MIN_PAIRS 2
#define SIG_MAX (2 + FLAT_MAX + TPL_PAIRS) /* counts, key bytes, a node index per key */

#define KEY_AT (TPL_SLOTS * TPL_ENTRY + 1) /* the roots' slot anchoring the receiver's key */
#define FLAT_SLOTS (KEY_AT + 1)

/* The templates and the kept key live in the state's roots (vm/ljx.h), in its first slots */
_Static_assert(FLAT_SLOTS <= LJX_ROOTS_FLAT, "the roots' flat slots hold the templates");

/* The bytes of the string key at p (checked by flat_decodable): its tag, length, data. */
static inline size_t key_bytes(const unsigned char *p)
{
    if (p[0] != WIRE_STR)
        return 1 + (size_t)(p[0] - WIRE_SSTR);
    return p[1] < 0x80 ? 2 + (size_t)p[1] : 3 + str_len(p + 1);
}

/* Records t (just made with the shape sig, its keys at keyat) as its slot's template if the
 * slot saw the same shape last; else notes the shape. */
static void learn(lua_State *L, GCtab *t, const unsigned char *const *keyat, unsigned npairs,
                  unsigned char *sig, size_t siglen, uint32_t hash)
{
    GCtab *h = ljx_roots_made(L);
    TValue *e = tvref(h->array) + 1 + (hash % TPL_SLOTS) * TPL_ENTRY;
    if (!tvisnum(&e[2]) || numV(&e[2]) != (lua_Number)hash) {
        setnumV(&e[2], (lua_Number)hash);
        return;
    }
    /* the template first, so it is anchored while its signature is made */
    GCtab *tpl = lj_tab_dup(L, t);
    settabV(L, &e[0], tpl);
    setnilV(&e[1]);
    lj_gc_anybarriert(L, h);
    Node *node = noderef(tpl->node);
    for (unsigned i = 0; i < npairs; i++) {
        TValue k;
        const unsigned char *p = keyat[i];
        dec_scalar(L, &k, &p); /* the key's string, interned already */
        cTValue *v = lj_tab_getstr(tpl, strV(&k));
        sig[siglen + i] = (unsigned char)((const Node *)v - node);
    }
    setstrV(L, &e[1], lj_str_new(L, (const char *)sig, siglen + npairs));
    lj_gc_anybarriert(L, h);
}

/* -- Key strings ---------------------------------------------------------------------------
 * A record made key by key interns each key: a hash of its bytes, then a probe of the state's
 * string table, whose bucket is a line of its own, cold in a woken actor of a large ring. So
 * the receiver keeps the string of the key of its one-key records (a->vm.flat_key), taken in
 * the second time in a row it was not the kept one (a stream of ever new keys never pays for
 * the anchoring), and compares it by length and bytes: the string's own line, which the
 * receiver's Lua code reads anyway to look the key up. The roots' slot KEY_AT anchors it,
 * so a kept string is never collected, hence never dead; a pooled state's reset forgets
 * both, and the next actor's record starts without one. */

/* Writes the string key at *pp (checked by flat_decodable) into o, advancing *pp. */
static void dec_key(lua_State *L, TValue *o, const unsigned char **pp, actor *a)
{
    const unsigned char *p = *pp;
    unsigned tag = p[0];
    if (tag == WIRE_STR) { /* 64 bytes or more: interned as any string */
        dec_scalar(L, o, pp);
        return;
    }
    size_t n = tag - WIRE_SSTR;
    GCstr *s = a->vm.flat_key;
    if (s && s->len == n && bytes_eq(strdata(s), p + 1, n)) {
        setstrV(L, o, s);
        *pp = p + 1 + n;
        return;
    }
    dec_scalar(L, o, pp);
    uint32_t seen = ((uint32_t)n | (uint32_t)p[1] << 8 | (uint32_t)p[n] << 16) + 1;
    if (a->vm.flat_key_seen != seen) {
        a->vm.flat_key_seen = seen;
        return;
    }
    a->vm.flat_key_seen = 0;
    GCtab *h = ljx_roots_made(L);
    setstrV(L, tvref(h->array) + KEY_AT, strV(o));
    lj_gc_anybarriert(L, h);
    a->vm.flat_key = strV(o);
}

/* A record: npairs (1..TPL_PAIRS) string-keyed pairs at p and no array part. The values are
 * made first (no GC step runs in here to find them unanchored), then the table, from its
 * template when the shape has one. */
static void dec_record(lua_State *L, const unsigned char *p, unsigned npairs)
{
    TValue vals[TPL_PAIRS];
    const unsigned char *keyat[TPL_PAIRS];
    /* the slot's hash takes each key's length and two of its bytes (a wrong slot only
     * costs a miss: the signature is compared in full) */
    uint32_t hash = 2166136261u ^ npairs;
    size_t n = 2; /* the signature's length without the node indices */
    for (unsigned i = 0; i < npairs; i++) {
        size_t kb = key_bytes(p);
        keyat[i] = p;
        hash =
            (hash ^ ((uint32_t)kb | (uint32_t)p[kb - 1] << 8 | (uint32_t)p[1] << 16)) * 16777619u;
        n += kb;
        p += kb;
        dec_value(L, &vals[i], &p);
    }
    GCtab *h = ljx_roots(L);
    if (h) {
        cTValue *e = tvref(h->array) + 1 + (hash % TPL_SLOTS) * TPL_ENTRY;
        if (tvisstr(&e[1]) && strV(&e[1])->len == n + npairs && tvistab(&e[0])) {
            const unsigned char *known = (const unsigned char *)strVdata(&e[1]);
            int same = known[0] == 0 && known[1] == npairs;
            size_t at = 2;
            for (unsigned i = 0; same && i < npairs; i++) {
                size_t kb = key_bytes(keyat[i]);
                for (size_t j = 0; same && j < kb; j++)
                    same = known[at + j] == keyat[i][j];
                at += kb;
                same = same && known[n + i] <= tabV(&e[0])->hmask;
            }
            if (same) {
                GCtab *t = lj_tab_dup(L, tabV(&e[0]));
                settabV(L, L->top, t);
                incr_top(L);
                Node *node = noderef(t->node);
                for (unsigned j = 0; j < npairs; j++)
                    copyTV(L, &node[known[n + j]].val, &vals[j]);
                return;
            }
        }
    }
    GCtab *t = lj_tab_new_ah(L, 0, (int32_t)npairs);
    t->nomm = 0; /* see flat_decode */
    settabV(L, L->top, t);
    incr_top(L);
    for (unsigned i = 0; i < npairs; i++) {
        TValue k;
        const unsigned char *q = keyat[i];
        dec_scalar(L, &k, &q);
        /* a repeated key (no encoder writes one) is set again, as the codec does */
        copyTV(L, lj_tab_setstr(L, t, strV(&k)), &vals[i]);
    }
    unsigned char sig[SIG_MAX];
    sig[0] = 0;
    sig[1] = (unsigned char)npairs;
    for (unsigned i = 0, at = 2; i < npairs; i++) {
        size_t kb = key_bytes(keyat[i]);
        memcpy(sig + at, keyat[i], kb);
        at += (unsigned)kb;
    }
    learn(L, t, keyat, npairs, sig, n, hash);
}

void flat_decode(lua_State *L, const char *data, size_t len, actor *receiver)
{
    const unsigned char *p = (const unsigned char *)data;
    (void)len;
    lj_state_checkstack(L, 1);
    if (*p != WIRE_TABLE) {
        /* built in its slot: no object it makes is ever unreachable and alive */
        setnilV(L->top);
        incr_top(L);
        dec_value(L, L->top - 1, &p);
        return;
    }
    unsigned narr = p[1], npairs = p[2];
    p += 3;
    if (narr == 0 && npairs >= TPL_MIN_PAIRS && npairs <= TPL_PAIRS) {
        dec_record(L, p, npairs);
        return;
    }
    GCtab *t = lj_tab_new_ah(L, (int32_t)narr, (int32_t)npairs);
    /* a key may be a metamethod's name ({__mode = "k"} made a metatable): no metamethod is
     * known absent (lj_tab_setstr, unlike the VM's stores and lua_rawset, leaves a new
     * table's negative cache saying all are) */
    t->nomm = 0;
    /* on the stack before anything else is made: the collector sees it from there (no GC
     * step runs in here, but a step after a raise would) */
    settabV(L, L->top, t);
    incr_top(L);
    TValue *arr = tvref(t->array); /* slots 1..narr: making strings never moves it */
    for (unsigned i = 1; i <= narr; i++)
        dec_value(L, &arr[i], &p);
    if (npairs == 1) {
        /* one key in a hash part of two empty nodes: its main node is free, so it goes
         * there, as lj_tab_newkey would put it, without the lookup and the search first */
        TValue k;
        if (receiver)
            dec_key(L, &k, &p, receiver);
        else
            dec_scalar(L, &k, &p);
        Node *n = hashstr(t, strV(&k));
        dec_value(L, &n->val, &p);
        setstrV(L, &n->key, strV(&k));
        return;
    }
    for (unsigned i = 0; i < npairs; i++) {
        TValue k, v;
        dec_scalar(L, &k, &p);
        dec_value(L, &v, &p);
        copyTV(L, lj_tab_setstr(L, t, strV(&k)), &v);
    }
    /* t is new, so white, and nothing ran since: no barrier is due (lua_createtable's own
     * stores skip it too) */
}

/* -- Nested values ---------------------------------------------------------------------- */

struct deep_enc {
    flat_endpoint_fn endpoint;
    flat_out *r;
};

static char *enc_deep_value(cTValue *o, char *p, char *end, int depth, struct deep_enc *d);

/* enc_table's layout and checks, with nested values */
static char *enc_deep_table(const GCtab *t, char *p, char *end, int depth, struct deep_enc *d)
{
    int32_t sn = depth < FLAT_DEEP_DEPTH ? seq_len(t) : -1;
    if (sn < 0 || end - p < 3)
        return NULL;
    uint32_t n = (uint32_t)sn;
    cTValue *arr = tvref(t->array);
    char *head = p;
    p[0] = WIRE_TABLE;
    p[1] = (char)n;
    p += 3;
    for (uint32_t i = 1; i <= n; i++)
        if ((p = enc_deep_value(&arr[i], p, end, depth + 1, d)) == NULL)
            return NULL;
    const Node *node = noderef(t->node);
    uint32_t pairs = 0;
    for (uint32_t j = 0; j <= t->hmask; j++) {
        const Node *nd = &node[j];
        if (tvisnil(&nd->val))
            continue;
        if (!tvisstr(&nd->key))
            return NULL;
        if ((p = enc_scalar(&nd->key, p, end, &d->r->cdata)) == NULL ||
            (p = enc_deep_value(&nd->val, p, end, depth + 1, d)) == NULL)
            return NULL;
        pairs++;
    }
    if (pairs > 0x7f)
        return NULL;
    head[2] = (char)pairs;
    return p;
}

static char *enc_deep_value(cTValue *o, char *p, char *end, int depth, struct deep_enc *d)
{
    if (tvistab(o))
        return enc_deep_table(tabV(o), p, end, depth, d);
    if (tvisudata(o)) {
        /* a channel tx: its channel's address, as the codec writes it (an rx or a socket
         * moves out of the sender's object: the codec's) */
        const GCudata *ud = udataV(o);
        flat_out *r = d->r;
        void *c = NULL;
        if (!d->endpoint || ud->udtype != UDTYPE_USERDATA || end - p < 9 ||
            r->ntx == FLAT_DEEP_TX || d->endpoint(uddata(ud), ud->len, &c) != WIRE_REF_TX || !c)
            return NULL;
        *p++ = WIRE_TX;
        memcpy(p, &c, 8);
        r->txs[r->ntx++] = c;
        return p + 8;
    }
    return enc_scalar(o, p, end, &d->r->cdata);
}

size_t flat_encode_deep(lua_State *L, int idx, char *out, size_t cap, flat_endpoint_fn endpoint,
                        flat_out *r)
{
    cTValue *o = L->base + (idx - 1);
    r->ntx = r->cdata = 0;
    if (idx <= 0 || o >= L->top || !tvistab(o))
        return 0;
    struct deep_enc d = {endpoint, r};
    char *p =
        enc_deep_table(tabV(o), out, out + (cap > FLAT_DEEP_MAX ? FLAT_DEEP_MAX : cap), 0, &d);
    return p ? (size_t)(p - out) : 0;
}

/* The end of the nested value at p (p < e), or NULL if flat_decode_deep does not make it. */
static const unsigned char *deep_end(const unsigned char *p, const unsigned char *e, int depth,
                                     int trusted, int *cdata)
{
    unsigned tag = *p;
    if (tag == WIRE_TX)
        return trusted && e - p >= 9 ? p + 9 : NULL;
    if (tag != WIRE_TABLE)
        return scalar_end(p, e, 0, cdata);
    if (depth >= FLAT_DEEP_DEPTH || e - p < 3 || p[1] >= 0x80 || p[2] >= 0x80)
        return NULL;
    unsigned narr = p[1], npairs = p[2];
    p += 3;
    for (unsigned i = 0; i < narr && p; i++)
        p = p < e ? deep_end(p, e, depth + 1, trusted, cdata) : NULL;
    for (unsigned i = 0; i < npairs && p; i++) {
        p = p < e ? scalar_end(p, e, 1, cdata) : NULL;
        /* a nil value makes a key the codec would keep: its way */
        p = p && p < e && *p != WIRE_NIL ? deep_end(p, e, depth + 1, trusted, cdata) : NULL;
    }
    return p;
}

int flat_deep_decodable(lua_State *L, const char *data, size_t len, int trusted)
{
    const unsigned char *p = (const unsigned char *)data, *e = p + len;
    int cdata = 0;
    if (len < 3 || len > FLAT_DEEP_MAX || *p != WIRE_TABLE)
        return 0;
    p = deep_end(p, e, 0, trusted, &cdata);
    return p == e && (!cdata || ctype_ctsG(G(L)) != NULL);
}

/* dec_scalar, with short strings (a protocol's keys and tags) from the state's cache of
 * the last few the decoders made (ljx_short_string) */
static void dec_deep_scalar(lua_State *L, TValue *o, const unsigned char **pp)
{
    const unsigned char *p = *pp;
    unsigned tag = *p;
    if (tag >= WIRE_SSTR && tag < WIRE_FIXINT && tag - WIRE_SSTR <= LJX_SHORT_STRING) {
        size_t n = tag - WIRE_SSTR;
        setstrV(L, o, (GCstr *)ljx_short_string(L, (const char *)p + 1, n));
        *pp = p + 1 + n;
        return;
    }
    dec_scalar(L, o, pp);
}

struct deep_dec {
    flat_push_fn push;
    int stepped; /* a push ran (it may have run a GC step): stores take the barrier */
};

/* Writes the value at *pp into o, a slot of table t (or the stack's top slot, t NULL),
 * advancing *pp. The tables are made and stored top down, so each is reachable as it fills;
 * nothing here but a tx's push can run a GC step, and after one a black table's new values
 * take the barrier. */
static void dec_deep(lua_State *L, GCtab *t, TValue *o, const unsigned char **pp,
                     struct deep_dec *d)
{
    const unsigned char *p = *pp;
    if (*p == WIRE_TX) {
        void *c;
        memcpy(&c, p + 1, 8);
        *pp = p + 9;
        /* o is a table's slot: a push may move the stack, never a table's parts */
        d->push(L, c, WIRE_REF_TX);
        d->stepped = 1;
        copyTV(L, o, L->top - 1);
        L->top--;
        if (t)
            lj_gc_anybarriert(L, t);
        return;
    }
    if (*p != WIRE_TABLE) {
        dec_deep_scalar(L, o, pp);
        if (d->stepped && t)
            lj_gc_anybarriert(L, t);
        return;
    }
    unsigned narr = p[1], npairs = p[2];
    p += 3;
    GCtab *n = lj_tab_new_ah(L, (int32_t)narr, (int32_t)npairs);
    n->nomm = 0; /* see flat_decode */
    settabV(L, o, n);
    if (d->stepped && t)
        lj_gc_anybarriert(L, t);
    for (unsigned i = 1; i <= narr; i++)
        dec_deep(L, n, &tvref(n->array)[i], &p, d); /* the array part never moves */
    for (unsigned i = 0; i < npairs; i++) {
        TValue k;
        dec_deep_scalar(L, &k, &p);
        /* the hash part was made for npairs keys: no insert rehashes it */
        TValue *v = lj_tab_setstr(L, n, strV(&k));
        dec_deep(L, n, v, &p, d);
    }
    *pp = p;
}

void flat_decode_deep(lua_State *L, const char *data, size_t len, flat_push_fn push)
{
    const unsigned char *p = (const unsigned char *)data;
    struct deep_dec d = {push, 0};
    (void)len;
    lj_state_checkstack(L, 1);
    setnilV(L->top);
    incr_top(L);
    /* the top is a table (flat_deep_decodable): its slot is written before any push */
    dec_deep(L, NULL, L->top - 1, &p, &d);
}
