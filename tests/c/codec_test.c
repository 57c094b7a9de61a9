/* codec_test: round trips of every sendable kind between two independent lua_States, refusals
 * with their paths, hostile input to the decoder, and a micro-benchmark against string.buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <lauxlib.h>

#include "vm/codec.h"
#include "lua_pair_helper.h"

/* Lua side of the checks: a deep compare (NaN equals NaN, -0.0 differs from 0.0, int64 cdata
 * compare by value and type, table keys compared by count) in the receiving state. */
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
    "  if getmetatable(a) ~= nil or getmetatable(b) ~= nil then return false end\n"
    "  local ta, tb = 0, 0\n"
    "  for k, v in pairs(a) do\n"
    "    if type(k) == 'table' then ta = ta + 1\n"
    "    elseif not deq(v, b[k]) then return false end\n"
    "  end\n"
    "  for k, v in pairs(b) do\n"
    "    if type(k) == 'table' then tb = tb + 1\n"
    "    elseif a[k] == nil then return false end\n"
    "  end\n"
    "  return ta == tb\n"
    "end\n";

typedef lua_pair fixture; /* the receiver: base, string, table, math; never the ffi */

static int setup(void **state)
{
    *state = lua_pair_new(lua_pair_plain_receiver(), deq_src);
    return 0;
}

static int teardown(void **state)
{
    lua_pair_free(*state);
    return 0;
}

/* Encode expr in src, decode it in dst as global `got`, and deep-compare it there with the
 * same expression evaluated in dst. Returns the encoded size. */
static size_t round_trip(fixture *f, const char *expr)
{
    int stop = lua_gettop(f->src), dtop = lua_gettop(f->dst);
    push_expr(f->src, expr);
    wire_buf_reset(&f->buf);
    if (codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err) != 0)
        fail_msg("encode %s: %s", expr, f->err);
    lua_pop(f->src, 1);
    assert_int_equal(lua_gettop(f->src), stop);
    if (codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err) != 0)
        fail_msg("decode %s: %s", expr, f->err);
    assert_int_equal(lua_gettop(f->dst), dtop + 1);
    lua_pair_expect_got(f, expr, expr);
    assert_int_equal(lua_gettop(f->dst), dtop);
    return f->buf.len;
}

/* Run a Lua check in dst that must return true. */
static void dst_check(fixture *f, const char *code) { lua_check_true(f->dst, code); }

/* Encoding expr must fail with exactly `want`, leave the buffer and the stack as they were. */
static void refused(fixture *f, const char *expr, const char *want)
{
    int top = lua_gettop(f->src);
    push_expr(f->src, expr);
    wire_buf_reset(&f->buf);
    codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err); /* a prefix to keep */
    size_t kept = f->buf.len;
    f->err[0] = '\0';
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), -1);
    assert_string_equal(f->err, want);
    assert_int_equal(f->buf.len, kept);
    lua_pop(f->src, 1);
    assert_int_equal(lua_gettop(f->src), top);
}

static void scalars_round_trip_exactly(void **state)
{
    fixture *f = *state;
    static const char *const exprs[] = {
        "nil",
        "true",
        "false",
        "0",
        "-0.0",
        "1",
        "127",
        "128",
        "-1",
        "-128",
        "-129",
        "255",
        "32767",
        "32768",
        "-32768",
        "-32769",
        "2^31-1",
        "2^31",
        "-2^31",
        "-2^31-1",
        "0.5",
        "-2.25",
        "1e308",
        "-1e-308",
        "5e-324",
        "math.huge",
        "-math.huge",
        "0/0",
        "2^53",
        "-2^53-2",
        "3.141592653589793",
        "''",
        "'a'",
        "string.rep('x', 63)",
        "string.rep('y', 64)",
        "string.rep('z', 300)",
        "string.rep('w', 70000)",
    };
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++)
        round_trip(f, exprs[i]);
}

