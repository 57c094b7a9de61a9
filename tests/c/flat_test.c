/* flat_test: the flat fast path (vm/flat.h) writes the very bytes the codec writes, decodes
 * what the codec decodes into equal values, leaves everything else to the codec, and never
 * trusts bytes it did not check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lauxlib.h>

#include "base/wire.h"
#include "core/actor.h"
#include "vm/codec.h"
#include "vm/flat.h"
#include "lua_pair_helper.h"

LUALIB_API void luaL_openlibs(lua_State *L); /* LuaJIT's lualib.h is shadowed */

/* A deep compare in the receiving state: NaN equals NaN, -0.0 differs from 0.0, cdata by
 * type and value. */
static const char deq_src[] =
    "function deq(a, b)\n"
    "  if type(a) ~= type(b) then return false end\n"
    "  if type(a) == 'number' then\n"
    "    if a ~= a then return b ~= b end\n"
    "    if a == 0 and b == 0 then return 1/a == 1/b end\n"
    "    return a == b\n"
    "  end\n"
    "  if type(a) == 'cdata' then return tostring(a) == tostring(b) end\n"
    "  if type(a) ~= 'table' then return a == b end\n"
    "  for k, v in pairs(a) do if not deq(v, b[k]) then return false end end\n"
    "  for k in pairs(b) do if a[k] == nil then return false end end\n"
    "  return true\n"
    "end\n";

typedef lua_pair fixture; /* the receiver opens the FFI only where a test says so */

static int setup(void **state)
{
    lua_State *dst = luaL_newstate();
    luaL_openlibs(dst);
    *state = lua_pair_new(dst, deq_src);
    return 0;
}

static int teardown(void **state)
{
    lua_pair_free(*state);
    return 0;
}

/* Encodes expr both ways in src; returns the flat length (0: not flat) and leaves the codec's
 * bytes in f->buf. */
static size_t both_encodings(fixture *f, const char *expr, char *flat)
{
    push_expr(f->src, expr);
    size_t n = flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, NULL);
    wire_buf_reset(&f->buf);
    if (codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err) != 0)
        fail_msg("codec_encode %s: %s", expr, f->err);
    lua_pop(f->src, 1);
    return n;
}

/* expr is flat: the same bytes as the codec's, decodable, and decoded equal to expr. */
static void check_flat(fixture *f, const char *expr)
{
    char flat[FLAT_MAX];
    size_t n = both_encodings(f, expr, flat);
    if (n == 0)
        fail_msg("%s: not flat", expr);
    if (n != f->buf.len || memcmp(flat, f->buf.data, n) != 0)
        fail_msg("%s: %zu flat bytes, %zu from the codec, or they differ", expr, n, f->buf.len);
    if (!flat_decodable(f->dst, flat, n))
        fail_msg("%s: not decodable", expr);
    int top = lua_gettop(f->dst);
    flat_decode(f->dst, flat, n, NULL);
    assert_int_equal(lua_gettop(f->dst), top + 1);
    lua_pair_expect_got(f, expr, expr);
    lua_settop(f->dst, top);
}

static void scalars_are_flat_and_exact(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "nil",
        "true",
        "false",
        "0",
        "-0.0",
        "0/0",
        "1/0",
        "-1/0",
        "127",
        "128",
        "-1",
        "-128",
        "-129",
        "32767",
        "-32769",
        "2^31 - 1",
        "-2^31",
        "2^31",
        "2^53",
        "1.5",
        "-1e-300",
        "''",
        "'a\\0b\\0'",
        "string.rep('x', 63)",
        "string.rep('y', 64)",
        "string.rep('z', 127)",
        "string.rep('\\0', 128)",
        "string.rep('w', 250)",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
        check_flat(f, exprs[i]);
}

static void int64_cdata_are_flat_where_the_ffi_is_loaded(void **state)
{
    fixture *f = *state;
    if (luaL_dostring(f->src, "ffi = require 'ffi'") != 0)
        fail_msg("%s", lua_tostring(f->src, -1));
    char flat[FLAT_MAX];
    size_t n = both_encodings(f, "{v = ffi.new('int64_t', -5)}", flat);
    assert_true(n > 0);
    /* the receiver has no C types yet: the codec's way, which loads them */
    assert_false(flat_decodable(f->dst, flat, n));
    /* so the encoder says which messages hold one (a message without is taken unchecked) */
    static const char *const exprs[] = {"{v = ffi.new('int64_t', -5)}",
                                        "ffi.new('uint64_t', 1)",
                                        "{1, 2ULL}",
                                        "{v = 5}",
                                        "7",
                                        "{1, 2, x = 'y'}"};
    for (int i = 0; i < 6; i++) {
        push_expr(f->src, exprs[i]);
        int cdata = -1;
        assert_true(flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, &cdata) > 0);
        assert_int_equal(cdata, i < 3);
        lua_pop(f->src, 1);
    }
    if (luaL_dostring(f->dst, "ffi = require 'ffi'") != 0)
        fail_msg("%s", lua_tostring(f->dst, -1));
    check_flat(f, "ffi.new('int64_t', -5)");
    check_flat(f, "ffi.new('uint64_t', -1)");
    check_flat(f, "{a = 1LL, b = 2ULL, 3LL}");
    check_flat(f, "-0x8000000000000000LL");
}

