/* wire: the message byte format, without Lua. A growable byte buffer, the tags, varints,
 * values built from C (the notices the runtime composes), and the walk over the channel
 * references an encoded message carries. vm/codec.c encodes Lua values into this format
 * and decodes them; see wire.c for the byte layout. */
#ifndef SMARM_BASE_WIRE_H
#define SMARM_BASE_WIRE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Tables nested deeper than this are refused (as string.buffer does). */
#define WIRE_MAX_DEPTH 100
#define WIRE_MAX_BYTES ((size_t)1 << 30) /* one encoded message may not exceed this */

enum wire_tag {
    WIRE_NIL = 0x00,
    WIRE_FALSE = 0x01,
    WIRE_TRUE = 0x02,
    WIRE_DOUBLE = 0x03,
    WIRE_I8 = 0x04,
    WIRE_I16 = 0x05,
    WIRE_I32 = 0x06,
    WIRE_INT64 = 0x07,
    WIRE_UINT64 = 0x08,
    WIRE_STR = 0x09,
    WIRE_TABLE = 0x0a,
    WIRE_TX = 0x0b,
    WIRE_RX = 0x0c,
    WIRE_REFS = 0x0d,
    WIRE_REFS_ARGS = 0x0e,
    WIRE_REFS_TAKEN = 0x0f,
    WIRE_REFS_LEN = 9, /* a refs tag and its 8-byte cookie */
    WIRE_SOCK = 0x10,
    WIRE_INTERN = 0x11, /* an atom or a remote pid (base/intern.h): its record's address */
    WIRE_SSTR = 0x40,
    WIRE_SSTR_MAX = 63,
    WIRE_FIXINT = 0x80,
    WIRE_FIXINT_MAX = 127,
};

/* A growable byte buffer: malloc/realloc's memory, or blocks of an actor heap (a spawn
 * payload, made on one scheduler thread and freed on another: base/heap.h moves such blocks
 * between threads by whole magazines, where glibc's arenas took a lock per block).
 * Zero-initialised is a valid empty malloc buffer. */
struct heap;
struct heap_cache;
typedef struct wire_buf {
    char *data;
    size_t len, cap;   /* a heap buffer's data is a block of cap bytes */
    struct heap *heap; /* NULL: malloc's */
    struct heap_cache *cache;
} wire_buf;

void wire_buf_init(wire_buf *b);
/* An empty buffer whose blocks come from h through the calling thread's cache (as
 * heap_alloc's: NULL off the schedulers). */
void wire_buf_init_heap(wire_buf *b, struct heap *h, struct heap_cache *cache);
void wire_buf_free(wire_buf *b); /* frees data; the buffer is empty and reusable after */
/* Makes a heap buffer's block exactly len bytes (cap = len: freed as a block of its length,
 * as a spawn payload is); the same block when len is in cap's size class. 0, or -1 when out of
 * memory (the buffer unchanged). A malloc buffer is left as it is. */
int wire_buf_fit(wire_buf *b);
void wire_buf_reset(wire_buf *b); /* len = 0, keeps the memory */
/* Appends n bytes; 0, or -1 when out of memory. */
int wire_buf_append(wire_buf *b, const void *p, size_t n);
int wire_buf_grow(wire_buf *b, size_t n);

/* Makes room for n more bytes; 0 or -1 (out of memory). */
static inline int wire_buf_reserve(wire_buf *b, size_t n)
{
    return b->cap - b->len >= n ? 0 : wire_buf_grow(b, n);
}

/* Unsigned LEB128; the caller has reserved room (at most 10 bytes). */
static inline void wire_put_varint(wire_buf *b, uint64_t v)
{
    while (v >= 0x80) {
        b->data[b->len++] = (char)(v | 0x80);
        v >>= 7;
    }
    b->data[b->len++] = (char)v;
}

int wire_varint_len(uint64_t v);

/* Values built from C, appended to b (0, or -1 when out of memory): a table header (then
 * narr values and nhash key/value pairs must follow), a string, a number, a boolean. A
 * value encoded elsewhere may be appended as is with wire_buf_append. */
int wire_put_table(wire_buf *b, unsigned narr, unsigned nhash);
int wire_put_string(wire_buf *b, const char *s, size_t n);
int wire_put_number(wire_buf *b, double d);
/* Writes d at p (room for 9 bytes) in the encoders' number form and returns the byte after:
 * an integer-valued double in int32 range (not -0.0) compact, any other a double. */
