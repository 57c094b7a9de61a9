/* codec: the message format. Values are encoded in the sender's lua_State into bytes and
 * decoded in the receiver's (copy semantics); see codec.c for the byte layout. */
#ifndef SMARM_CODEC_H
#define SMARM_CODEC_H

#include <stddef.h>
#include <lua.h>

/* Tables nested deeper than this are refused (as string.buffer does). Recursion costs ~210
 * bytes of C stack per level to encode and ~100 to decode: ~31 KB at the limit. */
#define CODEC_MAX_DEPTH 100
#define CODEC_MAX_BYTES ((size_t)1 << 30) /* one encoded message may not exceed this */

/* A growable byte buffer (malloc/realloc). Zero-initialised is a valid empty buffer. */
typedef struct codec_buf {
    char *data;
    size_t len, cap;
} codec_buf;

void codec_buf_init(codec_buf *b);
void codec_buf_free(codec_buf *b);  /* frees data; the buffer is empty and reusable after */
void codec_buf_reset(codec_buf *b); /* len = 0, keeps the memory */
/* Appends n bytes; 0, or -1 when out of memory. */
int codec_buf_append(codec_buf *b, const void *p, size_t n);

/* Values built from C, appended to b (0, or -1 when out of memory): a table header (then
 * narr values and nhash key/value pairs must follow), a string, a number. A value encoded
 * elsewhere may be appended as is with codec_buf_append. */
int codec_put_table(codec_buf *b, unsigned narr, unsigned nhash);
int codec_put_string(codec_buf *b, const char *s, size_t n);
int codec_put_number(codec_buf *b, double d);
int codec_put_boolean(codec_buf *b, int v);
/* Whether an encoded value carries channel references (it then cannot be copied bytewise). */
int codec_has_refs(const char *data, size_t len);

/* Append the encoding of the value at idx to out. Returns 0, or -1 with out unchanged and a
 * message in err naming where the unsendable value sits, rooted at `root` (e.g. "msg":
 * "cannot send a function (at msg.handler)"). Sendable: nil, booleans, numbers, strings,
 * int64_t/uint64_t cdata, tables of those (metatables dropped, shared subtables copied).
 * Reads raw (no metamethods), never touches the Lua stack and never raises a Lua error. */
int codec_encode(lua_State *L, int idx, codec_buf *out, const char *root, char *err, size_t errlen);
/* (Channel endpoints are sendable too: encoding takes a reference per endpoint, moving an rx
 * out of the sender's object, which then refuses to be used.) */

/* Decode one value from data[0..len) and push it. Returns 0, or -1 with the stack as it was
 * and a message in err on any malformed input. May raise only a Lua memory error. Channel
 * endpoints in the value become objects of L that take over the references the bytes held:
 * for that, decoding marks the bytes' refs prefix as taken (it writes data[0]), and a memory
 * error raised midway leaks the references not taken over yet. */
int codec_decode(lua_State *L, const char *data, size_t len, char *err, size_t errlen);

/* The n values at first..first+n-1 (spawn arguments, roots "arg 1", "arg 2", ...): a count,
 * then the values. Same contract as codec_encode. */
int codec_encode_args(lua_State *L, int first, int n, codec_buf *out, char *err, size_t errlen);

/* Push the values written by codec_encode_args and store their count in *n. Same contract
 * as codec_decode (on failure nothing is pushed and *n is 0). */
int codec_decode_args(lua_State *L, const char *data, size_t len, int *n, char *err, size_t errlen);

/* Drops the channel references held by encoded bytes (a message or an argument list) that
 * are freed without being decoded; a no-op for bytes without endpoints or already decoded. */
void codec_release(char *data, size_t len);

#endif