static void small_values_use_compact_forms(void **state)
{
    fixture *f = *state;
    assert_int_equal(round_trip(f, "nil"), 1);
    assert_int_equal(round_trip(f, "true"), 1);
    assert_int_equal(round_trip(f, "5"), 1);
    assert_int_equal(round_trip(f, "-5"), 2);
    assert_int_equal(round_trip(f, "1000"), 3);
    assert_int_equal(round_trip(f, "100000"), 5);
    assert_int_equal(round_trip(f, "-0.0"), 9);
    assert_int_equal(round_trip(f, "0.5"), 9);
    assert_int_equal(round_trip(f, "'hello'"), 6);
    assert_int_equal(round_trip(f, "{}"), 3);
    assert_int_equal(round_trip(f, "{1, 2, 3}"), 6);
    assert_int_equal(round_trip(f, "{x = 1}"), 6);
}

static void strings_keep_embedded_zeros_and_all_bytes(void **state)
{
    fixture *f = *state;
    round_trip(f, "'a\\0b\\0'");
    round_trip(f, "'\\0'");
    round_trip(f, "(function() local t = {} for i = 0, 255 do t[#t+1] = string.char(i) end "
                  "return table.concat(t):rep(3) end)()");
    round_trip(f, "{['\\0key'] = '\\0value\\0'}");
}

static void tables_of_every_shape_round_trip(void **state)
{
    fixture *f = *state;
    round_trip(f, "{}");
    round_trip(f, "{1, 2, 3, x = 1, y = {z = 'w'}}");
    round_trip(f, "{[1.5] = 1, [-1] = 2, [0] = 3, [true] = false, [false] = 1, [2^40] = 'big'}");
    round_trip(f, "{1, nil, 3}");
    round_trip(f, "{nil, nil, 3}");
    round_trip(f, "{[{1}] = 2, [{}] = {}}");
    round_trip(f, "{{}, {{}}, {{{}}}}");
    round_trip(f, "{'a', 'b', [4] = 'd', [10] = 'j', n = 4}");
    round_trip(f, "{[-0.0] = 1}");
    round_trip(f, "{[math.huge] = 1, [-math.huge] = 2, [0.1] = 3}");
    round_trip(f, "(function() local t = {} for i = 1, 7 do t['k'..i] = i end return t end)()");
    round_trip(f, "(function() local t = {} for i = 1, 8 do t['k'..i] = i end return t end)()");
    /* 127, 128 and 20000 hash entries: the hash count grows from 1 to 2 and 3 bytes. */
    round_trip(f, "(function() local t = {1, 2} for i = 1, 127 do t['k'..i] = i end "
                  "return t end)()");
    round_trip(f, "(function() local t = {1, 2} for i = 1, 128 do t['k'..i] = {i} end "
                  "return t end)()");
    round_trip(f, "(function() local t = {} for i = 1, 20000 do t['k'..i] = i end "
                  "return {t, t} end)()");
}

static void large_array_round_trips(void **state)
{
    fixture *f = *state;
    size_t n = round_trip(f, "(function() local t = {} for i = 1, 1e5 do t[i] = i * 3 end "
                             "return t end)()");
    assert_true(n < 1e5 * 5 + 16);
    round_trip(f, "(function() local t = {} for i = 1, 1e5 do t[i] = 'v' .. i end "
                  "return t end)()");
}

static void nesting_50_deep_round_trips(void **state)
{
    fixture *f = *state;
    lua_pushinteger(f->src, WIRE_MAX_DEPTH);
    lua_setglobal(f->src, "WIRE_MAX_DEPTH");
    lua_pushinteger(f->dst, WIRE_MAX_DEPTH);
    lua_setglobal(f->dst, "WIRE_MAX_DEPTH");
    round_trip(f, "(function() local t = {leaf = true} for i = 1, 50 do t = {a = t, i} end "
                  "return t end)()");
    round_trip(f, "(function() local t = {} for i = 1, WIRE_MAX_DEPTH - 1 do t = {t} end "
                  "return t end)()");
}

static void nesting_too_deep_is_refused(void **state)
{
    fixture *f = *state;
    lua_pushinteger(f->src, WIRE_MAX_DEPTH);
    lua_setglobal(f->src, "WIRE_MAX_DEPTH");
    push_expr(f->src, "(function() local t = {} for i = 1, WIRE_MAX_DEPTH + 50 do t = {t} end "
                      "return t end)()");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, "message nested too deeply (at msg"));
    assert_int_equal(f->buf.len, 0);
    lua_pop(f->src, 1);

    /* A hand-made message nesting WIRE_MAX_DEPTH + 1 one-element tables: refused too. */
    char msg[3 * (WIRE_MAX_DEPTH + 1) + 1];
    size_t len = 0;
    for (int i = 0; i < WIRE_MAX_DEPTH + 1; i++) {
        memcpy(msg + len, "\x0a\x01\x00", 3);
        len += 3;
    }
    msg[len++] = 0x00;
    int top = lua_gettop(f->dst);
    assert_int_equal(codec_decode(f->dst, msg, len, f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, "nested deeper than"));
    assert_int_equal(lua_gettop(f->dst), top);
}