static void flat_tables_are_exact(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "{}",
        "{hop = 7}",
        "{n = -1}",
        "{s = string.rep('v', 100)}",
        "{[string.rep('k', 70)] = true}",
        "{1, 2, x = 'y'}",
        "{1, 2, 3}",
        "{'a', true, false, 0.5}",
        "{1, 2, x = 'y', z = -0.0}",
        "{a = 0/0, ['two words'] = '\\0', [''] = 1/0}",
        "(function() local t = {} for i = 1, 100 do t[i] = i end return t end)()",
        "(function() local t = {} for i = 1, 40 do t['k' .. i] = i end return t end)()",
        "(function() local t = {1, 2, 3, 4} t[4] = nil t[3] = nil return t end)()",
        "(function() local t = {a = 1, b = 2} t.a = nil return t end)()",
        "setmetatable({x = 1}, {__index = function() error('no') end})",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
        check_flat(f, exprs[i]);
}

static void everything_else_is_left_to_the_codec(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "{{}}",                       /* nesting */
        "{t = {1}}",                  /* nesting */
        "{[10] = 'ten'}",             /* a number key outside the sequence */
        "{[1.5] = 1}",                /* a float key */
        "{[true] = 1}",               /* a boolean key */
        "{[0] = 1}",                  /* key 0 */
        "{1, nil, 3}",                /* a hole */
        "string.rep('x', 300)",       /* too big */
        "{s = string.rep('x', 250)}", /* too big with its key */
        "(function() local t = {} for i = 1, 200 do t[i] = i end return t end)()",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        char flat[FLAT_MAX];
        if (both_encodings(f, exprs[i], flat) != 0)
            fail_msg("%s: taken as flat", exprs[i]);
        /* and the codec's bytes for it are not taken either */
        if (flat_decodable(f->dst, f->buf.data, f->buf.len))
            fail_msg("%s: the codec's bytes taken as flat", exprs[i]);
    }
    /* a large hash part, almost empty: the codec walks it (its bytes are flat all the same) */
    char flat[FLAT_MAX];
    assert_int_equal(both_encodings(f,
                                    "(function() local t = {} for i = 1, 300 do t['k' .. i] = i "
                                    "end for i = 2, 300 do t['k' .. i] = nil end return t end)()",
                                    flat),
                     0);
    assert_true(flat_decodable(f->dst, f->buf.data, f->buf.len));
    /* what the codec refuses, the flat encoder leaves to it */
    push_expr(f->src, "{f = print}");
    assert_int_equal(flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, NULL), 0);
    lua_pop(f->src, 1);
    lua_pushlightuserdata(f->src, f);
    assert_int_equal(flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, NULL), 0);
    lua_pop(f->src, 1);
    /* no value there */
    assert_int_equal(flat_encode(f->src, lua_gettop(f->src) + 1, flat, FLAT_MAX, NULL), 0);
    /* a buffer too small for the value */
    push_expr(f->src, "{hop = 1}");
    assert_int_equal(flat_encode(f->src, lua_gettop(f->src), flat, 4, NULL), 0);
    assert_int_equal(flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, NULL), 8);
    lua_pop(f->src, 1);
}

static void bytes_it_cannot_take_are_refused_before_anything_is_made(void **state)
{
    fixture *f = *state;
    char flat[FLAT_MAX];
    size_t n = both_encodings(f, "{1, 'two', x = 3.5, s = 'four'}", flat);
    assert_true(n > 0);
    /* every truncation */
    for (size_t len = 0; len < n; len++)
        assert_false(flat_decodable(f->dst, flat, len));
    /* a trailing byte */
    flat[n] = 0;
    assert_false(flat_decodable(f->dst, flat, n + 1));
    /* a refs prefix, a channel tag, an interned record, a table in a table, a nil value
     * in a pair, a number key: the codec's */
    static const unsigned char refused[][12] = {
        {WIRE_REFS, 1, 2, 3, 4, 5, 6, 7, 8, WIRE_NIL},
        {WIRE_TX, 1, 2, 3, 4, 5, 6, 7, 8},
        {WIRE_INTERN, 1, 2, 3, 4, 5, 6, 7, 8},
        {WIRE_TABLE, 1, 0, WIRE_TABLE, 0, 0},
        {WIRE_TABLE, 0, 1, WIRE_SSTR + 1, 'k', WIRE_NIL},
        {WIRE_TABLE, 0, 1, WIRE_FIXINT + 5, WIRE_TRUE},
        {WIRE_TABLE, 0x80, 0x01, 0},
    };
    static const size_t lens[] = {10, 9, 9, 6, 6, 5, 4};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        if (flat_decodable(f->dst, (const char *)refused[i], lens[i]))
            fail_msg("refused[%zu] taken", i);
    /* a string length past the end */
    const unsigned char longer[] = {WIRE_STR, 0x90, 0x01, 'a'};
    assert_false(flat_decodable(f->dst, (const char *)longer, sizeof longer));
}

