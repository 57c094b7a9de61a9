/* wire: the message byte format. Messages never leave the process, so numbers are in
 * native byte order. A value is one tag byte followed by its payload:
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
 *   0x10 p8       a socket: its handle's address (only after a refs prefix)
 *   0x11 p8       an atom or a remote pid: its interned record's address (base/intern.h)
 *   0x40+N b*N    a string of N < 64 bytes
 *   0x80+I        an integer I in 0..127
 *   anything else is malformed.
 *
 * Argument lists are vN then N values. Channel endpoints and sockets carry references: a
 * message holding any starts with a refs prefix, 0x0d (a value) or 0x0e (an argument list)
 * and an 8-byte cookie. Encoding takes one reference per endpoint (an rx or a socket moves:
 * the sender's object lets go of it) once the whole message encoded; decoding hands them to the new
 * objects and turns the prefix into 0x0f; wire_release drops those of a message freed undelivered.
 */
#include "base/wire.h"
#include "base/heap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The refs prefix cookie: fixed for the process, unguessable by chance (ASLR'd address). */
static const char cookie_anchor;
static uint64_t refs_cookie(void)
{
    return (uint64_t)(uintptr_t)&cookie_anchor * 0x9E3779B97F4A7C15ull;
}

static const wire_refs_ops *refs_ops;

void wire_set_refs_ops(const wire_refs_ops *ops)
{
    __atomic_store_n(&refs_ops, ops, __ATOMIC_RELEASE);
}

/* ---- buffer ---- */

void wire_buf_init(wire_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->heap = NULL;
    b->cache = NULL;
}

void wire_buf_init_heap(wire_buf *b, heap *h, heap_cache *cache)
{
    wire_buf_init(b);
    b->heap = h;
    b->cache = cache;
}