static void shared_subtable_is_copied_twice(void **state)
{
    fixture *f = *state;
    round_trip(f, "(function() local s = {1, x = 'y'} return {a = s, b = s, s} end)()");
    dst_check(f, "return got.a ~= got.b and got.a ~= got[1]");
    dst_check(f, "got.a[1] = 99 return got.b[1] == 1 and got[1][1] == 1");
}

static void metatable_is_dropped_without_calling_metamethods(void **state)
{
    fixture *f = *state;
    push_expr(f->src, "setmetatable({x = 1, 5}, {__index = function() return 7 end, "
                      "__len = function() return 100 end, __pairs = error})");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_int_equal(codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err), 0);
    lua_setglobal(f->dst, "got");
    dst_check(f, "return getmetatable(got) == nil and got.y == nil and #got == 1 and "
                 "got.x == 1 and got[1] == 5");
}

static void unsendable_values_are_refused_with_their_path(void **state)
{
    fixture *f = *state;
    refused(f, "{handler = function() end}", "cannot send a function (at msg.handler)");
    refused(f, "{1, coroutine.create(print)}", "cannot send a coroutine (at msg[2])");
    refused(f, "{f = io.stdout}", "cannot send a userdata (at msg.f)");
    refused(f, "(function() local t = {a = {}} t.a.b = t return t end)()",
            "cannot send a cyclic table (at msg.a.b)");
    refused(f, "(function() local t = {} t[1] = t return t end)()",
            "cannot send a cyclic table (at msg[1])");
    refused(f, "{s = require('ffi').new('struct { int x; }')}",
            "cannot send a cdata other than int64_t/uint64_t (at msg.s)");
    refused(f, "{n = require('ffi').new('int32_t', 1)}",
            "cannot send a cdata other than int64_t/uint64_t (at msg.n)");
    refused(f, "{a = {b = {1, print}}}", "cannot send a function (at msg.a.b[2])");
    refused(f, "{['two words'] = print}", "cannot send a function (at msg[\"two words\"])");
    refused(f, "{['end'] = print}", "cannot send a function (at msg[\"end\"])");
    refused(f, "{['q\"\\n'] = print}", "cannot send a function (at msg[\"q\\\"\\10\"])");
    refused(f, "{[1.5] = print}", "cannot send a function (at msg[1.5])");
    refused(f, "{[-3] = print}", "cannot send a function (at msg[-3])");
    refused(f, "{[true] = print}", "cannot send a function (at msg[true])");
    refused(f, "{[{}] = print}", "cannot send a function (at msg[<table key>])");
    refused(f, "{[5LL] = print}", "cannot send a function (at msg[5LL])");
    refused(f, "{[print] = 1}", "cannot send a function (in a table key, at msg[<function key>])");
    refused(f, "{x = {[{f = print}] = 1}}",
            "cannot send a function (in a table key, at msg.x[<table key>].f)");
    refused(f, "print", "cannot send a function (at msg)");

    /* A light userdata, from C. */
    lua_pushlightuserdata(f->src, f);
    lua_setglobal(f->src, "LUD");
    refused(f, "{1, 2, {LUD}}", "cannot send a light userdata (at msg[3][1])");
}

static void long_error_paths_keep_root_and_innermost_keys(void **state)
{
    fixture *f = *state;
    push_expr(f->src, "(function() local t = {f = print} for i = 1, 80 do t = {abc = t} end "
                      "return t end)()");
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), -1);
    lua_pop(f->src, 1);
    assert_memory_equal(f->err, "cannot send a function (at msg....abc", 37);
    size_t n = strlen(f->err);
    assert_string_equal(f->err + n - 11, ".abc.abc.f)");
}