/* Random bytes: whatever flat_decodable takes decodes without harm (under the sanitizers). */
static void random_bytes_never_harm_the_decoder(void **state)
{
    fixture *f = *state;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    unsigned char b[24];
    int taken = 0, top = lua_gettop(f->dst);
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = 1 + (size_t)(x % sizeof b);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = (unsigned char)x;
        }
        /* steer toward the tags it knows */
        if (iter & 1)
            b[0] = WIRE_TABLE;
        if (flat_decodable(f->dst, (const char *)b, len)) {
            flat_decode(f->dst, (const char *)b, len, NULL);
            lua_settop(f->dst, top);
            taken++;
        }
    }
    assert_true(taken > 0);
}

/* Decodes the flat bytes of expr (made in src) into dst's global `got`. */
static void decode_into_got(fixture *f, const char *expr)
{
    char flat[FLAT_MAX];
    push_expr(f->src, expr);
    size_t n = flat_encode(f->src, lua_gettop(f->src), flat, FLAT_MAX, NULL);
    lua_pop(f->src, 1);
    if (n == 0 || !flat_decodable(f->dst, flat, n))
        fail_msg("%s: not flat", expr);
    flat_decode(f->dst, flat, n, NULL);
    lua_setglobal(f->dst, "got");
}

static void dst_true(fixture *f, const char *code) { lua_check_true(f->dst, code); }

/* A shape seen twice in a row is made from a template from then on: every copy is the
 * receiver's own, with this message's values, whatever was done to the copies before and
 * across full collections; more shapes than template slots take turns. */
static void records_from_templates_are_fresh_copies(void **state)
{
    fixture *f = *state;
    char expr[256], check[512];
    for (int i = 0; i < 50; i++) {
        snprintf(expr, sizeof expr, "{hop = %d, name = 'n%d', flag = %s}", i, i,
                 i % 2 ? "true" : "false");
        decode_into_got(f, expr);
        snprintf(check, sizeof check,
                 "local n = 0 for _ in pairs(got) do n = n + 1 end "
                 "return n == 3 and got.hop == %d and got.name == 'n%d' and got.flag == %s",
                 i, i, i % 2 ? "true" : "false");
        dst_true(f, check);
        /* the receiver's to change: the next copy must not show it */
        dst_true(f, "got.hop = -1 got.name = nil got.extra = {} return true");
        if (i % 10 == 9)
            dst_true(f, "collectgarbage() collectgarbage() return true");
    }
    /* twenty shapes, more than there are slots, each sent four times over */
    for (int round = 0; round < 4; round++) {
        for (int k = 0; k < 20; k++) {
            snprintf(expr, sizeof expr, "{k%d = %d, v = %d}", k, round * 100 + k, k);
            decode_into_got(f, expr);
            snprintf(check, sizeof check,
                     "local n = 0 for _ in pairs(got) do n = n + 1 end "
                     "return n == 2 and got.k%d == %d and got.v == %d",
                     k, round * 100 + k, k);
            dst_true(f, check);
        }
    }
    /* a key twice (no encoder writes one): set again, the last value wins, as in the codec */
    const unsigned char twice[] = {
        WIRE_TABLE, 0, 2, WIRE_SSTR + 1, 'k', WIRE_FIXINT + 1, WIRE_SSTR + 1, 'k', WIRE_FIXINT + 2};
    for (int i = 0; i < 3; i++) {
        assert_true(flat_decodable(f->dst, (const char *)twice, sizeof twice));
        flat_decode(f->dst, (const char *)twice, sizeof twice, NULL);
        lua_setglobal(f->dst, "got");
        dst_true(f, "local n = 0 for _ in pairs(got) do n = n + 1 end return n == 1 and "
                    "got.k == 2");
    }
}

/* A receiver keeps the string of a one-key record's key once it has seen it twice in a row:
 * the decoded key is that very string, it outlives every table that held it (anchored in
 * the state), and another key of the same length and ends is still told apart. */
static void a_receivers_one_key_strings_are_kept_alive_and_exact(void **state)
{
    fixture *f = *state;
    actor *a = calloc(1, sizeof *a);
    assert_non_null(a);
    char flat[FLAT_MAX];
    for (int i = 0; i < 3; i++) {
        size_t n = both_encodings(f, "{hop = 5}", flat);
        assert_true(n > 0 && flat_decodable(f->dst, flat, n));
        flat_decode(f->dst, flat, n, a);
        lua_setglobal(f->dst, "got");
        dst_true(f, "return got.hop == 5");
        assert_true(i == 0 ? a->vm.flat_key == NULL : a->vm.flat_key != NULL);
    }
    /* nothing of the receiver's own refers to "hop" now; the blocks freed by the collection
     * go to strings of the same size */
    dst_true(f, "got = nil collectgarbage() collectgarbage() "
                "junk = {} for i = 1, 3000 do junk[i] = string.format('%03d', i) end "
                "return true");
    lua_pushliteral(f->dst, "hop");
    assert_ptr_equal(lua_topointer(f->dst, -1), a->vm.flat_key);
    lua_pop(f->dst, 1);
    size_t n = both_encodings(f, "{hip = 6}", flat);
    flat_decode(f->dst, flat, n, a);
    lua_setglobal(f->dst, "got");
    dst_true(f, "local k = next(got) return k == 'hip' and got.hip == 6 and next(got, k) == nil");
    free(a);
}

