/* decode_fuzz: libFuzzer target for the message decoder. Whatever bytes arrive, codec_decode
 * and codec_decode_args push a value or fail cleanly with the Lua stack as it was; a decoded
 * value encodes again, and that encoding is a fixed point: decoding and re-encoding it gives
 * the same bytes up to the order of each table's key/value pairs (that order is the table's
 * iteration order, which depends on how the table was built, e.g. keys 6..8 of a table built
 * as an array iterate 6, 7, 8, but 8, 6, 7 once rebuilt in a hash part).
 * Build: ./configure.py --flavour fuzz && ninja -f build-fuzz/build.ninja */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "vm/codec.h"

static lua_State *L; /* one state for the whole run: decoding must not wear it down */
static wire_buf enc1, enc2, canon1, canon2;

__attribute__((noreturn)) static void die(const char *what, const char *err)
{
    fprintf(stderr, "decode_fuzz: %s%s%s\n", what, err ? ": " : "", err ? err : "");
    abort();
}

/* A copy of exactly len bytes (ASan sees any read past the end); the decoder may write byte 0
 * (the refs prefix). A 0x0d/0x0e first byte becomes 0x0f ("prefix taken"): a refs prefix
 * with the process's cookie marks bytes the encoder wrote in this process, whose endpoint
 * tags carry raw channel pointers, and libFuzzer's comparison tracing finds the cookie. Both
 * bytes are malformed as a first tag anyway; as an argument count the change is harmless. */
/* An exact-size copy (so reads past the end are caught). */
static char *copy_bytes(const uint8_t *data, size_t len)
{
    char *p = malloc(len ? len : 1);
    if (p == NULL)
        die("out of memory", NULL);
    memcpy(p, data, len);
    return p;
}

/* The fuzzed bytes: a leading refs prefix is turned into "refs taken", so the
 * decoder never follows fuzzed channel addresses. Only for fuzzer input: a
 * re-encoded argument list of 13 or 14 values starts with that byte too. */
static char *copy_input(const uint8_t *data, size_t len)
{
    char *p = copy_bytes(data, len);
    if (len > 0 && (p[0] == 0x0d || p[0] == 0x0e))
        p[0] = 0x0f;
    return p;
}

static const unsigned char *skip_varint(const unsigned char *p, uint64_t *v)
{
    *v = 0;
    for (int shift = 0;; shift += 7) {
        *v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p++ & 0x80))
            return p;
    }
}

static void append(wire_buf *out, const void *p, size_t n)
{
    if (wire_buf_append(out, p, n) != 0)
        die("out of memory", NULL);
}

typedef struct span {
    char *data;
    size_t len;
} span;