static void int64_cdata_round_trip_into_a_state_without_ffi(void **state)
{
    fixture *f = *state;
    dst_check(f, "return package == nil and ffi == nil");
    push_expr(f->src, "{0x7fffffffffffffffLL, 0xffffffffffffffffULL, -1LL, "
                      "require('ffi').new('int64_t', 42), require('ffi').cast('uint64_t', 7), "
                      "require('ffi').new('long', -9), [3LL] = 'key'}");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
    assert_int_equal(codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err), 0);
    lua_setglobal(f->dst, "got");
    dst_check(f, "return type(got[1]) == 'cdata' and ffi == nil");
    dst_check(f, "return tostring(got[1]) == '9223372036854775807LL'");
    dst_check(f, "return tostring(got[2]) == '18446744073709551615ULL'");
    dst_check(f, "return tostring(got[3]) == '-1LL' and tostring(got[4]) == '42LL'");
    dst_check(f, "return tostring(got[5]) == '7ULL' and tostring(got[6]) == '-9LL'");
    dst_check(f, "return tostring(got[1] - 1) == '9223372036854775806LL'");
    dst_check(f, "return got[2] + 1 == 0 and got[4] * 2 == 84 and got[4] == 42");
    dst_check(f, "for k, v in pairs(got) do if type(k) == 'cdata' then "
                 "return k == 3 and v == 'key' end end");
}

/* A message exercising every tag, as bytes in f->buf. */
static void encode_rich(fixture *f)
{
    push_expr(f->src, "{1, -2, 300, 70000, 0.5, -0.0, 0/0, true, false, 'short', "
                      "string.rep('L', 100), 5LL, 6ULL, {x = {y = {1, 2}}, [2.5] = 'k'}, "
                      "[true] = {}, name = 'n'}");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 1);
}

static void every_truncation_is_rejected_cleanly(void **state)
{
    fixture *f = *state;
    encode_rich(f);
    int top = lua_gettop(f->dst);
    for (size_t n = 0; n < f->buf.len; n++) {
        char *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
        memcpy(copy, f->buf.data, n);
        f->err[0] = '\0';
        assert_int_equal(codec_decode(f->dst, copy, n, f->err, sizeof f->err), -1);
        assert_non_null(strstr(f->err, "malformed message"));
        assert_int_equal(lua_gettop(f->dst), top);
        free(copy);
    }
    assert_int_equal(codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err), 0);
    lua_pop(f->dst, 1);
}