/* Pushes the values of the Lua expression list exprs in L; their count. */
static int push_list(lua_State *L, const char *exprs)
{
    char chunk[4096];
    snprintf(chunk, sizeof chunk, "return %s", exprs);
    int top = lua_gettop(L);
    if (luaL_loadstring(L, chunk) != 0 || lua_pcall(L, 0, LUA_MULTRET, 0) != 0)
        fail_msg("%s: %s", exprs, lua_tostring(L, -1));
    return lua_gettop(L) - top;
}

/* The argument list of exprs, as the codec writes it value by value (a count byte, then each
 * value's own bytes): into want. */
static size_t codec_list(fixture *f, const char *exprs, char *want, size_t cap)
{
    int n = push_list(f->src, exprs);
    int first = lua_gettop(f->src) - n + 1;
    size_t len = 0;
    want[len++] = (char)n;
    for (int i = 0; i < n; i++) {
        wire_buf_reset(&f->buf);
        if (codec_encode(f->src, first + i, &f->buf, "arg", f->err, sizeof f->err) != 0)
            fail_msg("codec_encode %s: %s", exprs, f->err);
        assert_true(len + f->buf.len <= cap);
        memcpy(want + len, f->buf.data, f->buf.len);
        len += f->buf.len;
    }
    lua_settop(f->src, first - 1);
    return len;
}

/* A list of scalars (a spawn's arguments): the fast path writes the codec's bytes, and
 * codec_encode_args (which takes it) too; the codec decodes them into equal values. */
static void argument_lists_of_scalars_are_flat_and_exact(void **state)
{
    fixture *f = *state;
    static const char *const lists[] = {
        "",
        "1",
        "12345678, 7",
        "nil, true, false, nil",
        "-0.0, 0/0, 1/0, -2^31, 2^53, 1.5",
        "'', 'pid', string.rep('s', 63), string.rep('l', 200)",
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13",
        "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15",
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        char want[2048], flat[2048];
        size_t wn = codec_list(f, lists[i], want, sizeof want);
        int n = push_list(f->src, lists[i]);
        int first = lua_gettop(f->src) - n + 1;
        size_t fn = flat_encode_args(f->src, first, n, flat, sizeof flat);
        if (fn != wn || memcmp(flat, want, wn) != 0)
            fail_msg("(%s): %zu flat bytes, %zu from the codec, or they differ", lists[i], fn, wn);
        wire_buf_reset(&f->buf);
        assert_int_equal(codec_encode_args(f->src, first, n, &f->buf, f->err, sizeof f->err), 0);
        assert_true(f->buf.len == wn && memcmp(f->buf.data, want, wn) == 0);
        lua_settop(f->src, first - 1);
        int top = lua_gettop(f->dst), got;
        if (codec_decode_args(f->dst, flat, fn, &got, f->err, sizeof f->err) != 0)
            fail_msg("codec_decode_args (%s): %s", lists[i], f->err);
        assert_int_equal(got, n);
        assert_int_equal(lua_gettop(f->dst), top + n);
        lua_pack_top(f->dst, n);
        char expr[4096];
        snprintf(expr, sizeof expr, "{%s}", lists[i]);
        lua_pair_expect_got(f, expr, lists[i]);
        lua_settop(f->dst, top);
    }
}

/* A table, an int64 cdata, more than 127 values or values too big leave the list to the
 * codec, and codec_encode_args still writes them; a count of 14 (whose byte is the refs
 * prefix's tag) is read by the codec as a count. */