static int span_cmp(const void *a, const void *b)
{
    const span *x = a, *y = b;
    int c = memcmp(x->data, y->data, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Appends the canonical form of the encoded value at p (bytes codec_encode wrote, see the
 * format in codec.c) to out: the same bytes with each table's pairs sorted. Returns the end
 * of the value. */
static const unsigned char *canon(const unsigned char *p, wire_buf *out)
{
    const unsigned char *v = p;
    unsigned tag = *p++;
    uint64_t n, narr, nhash;
    if (tag >= 0x80)
        ;
    else if (tag >= 0x40)
        p += tag - 0x40;
    else if (tag == 0x03 || tag == 0x07 || tag == 0x08)
        p += 8;
    else if (tag >= 0x04 && tag <= 0x06)
        p += (size_t)1 << (tag - 0x04);
    else if (tag == 0x09)
        p = skip_varint(p, &n) + n;
    else if (tag == 0x0a) {
        p = skip_varint(skip_varint(p, &narr), &nhash);
        append(out, v, (size_t)(p - v));
        for (uint64_t i = 0; i < narr; i++)
            p = canon(p, out);
        span *pairs = calloc(nhash ? nhash : 1, sizeof *pairs);
        for (uint64_t i = 0; i < nhash; i++) {
            wire_buf pair;
            wire_buf_init(&pair);
            p = canon(canon(p, &pair), &pair);
            pairs[i].data = pair.data;
            pairs[i].len = pair.len;
        }
        qsort(pairs, nhash, sizeof *pairs, span_cmp);
        for (uint64_t i = 0; i < nhash; i++) {
            append(out, pairs[i].data, pairs[i].len);
            free(pairs[i].data);
        }
        free(pairs);
        return p;
    } else if (tag > 0x02)
        die("codec_encode wrote an unknown tag", NULL);
    append(out, v, (size_t)(p - v));
    return p;
}

/* Whether two encodings of `count` values (a value: 1, no count prefix) are equal up to the
 * order of table pairs. */
static int same_encoding(const wire_buf *a, const wire_buf *b, int args)
{
    const unsigned char *pa = (const unsigned char *)a->data, *pb = (const unsigned char *)b->data;
    uint64_t na = 1, nb = 1;
    if (a->len != b->len)
        return 0;
    if (args) {
        pa = skip_varint(pa, &na);
        pb = skip_varint(pb, &nb);
    }
    wire_buf_reset(&canon1);
    wire_buf_reset(&canon2);
    for (uint64_t i = 0; i < na; i++)
        pa = canon(pa, &canon1);
    for (uint64_t i = 0; i < nb; i++)
        pb = canon(pb, &canon2);
    return na == nb && canon1.len == canon2.len &&
           memcmp(canon1.data, canon2.data, canon1.len) == 0;
}

/* The value on top of the stack encodes to enc1; enc1 decodes and encodes to the same bytes
 * (up to pair order). */
static void round_trip_value(void)
{
    char err[256];
    int top = lua_gettop(L);
    wire_buf_reset(&enc1);
    wire_buf_reset(&enc2);
    if (codec_encode(L, -1, &enc1, "value", err, sizeof err) != 0)
        die("a decoded value does not encode", err);
    char *copy = copy_bytes((const uint8_t *)enc1.data, enc1.len);
    if (codec_decode(L, copy, enc1.len, err, sizeof err) != 0)
        die("an encoding does not decode", err);
    free(copy);
    if (lua_gettop(L) != top + 1)
        die("codec_decode of an encoding left the stack unbalanced", NULL);
    if (codec_encode(L, -1, &enc2, "value", err, sizeof err) != 0)
        die("a re-decoded value does not encode", err);
    if (!same_encoding(&enc1, &enc2, 0))
        die("encode(decode(encode(v))) differs from encode(v)", NULL);
    lua_settop(L, top);
}

/* The n values at first.. encode as an argument list, which round-trips the same way. */
static void round_trip_args(int first, int n)
{
    char err[256];
    int top = lua_gettop(L), n2;
    wire_buf_reset(&enc1);
    wire_buf_reset(&enc2);
    if (codec_encode_args(L, first, n, &enc1, err, sizeof err) != 0)
        die("decoded arguments do not encode", err);
    char *copy = copy_bytes((const uint8_t *)enc1.data, enc1.len);
    if (codec_decode_args(L, copy, enc1.len, &n2, err, sizeof err) != 0)
        die("an argument encoding does not decode", err);
    free(copy);
    if (n2 != n || lua_gettop(L) != top + n)
        die("codec_decode_args of an encoding: wrong count or stack", NULL);
    if (codec_encode_args(L, top + 1, n, &enc2, err, sizeof err) != 0)
        die("re-decoded arguments do not encode", err);
    if (!same_encoding(&enc1, &enc2, 1))
        die("encode_args(decode_args(bytes)) differs from bytes", NULL);
    lua_settop(L, top);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    L = luaL_newstate();
    if (L == NULL)
        die("luaL_newstate failed", NULL);
    wire_buf_init(&enc1);
    wire_buf_init(&enc2);
    wire_buf_init(&canon1);
    wire_buf_init(&canon2);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char err[256];
    int n;
    char *bytes = copy_input(data, len);

    err[0] = '\0';
    if (codec_decode(L, bytes, len, err, sizeof err) == 0) {
        if (lua_gettop(L) != 1)
            die("codec_decode succeeded without pushing exactly one value", NULL);
        round_trip_value();
    } else if (lua_gettop(L) != 0) {
        die("codec_decode failed and left values on the stack", err);
    } else if (err[0] == '\0') {
        die("codec_decode failed without an error message", NULL);
    }
    lua_settop(L, 0);
    free(bytes);

    bytes = copy_input(data, len);
    err[0] = '\0';
    n = -1;
    if (codec_decode_args(L, bytes, len, &n, err, sizeof err) == 0) {
        if (n < 0 || lua_gettop(L) != n)
            die("codec_decode_args: count and stack disagree", NULL);
        round_trip_args(1, n);
    } else if (lua_gettop(L) != 0 || n != 0) {
        die("codec_decode_args failed and left values on the stack", err);
    } else if (err[0] == '\0') {
        die("codec_decode_args failed without an error message", NULL);
    }
    lua_settop(L, 0);
    free(bytes);
    return 0;
}