static void trailing_bytes_and_bad_tags_are_rejected(void **state)
{
    fixture *f = *state;
    int top = lua_gettop(f->dst);
    static const struct {
        const char *bytes;
        size_t len;
        const char *want;
    } cases[] = {
        {"\x81\x81", 2, "1 trailing bytes"},
        {"\x0b", 1, "bad tag 0x0b"},
        {"\x3f", 1, "bad tag 0x3f"},
        {"\x0a\x01\x00\x20", 4, "bad tag 0x20"},
        {"\x09\xff\xff\xff\xff\xff\xff\xff\xff\x0f", 10, "string longer than the message"},
        {"\x09\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "bad length"},
        {"\x0a\xff\xff\xff\xff\x0f\x00", 7, "table larger than the message"},
        {"\x0a\x00\xff\xff\xff\x7f", 6, "table larger than the message"},
        {"\x0a\x00\x01\x00\x81", 5, "nil table key"},
        {"\x0a\x00\x01\x03\x00\x00\x00\x00\x00\x00\xf8\x7f\x81", 13, "NaN table key"},
        /* The inner table claims bytes that the outer one still needs. */
        {"\x0a\x02\x00\x0a\x02\x00\x81\x81", 8, "table larger than the message"},
        {"", 0, "truncated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(codec_decode(f->dst, cases[i].bytes, cases[i].len, f->err, sizeof f->err),
                         -1);
        if (strstr(f->err, cases[i].want) == NULL)
            fail_msg("case %zu: got '%s', want '%s'", i, f->err, cases[i].want);
        assert_int_equal(lua_gettop(f->dst), top);
    }
}

typedef struct protected_decode {
    const char *bytes;
    size_t len;
    int rc;
    char err[256];
} protected_decode;

static int decode_in_pcall(lua_State *L)
{
    protected_decode *d = lua_touserdata(L, 1);
    lua_settop(L, 0);
    d->rc = codec_decode(L, d->bytes, d->len, d->err, sizeof d->err);
    return 0;
}

/* Found by tests/fuzz/decode_fuzz: a table header met when the enclosing tables still need
 * more bytes than are left (a truncated message) made the size check's `room` wrap around,
 * so any count passed and lua_createtable raised "table overflow" (or preallocated it). */
static void table_count_inside_a_truncated_table_is_rejected(void **state)
{
    fixture *f = *state;
    /* {[<table of 2^28-1 array values>] = <missing>}: the key is the message's last bytes */
    protected_decode d = {"\x0a\x00\x01\x0a\xff\xff\xff\x7f\x00", 9, 0, ""};
    int top = lua_gettop(f->dst);
    if (lua_cpcall(f->dst, decode_in_pcall, &d) != 0)
        fail_msg("codec_decode raised: %s", lua_tostring(f->dst, -1));
    assert_int_equal(d.rc, -1);
    if (strstr(d.err, "table larger than the message") == NULL)
        fail_msg("got '%s'", d.err);
    assert_int_equal(lua_gettop(f->dst), top);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) /* xorshift64*: seeded, reproducible */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void random_bytes_never_crash_the_decoder(void **state)
{
    fixture *f = *state;
    int top = lua_gettop(f->dst), ok = 0, bad = 0;
    unsigned char bytes[96];
    encode_rich(f);
    for (int round = 0; round < 200000; round++) {
        size_t n;
        if (round < 100000) { /* pure noise, biased towards the low (structural) tags */
            n = rng() % sizeof bytes;
            for (size_t i = 0; i < n; i++) {
                uint64_t r = rng();
                bytes[i] = (unsigned char)((r & 0x100) ? (r & 0x0f) : r);
            }
        } else { /* mutations of a valid message */
            n = f->buf.len < sizeof bytes ? f->buf.len : sizeof bytes;
            memcpy(bytes, f->buf.data, n);
            for (int k = 1 + (int)(rng() % 3); k > 0; k--)
                bytes[rng() % n] = (unsigned char)rng();
            n -= rng() % 4 == 0 ? rng() % n : 0;
        }
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, bytes, n);
        if (codec_decode(f->dst, (const char *)copy, n, f->err, sizeof f->err) == 0) {
            assert_int_equal(lua_gettop(f->dst), top + 1);
            lua_pop(f->dst, 1);
            ok++;
        } else {
            assert_non_null(strstr(f->err, "malformed message"));
            assert_int_equal(lua_gettop(f->dst), top);
            bad++;
        }
        free(copy);
    }
    printf("[ info     ] random decode: %d decoded, %d rejected\n", ok, bad);
    lua_gc(f->dst, LUA_GCCOLLECT, 0);
}

static void messages_append_to_one_buffer(void **state)
{
    fixture *f = *state;
    wire_buf_reset(&f->buf);
    push_expr(f->src, "'first'");
    push_expr(f->src, "{2}");
    assert_int_equal(codec_encode(f->src, -2, &f->buf, "msg", f->err, sizeof f->err), 0);
    size_t cut = f->buf.len;
    assert_int_equal(codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err), 0);
    lua_pop(f->src, 2);
    assert_int_equal(codec_decode(f->dst, f->buf.data, cut, f->err, sizeof f->err), 0);
    assert_int_equal(
        codec_decode(f->dst, f->buf.data + cut, f->buf.len - cut, f->err, sizeof f->err), 0);
    lua_setglobal(f->dst, "b");
    lua_setglobal(f->dst, "a");
    dst_check(f, "return a == 'first' and b[1] == 2");
}

