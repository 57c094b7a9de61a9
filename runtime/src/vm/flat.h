/* flat: the codec's fast path for the messages most actors send. A flat value is a scalar
 * (nil, a boolean, a number, a string, an int64_t/uint64_t cdata) or a table whose keys are
 * strings, besides a sequence 1..n, and whose values are scalars. It is encoded straight
 * from LuaJIT's objects into a small buffer, and decoded straight into new objects, in the
 * very bytes vm/codec.c writes and reads (base/wire.h): either side may take the other
 * path, so a message's way through the codec never shows. Anything else (a nested table, a
 * key of another kind, a userdata, a value too big for the buffer) is left to the codec,
 * which also names what cannot be sent. */
#ifndef SMARM_VM_FLAT_H
#define SMARM_VM_FLAT_H

#include <stddef.h>

typedef struct lua_State lua_State;

/* The most bytes a flat message takes (a buffer of this size holds any the encoder makes). */
#define FLAT_MAX 256

/* Encodes the value at stack index idx (> 0) into out (cap bytes, at most FLAT_MAX): the
 * number of bytes written, or 0 if it is not flat or does not fit (out is then garbage).
 * *cdata (if cdata is not NULL) tells whether it holds an int64/uint64 cdata. Reads raw (no
 * metamethods) and neither allocates nor raises. Its own loop rather than flat_encode_deep's
 * limited to one table: that one's recursion cost a ring hop 34 more instructions. */
size_t flat_encode(lua_State *L, int idx, char *out, size_t cap, int *cdata);

/* Whether data[0..len) is a flat message flat_decode takes whole (a message whose bytes
 * flat_encode wrote in this process, with no cdata, is one: its flat mark, base/mailbox.h,
 * spares the receiver the check) (no channel references,
 * no nesting, nothing it would have to refuse, and, for int64 cdata, a state whose FFI is
 * loaded). Allocates nothing. */
int flat_decodable(lua_State *L, const char *data, size_t len);

/* An argument list (a spawn's): the n values from stack index first (> 0) encoded as the codec
 * does (a count, then each value) into out (cap bytes): the bytes written, or 0 if one is not
 * a scalar (or an int64 cdata), n is over 127, or they do not fit. Neither allocates nor
 * raises. */
size_t flat_encode_args(lua_State *L, int first, int n, char *out, size_t cap);

struct actor;

/* Pushes the value of bytes flat_decodable accepted. Makes its objects with LuaJIT's raw
 * constructors, which run no GC step (so no finalizer runs meanwhile); raises only when out
 * of memory (the caller keeps track of the bytes to free them then). receiver (or
 * NULL) is the actor whose state L is: it keeps the key string of the one-key records it
 * receives, found without the state's string table. */
void flat_decode(lua_State *L, const char *data, size_t len, struct actor *receiver);

/* -- Nested values ------------------------------------------------------------------------
 * Tables inside tables (each of a flat table's shape: a sequence 1..n and string keys) and
 * channel txs among the values, as a gen_server call's request {[tag] = "call", req = r,
 * from = {pid = p, tx = tx}} is, in the codec's bytes too. A send takes it when flat
 * declines (lib/args.c), the codec first for its other callers (vm/codec.c). Anything else (an rx,
 * a socket, an atom, a deeper or cyclic table, another key) or a value of more than FLAT_DEEP_MAX
 * bytes declines, to the codec's own walk. */
#define FLAT_DEEP_MAX 1024
#define FLAT_DEEP_DEPTH 8 /* tables nested deeper decline (a cyclic table does) */
#define FLAT_DEEP_TX 16   /* txs in one value (more decline) */

/* How an endpoint is recognised (the codec's endpoint hook) and made (its push hook). */
typedef int (*flat_endpoint_fn)(void *ud, size_t len, void **chan);
typedef void (*flat_push_fn)(lua_State *L, void *chan, int kind);

/* What a pass found besides its bytes. */
typedef struct flat_out {
    void *txs[FLAT_DEEP_TX]; /* the channels of the txs written, ntx of them: the caller takes
                              * a reference to each and puts the refs prefix in front
                              * (wire_refs_prefix_txs), as the codec does */
    int ntx;
    int cdata; /* an int64/uint64 cdata is in it (a receiver needs its FFI for it) */
} flat_out;

/* Encodes the table at stack index idx (> 0) into out (cap bytes, at most FLAT_DEEP_MAX): the
 * bytes written, or 0 if it declines; endpoint NULL declines a tx. Reads raw, neither
 * allocates nor raises. */
size_t flat_encode_deep(lua_State *L, int idx, char *out, size_t cap, flat_endpoint_fn endpoint,
                        flat_out *r);

/* Whether data[0..len) is a nested value flat_decode_deep takes whole (with WIRE_TX only when
 * trusted: the bytes came with a live refs prefix, now taken). Allocates nothing. */
int flat_deep_decodable(lua_State *L, const char *data, size_t len, int trusted);

/* Pushes the value of bytes flat_deep_decodable accepted (or that flat_encode_deep wrote in
 * this process, without cdata, a refs prefix taken off); each tx is made by push, which
 * takes over the message's reference. Raises only when out of memory (the caller is
 * protected, as for the codec's own decoder). */
void flat_decode_deep(lua_State *L, const char *data, size_t len, flat_push_fn push);

#endif