void wire_buf_free(wire_buf *b)
{
    if (!b->heap)
        free(b->data);
    else if (b->data)
        heap_free(b->heap, b->cache, b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}

int wire_buf_fit(wire_buf *b)
{
    if (!b->heap || !b->data || b->len == b->cap)
        return 0;
    char *p = heap_realloc(b->heap, b->cache, b->data, b->cap, b->len);
    if (!p)
        return -1;
    b->data = p;
    b->cap = b->len;
    return 0;
}

void wire_buf_reset(wire_buf *b) { b->len = 0; }

int wire_buf_grow(wire_buf *b, size_t n)
{
    if (n > SIZE_MAX / 2 - b->len)
        return -1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n)
        cap *= 2;
    char *p =
        b->heap ? heap_realloc(b->heap, b->cache, b->data, b->cap, cap) : realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int wire_buf_append(wire_buf *b, const void *p, size_t n)
{
    if (wire_buf_reserve(b, n) != 0)
        return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int wire_varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* ---- values built from C ---- */

int wire_put_table(wire_buf *b, unsigned narr, unsigned nhash)
{
    if (wire_buf_reserve(b, 21) != 0)
        return -1;
    b->data[b->len++] = (char)WIRE_TABLE;
    wire_put_varint(b, narr);
    wire_put_varint(b, nhash);
    return 0;
}

int wire_put_string(wire_buf *b, const char *s, size_t n)
{
    if (n > WIRE_MAX_BYTES || wire_buf_reserve(b, n + 11) != 0)
        return -1;
    if (n <= WIRE_SSTR_MAX) {
        b->data[b->len++] = (char)(WIRE_SSTR + n);
    } else {
        b->data[b->len++] = (char)WIRE_STR;
        wire_put_varint(b, n);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

int wire_put_boolean(wire_buf *b, int v)
{
    if (wire_buf_reserve(b, 1) != 0)
        return -1;
    b->data[b->len++] = (char)(v ? WIRE_TRUE : WIRE_FALSE);
    return 0;
}

int wire_put_intern(wire_buf *b, const void *p)
{
    if (wire_buf_reserve(b, 9) != 0)
        return -1;
    b->data[b->len++] = (char)WIRE_INTERN;
    memcpy(b->data + b->len, &p, 8);
    b->len += 8;
    return 0;
}

int wire_put_number(wire_buf *b, double d)
{
    if (wire_buf_reserve(b, 9) != 0)
        return -1;
    b->data[b->len++] = (char)WIRE_DOUBLE;
    memcpy(b->data + b->len, &d, 8);
    b->len += 8;
    return 0;
}

/* ---- channel references ---- */

int wire_has_refs(const char *data, size_t len)
{
    return len > 0 && (unsigned char)data[0] == WIRE_REFS;
}

enum { WALK_COMMIT, WALK_RELEASE };

static uint64_t get_varint(unsigned char **pp)
{
    unsigned char *p = *pp;
    uint64_t n = 0;
    for (int h = 0;; h += 7) {
        n |= (uint64_t)(*p & 0x7f) << h;
        if (!(*p++ & 0x80))
            break;
    }
    *pp = p;
    return n;
}

/* Steps over one value of trusted bytes, committing or releasing its endpoints. */
static unsigned char *walk_value(unsigned char *p, int mode)
{
    unsigned tag = *p++;
    if (tag >= WIRE_FIXINT)
        return p;
    if (tag >= WIRE_SSTR)
        return p + (tag - WIRE_SSTR);
    switch (tag) {
    case WIRE_INT64:
    case WIRE_UINT64:
    case WIRE_INTERN:
        return p + 8;
    case WIRE_DOUBLE:
    case WIRE_I8:
    case WIRE_I16:
    case WIRE_I32:
        return p + wire_number_len(tag);
    case WIRE_STR: {
        uint64_t n = get_varint(&p);
        return p + n;
    }
    case WIRE_TABLE: {
        uint64_t a = get_varint(&p);
        uint64_t h = get_varint(&p);
        for (uint64_t i = 0; i < a + 2 * h; i++)
            p = walk_value(p, mode);
        return p;
    }
    case WIRE_TX:
    case WIRE_RX:
    case WIRE_SOCK: {
        const wire_refs_ops *ops = __atomic_load_n(&refs_ops, __ATOMIC_ACQUIRE);
        int kind = tag == WIRE_TX ? WIRE_REF_TX : tag == WIRE_RX ? WIRE_REF_RX : WIRE_REF_SOCK;
        void *ptr;
        memcpy(&ptr, p, 8);
        if (mode == WALK_RELEASE) {
            ops->release(ptr, kind);
        } else if (tag == WIRE_TX) {
            ops->retain(ptr, kind);
        } else {
            void *c = ops->take(ptr, kind); /* the object's reference moves here */
            memcpy(p, &c, 8);
        }
        return p + 8;
    }
    default: /* nil, false, true */
        return p;
    }
}

/* Writes the refs prefix `tag` and the cookie at p (WIRE_REFS_LEN bytes). */
static void write_prefix(char *p, int tag)
{
    p[0] = (char)tag;
    uint64_t ck = refs_cookie();
    memcpy(p + 1, &ck, 8);
}

/* Moves out[at..] up to make room for a refs prefix at at (reserved). */
static void make_room(wire_buf *out, size_t at)
{
    memmove(out->data + at + WIRE_REFS_LEN, out->data + at, out->len - at);
    out->len += WIRE_REFS_LEN;
}

int wire_refs_commit(wire_buf *out, size_t at, size_t values, int tag)
{
    if (wire_buf_reserve(out, WIRE_REFS_LEN))
        return -1;
    unsigned char *p = (unsigned char *)out->data + values;
    unsigned char *end = (unsigned char *)out->data + out->len;
    while (p < end)
        p = walk_value(p, WALK_COMMIT);
    make_room(out, at);
    write_prefix(out->data + at, tag);
    return 0;
}

void wire_refs_prefix_txs(char *p, void *const *chans, int n)
{
    const wire_refs_ops *ops = __atomic_load_n(&refs_ops, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        ops->retain(chans[i], WIRE_REF_TX);
    write_prefix(p, WIRE_REFS);
}

int wire_refs_commit_txs(wire_buf *out, size_t at, void *const *chans, int n)
{
    if (wire_buf_reserve(out, WIRE_REFS_LEN))
        return -1;
    make_room(out, at);
    wire_refs_prefix_txs(out->data + at, chans, n);
    return 0;
}

int wire_refs_live(const char *data, size_t len, int tag)
{
    uint64_t ck;
    if (len < WIRE_REFS_LEN || (unsigned char)data[0] != tag)
        return 0;
    memcpy(&ck, data + 1, 8);
    return ck == refs_cookie();
}

void wire_refs_taken(char *data) { data[0] = (char)WIRE_REFS_TAKEN; }

void wire_release_refs(char *data, size_t len)
{
    int args = wire_refs_live(data, len, WIRE_REFS_ARGS);
    if (!args && !wire_refs_live(data, len, WIRE_REFS))
        return;
    data[0] = (char)WIRE_REFS_TAKEN;
    unsigned char *p = (unsigned char *)data + WIRE_REFS_LEN, *end = (unsigned char *)data + len;
    if (args)
        get_varint(&p);
    while (p < end)
        p = walk_value(p, WALK_RELEASE);
}