static void spawn_arguments_round_trip_and_name_the_bad_one(void **state)
{
    fixture *f = *state;
    int top = lua_gettop(f->src);
    push_expr(f->src, "'x'");
    push_expr(f->src, "{k = 1}");
    lua_pushnil(f->src);
    push_expr(f->src, "42");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode_args(f->src, top + 1, 4, &f->buf, f->err, sizeof f->err), 0);
    int n = -1, dtop = lua_gettop(f->dst);
    assert_int_equal(codec_decode_args(f->dst, f->buf.data, f->buf.len, &n, f->err, sizeof f->err),
                     0);
    assert_int_equal(n, 4);
    assert_int_equal(lua_gettop(f->dst), dtop + 4);
    lua_setglobal(f->dst, "a4");
    lua_setglobal(f->dst, "a3");
    lua_setglobal(f->dst, "a2");
    lua_setglobal(f->dst, "a1");
    dst_check(f, "return a1 == 'x' and a2.k == 1 and a3 == nil and a4 == 42");

    /* Zero arguments. */
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode_args(f->src, top + 1, 0, &f->buf, f->err, sizeof f->err), 0);
    assert_int_equal(codec_decode_args(f->dst, f->buf.data, f->buf.len, &n, f->err, sizeof f->err),
                     0);
    assert_int_equal(n, 0);

    /* A bad second argument: named, nothing written. */
    lua_settop(f->src, top);
    push_expr(f->src, "1");
    push_expr(f->src, "{cb = print}");
    wire_buf_reset(&f->buf);
    assert_int_equal(codec_encode_args(f->src, top + 1, 2, &f->buf, f->err, sizeof f->err), -1);
    assert_string_equal(f->err, "cannot send a function (at arg 2.cb)");
    assert_int_equal(f->buf.len, 0);
    lua_settop(f->src, top);

    /* Truncated argument lists are rejected with the stack unchanged. */
    push_expr(f->src, "'abc'");
    push_expr(f->src, "{1, 2}");
    assert_int_equal(codec_encode_args(f->src, top + 1, 2, &f->buf, f->err, sizeof f->err), 0);
    lua_settop(f->src, top);
    for (size_t len = 0; len < f->buf.len; len++) {
        assert_int_equal(codec_decode_args(f->dst, f->buf.data, len, &n, f->err, sizeof f->err),
                         -1);
        assert_int_equal(n, 0);
        assert_int_equal(lua_gettop(f->dst), dtop);
    }
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void benchmark_small_table_against_string_buffer(void **state)
{
    fixture *f = *state;
    const int iters = 100000;
    push_expr(f->src, "{x = 1, y = 'hello', z = {1, 2, 3}}");
    int top = lua_gettop(f->dst);
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        for (int i = 0; i < iters; i++) {
            wire_buf_reset(&f->buf);
            codec_encode(f->src, -1, &f->buf, "msg", f->err, sizeof f->err);
            codec_decode(f->dst, f->buf.data, f->buf.len, f->err, sizeof f->err);
            lua_settop(f->dst, top);
        }
        double ns = (now_ns() - t0) / iters;
        best = ns < best ? ns : best;
    }
    lua_pop(f->src, 1);
    size_t bytes = f->buf.len;

    /* string.buffer, both ends in one state (it has no cross-state mode). */
    push_expr(f->src, "(function() local buf = require('string.buffer') "
                      "local v = {x = 1, y = 'hello', z = {1, 2, 3}} local best = 1e30 "
                      "for rep = 1, 3 do local t0 = os.clock() "
                      "for i = 1, 1e5 do local s = buf.encode(v) local w = buf.decode(s) end "
                      "best = math.min(best, (os.clock() - t0) / 1e5 * 1e9) end "
                      "return best end)()");
    double sb = lua_tonumber(f->src, -1);
    lua_pop(f->src, 1);
    printf("[ bench    ] {x = 1, y = \"hello\", z = {1,2,3}}: codec encode+decode %.0f ns "
           "(%zu bytes); string.buffer encode+decode %.0f ns\n",
           best, bytes, sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(scalars_round_trip_exactly, setup, teardown),
        cmocka_unit_test_setup_teardown(small_values_use_compact_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(strings_keep_embedded_zeros_and_all_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(tables_of_every_shape_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(large_array_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(nesting_50_deep_round_trips, setup, teardown),
        cmocka_unit_test_setup_teardown(nesting_too_deep_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_subtable_is_copied_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(metatable_is_dropped_without_calling_metamethods, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unsendable_values_are_refused_with_their_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(long_error_paths_keep_root_and_innermost_keys, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(int64_cdata_round_trip_into_a_state_without_ffi, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(every_truncation_is_rejected_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(trailing_bytes_and_bad_tags_are_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(table_count_inside_a_truncated_table_is_rejected, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(random_bytes_never_crash_the_decoder, setup, teardown),
        cmocka_unit_test_setup_teardown(messages_append_to_one_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(spawn_arguments_round_trip_and_name_the_bad_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(benchmark_small_table_against_string_buffer, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