static inline char *wire_number_at(char *p, double d)
{
    if (d >= -2147483648.0 && d <= 2147483647.0) {
        int32_t i = (int32_t)d;
        if ((double)i == d && (i != 0 || !signbit(d))) {
            if (i >= 0 && i <= WIRE_FIXINT_MAX) {
                *p++ = (char)(WIRE_FIXINT + i);
            } else if (i >= INT8_MIN && i <= INT8_MAX) {
                *p++ = WIRE_I8;
                *p++ = (char)(int8_t)i;
            } else if (i >= INT16_MIN && i <= INT16_MAX) {
                int16_t s = (int16_t)i;
                *p++ = WIRE_I16;
                memcpy(p, &s, 2);
                p += 2;
            } else {
                *p++ = WIRE_I32;
                memcpy(p, &i, 4);
                p += 4;
            }
            return p;
        }
    }
    *p++ = WIRE_DOUBLE;
    memcpy(p, &d, 8);
    return p + 8;
}
/* The bytes after the tag of a number's sized form (WIRE_I8, I16, I32, DOUBLE); 0 for any
 * other tag (a fixint is its tag alone: the readers test it apart). */
static inline size_t wire_number_len(unsigned tag)
{
    switch (tag) {
    case WIRE_I8:
        return 1;
    case WIRE_I16:
        return 2;
    case WIRE_I32:
        return 4;
    case WIRE_DOUBLE:
        return 8;
    default:
        return 0;
    }
}
/* The number a sized form holds (tag, and its bytes at p) into *d; returns
 * wire_number_len(tag), in the same switch. */
static inline size_t wire_number_get(unsigned tag, const unsigned char *p, double *d)
{
    switch (tag) {
    case WIRE_I8:
        *d = (int8_t)p[0];
        return 1;
    case WIRE_I16: {
        int16_t x;
        memcpy(&x, p, 2);
        *d = x;
        return 2;
    }
    case WIRE_I32: {
        int32_t x;
        memcpy(&x, p, 4);
        *d = x;
        return 4;
    }
    default: /* WIRE_DOUBLE */
        memcpy(d, p, 8);
        return 8;
    }
}
int wire_put_boolean(wire_buf *b, int v);
/* An interned record's address (base/intern.h), as the codec writes a light userdata. */
int wire_put_intern(wire_buf *b, const void *p);

/* ---- channel and socket references ----
 * A message that carries channel endpoints or sockets starts with a refs prefix (WIRE_REFS for a
 * value, WIRE_REFS_ARGS for an argument list) and a cookie, so arbitrary bytes are never
 * taken for channel addresses. The channels themselves live above this layer: the
 * runtime installs what a reference means (one table per process). */
enum wire_ref_kind { WIRE_REF_TX = 1, WIRE_REF_RX = 2, WIRE_REF_SOCK = 3 };

typedef struct wire_refs_ops {
    void (*retain)(void *chan, int kind);  /* one more reference of kind */
    void (*release)(void *chan, int kind); /* one reference of kind less (a socket: closed) */
    /* moves the reference of an rx or socket object out of it: its channel or socket handle */
    void *(*take)(void *obj, int kind);
} wire_refs_ops;

void wire_set_refs_ops(const wire_refs_ops *ops);

/* Whether an encoded value carries channel references (it then cannot be copied bytewise). */
int wire_has_refs(const char *data, size_t len);
/* Whether data starts with a live refs prefix of the given tag. */
int wire_refs_live(const char *data, size_t len, int tag);
/* After a successful encoding with endpoints: takes their references (tx retained, rx and
 * sockets moved out of their objects), then puts the refs prefix `tag` in front of out[at..]; the
 * values start at `values`, up to out->len. 0, or -1 (out of memory: nothing taken). */
int wire_refs_commit(wire_buf *out, size_t at, size_t values, int tag);
/* The same for a value at out[at..] whose only endpoints are txs of the n channels chans
 * (an encoder that kept them as it wrote them): no walk over the bytes. */
int wire_refs_commit_txs(wire_buf *out, size_t at, void *const *chans, int n);
/* Takes a reference to each of the n channels and writes the refs prefix at p (the
 * WIRE_REFS_LEN bytes before such a value, kept free by its encoder). */
void wire_refs_prefix_txs(char *p, void *const *chans, int n);
/* Marks a refs prefix as taken over by a decoder (a later wire_release leaves it alone). */
void wire_refs_taken(char *data);
/* Drops the channel references held by encoded bytes (a message or an argument list) that
 * are freed without being decoded; a no-op for bytes without endpoints or already decoded
 * (told by the first byte, inline: every freed message asks). */
void wire_release_refs(char *data, size_t len);
static inline void wire_release(char *data, size_t len)
{
    unsigned char tag = len ? (unsigned char)data[0] : 0;
    if (tag == WIRE_REFS || tag == WIRE_REFS_ARGS)
        wire_release_refs(data, len);
}

#endif