static void other_argument_lists_are_left_to_the_codec(void **state)
{
    fixture *f = *state;
    static const char *const lists[] = {
        "1, {}",
        "{x = 1}",
        "require('ffi').new('int64_t', 5)",
        "string.rep('b', 300)",
    };
    char flat[4096];
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        int n = push_list(f->src, lists[i]);
        int first = lua_gettop(f->src) - n + 1;
        assert_int_equal(flat_encode_args(f->src, first, n, flat, 256), 0);
        lua_settop(f->src, first - 1);
    }
    lua_settop(f->src, 0);
    assert_true(lua_checkstack(f->src, 130));
    for (int i = 0; i < 128; i++)
        lua_pushinteger(f->src, i);
    assert_int_equal(flat_encode_args(f->src, 1, 128, flat, sizeof flat), 0);
    lua_settop(f->src, 0);
    /* fourteen scalars: the count's byte is the refs prefix's tag, which the codec tells
     * from a prefix by its cookie */
    int n = push_list(f->src, "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14");
    size_t fn = flat_encode_args(f->src, 1, n, flat, sizeof flat);
    assert_true(fn > 0 && flat[0] == WIRE_REFS_ARGS);
    int top = lua_gettop(f->dst), got = 0;
    assert_int_equal(codec_decode_args(f->dst, flat, fn, &got, f->err, sizeof f->err), 0);
    assert_int_equal(got, 14);
    assert_int_equal(lua_tointeger(f->dst, -1), 14);
    lua_settop(f->dst, top);
    lua_settop(f->src, 0);
    /* codec_encode_args takes what the fast path leaves */
    n = push_list(f->src, "1, {x = {2}}, require('ffi').new('int64_t', 5), string.rep('c', 300)");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode_args(f->src, 1, n, &f->buf, f->err, sizeof f->err), 0);
    lua_settop(f->src, 0);
    if (luaL_dostring(f->dst, "require 'ffi'") != 0)
        fail_msg("%s", lua_tostring(f->dst, -1));
    assert_int_equal(
        codec_decode_args(f->dst, f->buf.data, f->buf.len, &got, f->err, sizeof f->err), 0);
    assert_int_equal(got, 4);
    lua_pack_top(f->dst, 4);
    lua_pair_expect_got(f, "{1, {x = {2}}, 5LL, string.rep('c', 300)}", "a list the codec wrote");
    lua_settop(f->dst, top);
}

/* -- Nested values (flat_encode_deep, flat_decode_deep) -------------------------------- */

/* expr takes the nested fast path: the bytes the codec's own walk writes, decodable, and
 * decoded equal to expr, both by the fast path and by the codec's own decoder. */
static void check_deep(fixture *f, const char *expr)
{
    char deep[FLAT_DEEP_MAX];
    flat_out r = {.ntx = -1, .cdata = -1};
    push_expr(f->src, expr);
    size_t n = flat_encode_deep(f->src, lua_gettop(f->src), deep, sizeof deep, NULL, &r);
    wire_buf_reset(&f->buf);
    if (codec_encode_general(f->src, -1, &f->buf, "msg", f->err, sizeof f->err) != 0)
        fail_msg("codec_encode_general %s: %s", expr, f->err);
    lua_pop(f->src, 1);
    if (n == 0)
        fail_msg("%s: declined", expr);
    assert_int_equal(r.ntx, 0);
    assert_int_equal(r.cdata, 0);
    if (n != f->buf.len || memcmp(deep, f->buf.data, n) != 0)
        fail_msg("%s: %zu bytes, %zu from the codec's walk, or they differ", expr, n, f->buf.len);
    if (!flat_deep_decodable(f->dst, deep, n, 0))
        fail_msg("%s: not decodable", expr);
    int top = lua_gettop(f->dst);
    flat_decode_deep(f->dst, deep, n, NULL);
    assert_int_equal(lua_gettop(f->dst), top + 1);
    lua_pair_expect_got(f, expr, expr);
    if (codec_decode_general(f->dst, deep, n, f->err, sizeof f->err) != 0)
        fail_msg("codec_decode_general %s: %s", expr, f->err);
    lua_pair_expect_got(f, expr, expr);
    /* and codec_encode, which takes the fast path, writes those bytes too */
    push_expr(f->src, expr);
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_true(f->buf.len == n && memcmp(deep, f->buf.data, n) == 0);
    /* a send marks such bytes (no int64: r.cdata 0, above) and they are taken without the
     * check, to the same value */
    assert_int_equal(codec_decode_marked(f->dst, deep, n, f->err, sizeof f->err), 0);
    lua_pair_expect_got(f, expr, expr);
    lua_settop(f->dst, top);
}

static void nested_tables_are_exact(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "{}",
        "{1, 2, 3}",
        "{x = 1}",
        "{a = {}}",
        "{a = {b = {c = {d = {e = {f = {g = 'deep'}}}}}}}",
        "{tag = 'call', req = 41, from = {pid = 7, seq = 3}}",
        "{{1, 2}, {3, x = {4}}, 'five', n = {true, false}}",
        "{list = {{id = 1, name = 'a'}, {id = 2, name = 'b'}, {id = 3, name = 'c'}}}",
        "{pos = {x = 1.5, y = -2.25, z = 0/0}, vel = {x = 1/0, y = -0.0}}",
        "{s = string.rep('x', 200), t = {string.rep('y', 100)}}",
        "{a = {b = {c = {d = {e = {f = {g = {h = 'eight tables'}}}}}}}}",
        /* a shared subtable is copied at each place, as the codec does */
        "(function() local t = {1, 2} return {a = t, b = t, c = {t}} end)()",
        "{key = 'value', nested = {key = 'value', again = {key = 'value'}}}",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
        check_deep(f, exprs[i]);
}

