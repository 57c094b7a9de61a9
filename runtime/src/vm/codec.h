/* codec: Lua values encoded in the sender's lua_State into the wire format (base/wire.h) and
 * decoded in the receiver's (copy semantics). */
#ifndef SMARM_VM_CODEC_H
#define SMARM_VM_CODEC_H

#include <stddef.h>
#include <lua.h>

#include "base/wire.h"
#include "vm/flat.h"

/* Channel endpoints are userdata the library above makes; the runtime installs how the codec
 * recognises one and how it pushes a new one (one table per process). */
typedef struct codec_endpoints {
    /* If the userdata payload ud (len bytes) is an endpoint: its kind (WIRE_REF_TX/RX/SOCK)
     * and its channel or socket handle in *chan (NULL for an rx or a socket that was sent
     * away, or a closed socket). 0 for any other userdata. */
    int (*endpoint)(void *ud, size_t len, void **chan);
    /* Pushes a new endpoint object of L that takes over one reference to chan; may raise a
     * memory error. */
    void (*push)(lua_State *L, void *chan, int kind);
} codec_endpoints;

void codec_set_endpoints(const codec_endpoints *ep);

/* Append the encoding of the value at idx to out. Returns 0, or -1 with out unchanged and a
 * message in err naming where the unsendable value sits, rooted at `root` (e.g. "msg":
 * "cannot send a function (at msg.handler)"). Sendable: nil, booleans, numbers, strings,
 * int64_t/uint64_t cdata, channel endpoints, sockets, tables of those (metatables dropped, shared
 * subtables copied). Reads raw (no metamethods), never touches the Lua stack and never raises
 * a Lua error. Encoding takes a reference per endpoint, moving an rx or a socket out of the
 * sender's object, which then refuses to be used. */
int codec_encode(lua_State *L, int idx, wire_buf *out, const char *root, char *err, size_t errlen);

/* Decode one value from data[0..len) and push it. Returns 0, or -1 with the stack as it was
 * and a message in err on any malformed input. May raise only a Lua memory error. Channel
 * endpoints in the value become objects of L that take over the references the bytes held:
 * for that, decoding marks the bytes' refs prefix as taken (it writes data[0]), and a memory
 * error raised midway leaks the references not taken over yet. */
int codec_decode(lua_State *L, const char *data, size_t len, char *err, size_t errlen);

/* codec_encode and codec_decode without their fast path for nested tables (vm/flat.h): the
 * codec's own walk, which writes and reads the same bytes (flat_test compares the two). */
int codec_encode_general(lua_State *L, int idx, wire_buf *out, const char *root, char *err,
                         size_t errlen);
int codec_decode_general(lua_State *L, const char *data, size_t len, char *err, size_t errlen);

/* The installed endpoint hook (NULL before codec_set_endpoints): what a fast encoder
 * (vm/flat.h) takes txs by. A value a send's pass wrote with no int64 is well formed by
 * construction, and codec_decode_marked takes it without the check, in this process
 * (base/mailbox.h's MSG_DEEP). */
flat_endpoint_fn codec_endpoint(void);
int codec_decode_marked(lua_State *L, const char *data, size_t len, char *err, size_t errlen);

/* The n values at first..first+n-1 (spawn arguments, roots "arg 1", "arg 2", ...): a count,
 * then the values. Same contract as codec_encode. */
int codec_encode_args(lua_State *L, int first, int n, wire_buf *out, char *err, size_t errlen);

/* Push the values written by codec_encode_args and store their count in *n. Same contract
 * as codec_decode (on failure nothing is pushed and *n is 0). */
int codec_decode_args(lua_State *L, const char *data, size_t len, int *n, char *err, size_t errlen);

#endif