/* Declined by the encoder (0), with the codec's walk then writing or refusing it. */
static void nested_leaves_the_rest_to_the_codec(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "7",                                                       /* a scalar: flat's */
        "'text'",                                                  /* likewise */
        "{a = {b = {c = {d = {e = {f = {g = {h = {i = 1}}}}}}}}}", /* nine tables deep */
        "{[1] = {}, [3] = {}}",                                /* number keys in the hash part */
        "(function() local t = {} t.self = t return t end)()", /* cyclic: the codec refuses */
        "{a = {[2] = 'sparse'}}",
        "{a = {[true] = 1}}",
        "{a = {[1.5] = 1}}",
        "{a = {{}, nil, {}}}",
        "{a = {f = print}}",
        "{a = {co = coroutine.create(print)}}",
        "{a = {u = newproxy()}}",
        "{big = {string.rep('x', 600), string.rep('y', 600)}}", /* past FLAT_DEEP_MAX */
    };
    char deep[FLAT_DEEP_MAX];
    flat_out r;
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        push_expr(f->src, exprs[i]);
        size_t n = flat_encode_deep(f->src, lua_gettop(f->src), deep, sizeof deep, NULL, &r);
        lua_pop(f->src, 1);
        if (n != 0)
            fail_msg("%s: taken (%zu bytes)", exprs[i], n);
    }
    /* a nine-deep table's bytes (the codec's) are refused by the fast decoder, taken by the
     * codec's own */
    push_expr(f->src, exprs[2]);
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_false(flat_deep_decodable(f->dst, f->buf.data, f->buf.len, 0));
    assert_int_equal(codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err), 0);
    lua_pair_expect_got(f, exprs[2], exprs[2]);
    /* and the cyclic table is still named as such */
    push_expr(f->src, exprs[4]);
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), -1);
    lua_pop(f->src, 1);
    assert_non_null(strstr(f->err, "cyclic"));
    /* an int64 takes the fast path, but unmarked: the receiver checks for its FFI */
    if (luaL_dostring(f->src, "ffi = require 'ffi'") != 0)
        fail_msg("%s", lua_tostring(f->src, -1));
    push_expr(f->src, "{v = {ffi.new('int64_t', -5)}}");
    size_t k = flat_encode_deep(f->src, lua_gettop(f->src), deep, sizeof deep, NULL, &r);
    lua_pop(f->src, 1);
    assert_true(k > 0);
    assert_true(r.cdata);                                  /* so a send leaves it unmarked */
    assert_false(flat_deep_decodable(f->dst, deep, k, 0)); /* no FFI there */
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Writes a random value (a table at depth 0) into r[at..cap): its end, or 0 if out of room. */
static size_t gen_value(unsigned char *r, size_t cap, size_t at, int depth, uint64_t *x)
{
    uint64_t k = xorshift(x);
    if (depth == 0 || (k % 4 == 0 && depth < 10)) {
        if (cap - at < 3)
            return 0;
        unsigned narr = (unsigned)(k >> 8) % 3, npairs = (unsigned)(k >> 16) % 3;
        r[at++] = WIRE_TABLE;
        r[at++] = (unsigned char)narr;
        r[at++] = (unsigned char)npairs;
        for (unsigned i = 0; i < narr && at; i++)
            at = gen_value(r, cap, at, depth + 1, x);
        for (unsigned i = 0; i < npairs && at; i++) {
            if (cap - at < 2)
                return 0;
            r[at++] = WIRE_SSTR + 1;
            r[at++] = (unsigned char)('a' + xorshift(x) % 3);
            at = gen_value(r, cap, at, depth + 1, x);
        }
        return at;
    }
    if (cap - at < 2)
        return 0;
    switch ((k >> 8) % 5) {
    case 0:
        r[at++] = (unsigned char)(WIRE_FIXINT + (k >> 16) % 100);
        break;
    case 1:
        r[at++] = WIRE_SSTR + 1;
        r[at++] = 'v';
        break;
    case 2:
        r[at++] = WIRE_TRUE;
        break;
    case 3:
        r[at++] = WIRE_I8;
        r[at++] = (unsigned char)(k >> 24);
        break;
    default:
        r[at++] = WIRE_NIL;
        break;
    }
    return at;
}

/* The decoder checks every byte before it makes anything: a tx's tag only in trusted bytes,
 * and nothing cut short or malformed; random bytes neither crash it nor leave the stack
 * changed when refused. */
static void nested_bytes_are_checked_before_anything_is_made(void **state)
{
    fixture *f = *state;
    /* {t = {<tx>}} by hand: a table of one pair whose value is a table of one tx */
    unsigned char b[32];
    size_t n = 0;
    b[n++] = WIRE_TABLE;
    b[n++] = 0;
    b[n++] = 1;
    b[n++] = WIRE_SSTR + 1;
    b[n++] = 't';
    b[n++] = WIRE_TABLE;
    b[n++] = 1;
    b[n++] = 0;
    b[n++] = WIRE_TX;
    memset(b + n, 0x5a, 8);
    n += 8;
    assert_false(flat_deep_decodable(f->dst, (const char *)b, n, 0));
    assert_true(flat_deep_decodable(f->dst, (const char *)b, n, 1));
    for (size_t cut = 0; cut < n; cut++)
        assert_false(flat_deep_decodable(f->dst, (const char *)b, cut, 1));
    /* a nil value in a pair is the codec's (it keeps the key's pair out) */
    unsigned char nilv[] = {WIRE_TABLE,    0,   1,       WIRE_SSTR + 1, 'k', WIRE_TABLE, 0, 1,
                            WIRE_SSTR + 1, 'j', WIRE_NIL};
    assert_false(flat_deep_decodable(f->dst, (const char *)nilv, sizeof nilv, 0));
    /* a key that is not a string */
    unsigned char numkey[] = {WIRE_TABLE, 0, 1, WIRE_TABLE, 0, 0, WIRE_FIXINT + 1};
    assert_false(flat_deep_decodable(f->dst, (const char *)numkey, sizeof numkey, 0));

    uint64_t x = 0x2545F4914F6CDD1Dull;
    unsigned char r[64];
    int taken = 0, top = lua_gettop(f->dst);
    for (int iter = 0; iter < 100000; iter++) {
        /* a random nested value by a small grammar, then, every other time, a byte changed
         * or the end cut */
        size_t len = gen_value(r, sizeof r, 0, 0, &x);
        if (len == 0)
            continue;
        if (iter & 1) {
            size_t at = (size_t)(xorshift(&x) % len);
            if (xorshift(&x) & 1)
                r[at] = (unsigned char)xorshift(&x);
            else
                len = at + 1;
        }
        r[0] = WIRE_TABLE;
        /* untrusted: a tx's tag is refused, so no fake channel address is ever pushed */
        if (flat_deep_decodable(f->dst, (const char *)r, len, 0)) {
            flat_decode_deep(f->dst, (const char *)r, len, NULL);
            assert_int_equal(lua_gettop(f->dst), top + 1);
            assert_int_equal(lua_type(f->dst, -1), LUA_TTABLE);
            lua_settop(f->dst, top);
            taken++;
        }
        assert_int_equal(lua_gettop(f->dst), top);
    }
    assert_true(taken > 100);
}

/* Txs: a fake endpoint kind (a userdata whose payload starts with a magic word and holds a
 * channel address), with the references counted. */
#define FAKE_MAGIC 0x7478u
struct fake_tx {
    unsigned magic;
    void *chan;
};
static int fake_retains, fake_releases, fake_pushes;
static void *fake_pushed[4];

static int fake_endpoint(void *ud, size_t len, void **chan)
{
    const struct fake_tx *t = ud;
    if (len != sizeof *t || t->magic != FAKE_MAGIC)
        return 0;
    *chan = t->chan;
    return WIRE_REF_TX;
}

static void fake_push(lua_State *L, void *chan, int kind)
{
    assert_int_equal(kind, WIRE_REF_TX);
    struct fake_tx *t = lua_newuserdata(L, sizeof *t);
    t->magic = FAKE_MAGIC;
    t->chan = chan;
    if (fake_pushes < 4)
        fake_pushed[fake_pushes] = chan;
    fake_pushes++;
}

static void fake_retain(void *chan, int kind)
{
    (void)chan;
    assert_int_equal(kind, WIRE_REF_TX);
    fake_retains++;
}

static void fake_release(void *chan, int kind)
{
    (void)chan;
    (void)kind;
    fake_releases++;
}

static void *fake_take(void *obj, int kind)
{
    (void)kind;
    return obj;
}

static int push_fake_tx(lua_State *L)
{
    struct fake_tx *t = lua_newuserdata(L, sizeof *t);
    t->magic = FAKE_MAGIC;
    t->chan = (void *)(uintptr_t)luaL_checkinteger(L, 1);
    return 1;
}

static void nested_txs_carry_their_references(void **state)
{
    fixture *f = *state;
    static const codec_endpoints eps = {fake_endpoint, fake_push};
    static const wire_refs_ops ops = {fake_retain, fake_release, fake_take};
    codec_set_endpoints(&eps);
    wire_set_refs_ops(&ops);
    fake_retains = fake_releases = fake_pushes = 0;
    lua_register(f->src, "fake_tx", push_fake_tx);
    const char *expr = "{tag = 'call', req = {1, 2}, from = {pid = 9, tx = fake_tx(0x1000)}, "
                       "more = {fake_tx(0x2000)}}";

    /* the fast path's bytes: the refs prefix, then the codec's walk's bytes */
    push_expr(f->src, expr);
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    assert_int_equal(fake_retains, 2);
    wire_buf general;
    wire_buf_init(&general);
    assert_int_equal(codec_encode_general(f->src, -1, &general, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_int_equal(fake_retains, 4);
    assert_int_equal(f->buf.len, general.len);
    assert_true(wire_refs_live(f->buf.data, f->buf.len, WIRE_REFS));
    assert_memory_equal(f->buf.data, general.data, general.len);

    /* decoded: each tx is made by the push, which takes the message's reference over */
    int top = lua_gettop(f->dst);
    assert_true(
        flat_deep_decodable(f->dst, f->buf.data + WIRE_REFS_LEN, f->buf.len - WIRE_REFS_LEN, 1));
    assert_int_equal(codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err), 0);
    assert_int_equal(fake_pushes, 2);
    assert_true((fake_pushed[0] == (void *)0x1000 && fake_pushed[1] == (void *)0x2000) ||
                (fake_pushed[0] == (void *)0x2000 && fake_pushed[1] == (void *)0x1000));
    lua_setglobal(f->dst, "got");
    lua_check_true(f->dst, "return got.tag == 'call' and got.req[2] == 2 and got.from.pid == 9 "
                           "and type(got.from.tx) == 'userdata' and type(got.more[1]) == "
                           "'userdata'");
    assert_int_equal(lua_gettop(f->dst), top);
    /* taken: freeing the bytes now releases nothing, and a second decode, even as marked,
     * does not trust their tx tags again */
    wire_release(f->buf.data, f->buf.len);
    assert_int_equal(fake_releases, 0);
    assert_int_equal(codec_decode_marked(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err),
                     -1);
    assert_int_equal(fake_pushes, 2);
    assert_int_equal(lua_gettop(f->dst), top);
    /* a marked message's txs (the pass found no int64: a send marks it): taken over without
     * the check */
    push_expr(f->src, expr);
    flat_out r;
    char pass[FLAT_DEEP_MAX];
    assert_true(flat_encode_deep(f->src, lua_gettop(f->src), pass, sizeof pass, fake_endpoint, &r) >
                0);
    assert_false(r.cdata);
    assert_int_equal(r.ntx, 2);
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_int_equal(fake_retains, 6);
    assert_int_equal(codec_decode_marked(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err),
                     0);
    assert_int_equal(fake_pushes, 4);
    lua_pop(f->dst, 1);
    wire_release(f->buf.data, f->buf.len);
    assert_int_equal(fake_releases, 0);
    /* the codec's copy, freed undelivered, gives its two references back */
    wire_release(general.data, general.len);
    assert_int_equal(fake_releases, 2);
    wire_buf_free(&general);

    /* more txs than the fast path keeps: the codec's walk, with all their references */
    push_expr(f->src, "(function() local t = {} for i = 1, 20 do t[i] = fake_tx(i) end "
                      "return {t = t} end)()");
    assert_int_equal(
        flat_encode_deep(f->src, lua_gettop(f->src), pass, sizeof pass, fake_endpoint, &r), 0);
    wire_buf_reset(&f->buf);
    fake_retains = 0;
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_int_equal(fake_retains, 20);
    fake_releases = 0;
    wire_release(f->buf.data, f->buf.len);
    assert_int_equal(fake_releases, 20);
    codec_set_endpoints(NULL);
    wire_set_refs_ops(NULL);
}

/* A double's bytes may hold a NaN whose payload LuaJIT would read as another type's tag
 * (its values are NaN-boxed): both decoders make the one NaN LuaJIT makes, as the codec's
 * lua_pushnumber does. */
static void nan_payloads_decode_as_plain_nans(void **state)
{
    fixture *f = *state;
    static const unsigned char nan_bits[8] = {0x00, 0x00, 0x08, 0xab, 0x3d, 0xff, 0xff, 0xff};
    unsigned char flat[16], deep[24];
    size_t n = 0, m = 0;
    /* {<nan>} */
    flat[n++] = WIRE_TABLE;
    flat[n++] = 1;
    flat[n++] = 0;
    flat[n++] = WIRE_DOUBLE;
    memcpy(flat + n, nan_bits, 8);
    n += 8;
    /* {{<nan>}} */
    deep[m++] = WIRE_TABLE;
    deep[m++] = 1;
    deep[m++] = 0;
    memcpy(deep + m, flat, n);
    m += n;
    int top = lua_gettop(f->dst);
    assert_true(flat_decodable(f->dst, (const char *)flat, n));
    flat_decode(f->dst, (const char *)flat, n, NULL);
    lua_setglobal(f->dst, "got");
    dst_true(f, "return type(got[1]) == 'number' and got[1] ~= got[1]");
    assert_true(flat_deep_decodable(f->dst, (const char *)deep, m, 0));
    flat_decode_deep(f->dst, (const char *)deep, m, NULL);
    lua_setglobal(f->dst, "got");
    dst_true(f, "return type(got[1][1]) == 'number' and got[1][1] ~= got[1][1]");
    assert_int_equal(lua_gettop(f->dst), top);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(scalars_are_flat_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(int64_cdata_are_flat_where_the_ffi_is_loaded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(flat_tables_are_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(everything_else_is_left_to_the_codec, setup, teardown),
        cmocka_unit_test_setup_teardown(bytes_it_cannot_take_are_refused_before_anything_is_made,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(random_bytes_never_harm_the_decoder, setup, teardown),
        cmocka_unit_test_setup_teardown(records_from_templates_are_fresh_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(a_receivers_one_key_strings_are_kept_alive_and_exact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(argument_lists_of_scalars_are_flat_and_exact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(other_argument_lists_are_left_to_the_codec, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(nested_tables_are_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(nested_leaves_the_rest_to_the_codec, setup, teardown),
        cmocka_unit_test_setup_teardown(nested_bytes_are_checked_before_anything_is_made, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(nested_txs_carry_their_references, setup, teardown),
        cmocka_unit_test_setup_teardown(nan_payloads_decode_as_plain_nans, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
