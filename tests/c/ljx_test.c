/* ljx_test: the LuaJIT internals wrapper: yieldability, int64 cdata in and out of states
 * without the FFI, JIT set-up by copying from a template state, raw reads, memory count,
 * holding the collector, an allocation-free protected call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <lauxlib.h>

#include "vm/ljx.h"

/* From LuaJIT's lualib.h (runtime/src/lualib.h shadows it on the include path). */
LUALIB_API int luaopen_base(lua_State *L);
LUALIB_API int luaopen_jit(lua_State *L);
LUALIB_API int luaopen_package(lua_State *L);
LUALIB_API void luaL_openlibs(lua_State *L);

static void open_lib(lua_State *L, lua_CFunction f)
{
    lua_pushcfunction(L, f);
    lua_call(L, 0, 0);
}

static void run(lua_State *L, const char *code)
{
    if (luaL_dostring(L, code) != 0)
        fail_msg("%s: %s", code, lua_tostring(L, -1));
}

/* Runs code as a chunk named name, leaving its nres results on the stack. */
static void run_named(lua_State *L, const char *code, const char *name, int nres)
{
    assert_int_equal(luaL_loadbuffer(L, code, strlen(code), name), 0);
    lua_call(L, 0, nres);
}

/* Run code that must return true. */
static void check(lua_State *L, const char *code)
{
    run(L, code);
    if (!lua_toboolean(L, -1))
        fail_msg("check failed: %s", code);
    lua_pop(L, 1);
}

static int probe(lua_State *L)
{
    lua_pushboolean(L, ljx_can_yield(L));
    return 1;
}

static void can_yield_only_without_a_c_boundary(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_register(L, "probe", probe);
    check(L, "return probe() == false"); /* the main thread never yields */
    run(L, "co = coroutine.create(function()\n"
           "  local top = probe()\n"
           "  local sorted\n"
           "  table.sort({3, 2, 1}, function(a, b) sorted = probe() return a < b end)\n"
           "  local gsubbed; string.gsub('a', 'a', function() gsubbed = probe() end)\n"
           "  local _, inpcall = pcall(probe)\n"
           "  local nested = coroutine.wrap(function() return probe() end)()\n"
           "  coroutine.yield()\n"
           "  return top, sorted, gsubbed, inpcall, nested, probe()\n"
           "end)\n"
           "assert(coroutine.resume(co))\n"
           "res = {coroutine.resume(co)}");
    check(L, "return res[1] == true and res[2] == true and res[3] == false and "
             "res[4] == false and res[5] == true and res[6] == true and res[7] == true");
    lua_close(L);
}

static void cdata_int64_recognises_only_64_bit_integers(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    run(L, "local ffi = require('ffi') return 5LL, 6ULL, ffi.new('long', -7), "
           "ffi.new('unsigned long', 8), ffi.new('int32_t', 1), ffi.new('struct { int x; }'), "
           "9, 'str', ffi.new('bool', true), ffi.new('double', 1)");
    static const struct {
        int ok;
        uint64_t bits;
        int uns;
    } want[] = {
        {1, 5, 0}, {1, 6, 1}, {1, (uint64_t)-7, 0},
        {1, 8, 1}, {0, 0, 0}, {0, 0, 0},
        {0, 0, 0}, {0, 0, 0}, {0, 0, 0},
        {0, 0, 0},
    };
    for (int i = 0; i < 10; i++) {
        uint64_t bits = 0;
        int uns = -1;
        assert_int_equal(ljx_cdata_int64(L, i + 1, &bits, &uns), want[i].ok);
        if (want[i].ok) {
            assert_true(bits == want[i].bits);
            assert_int_equal(uns, want[i].uns);
        }
        ljx_val v;
        ljx_read(L, i + 1, &v);
        if (want[i].ok)
            assert_int_equal(v.type, want[i].uns ? LJX_TUINT64 : LJX_TINT64);
    }
    lua_close(L);
}

static void pushed_int64_behaves_like_ffi_new_in_a_state_without_ffi(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    open_lib(L, luaopen_base);
    open_lib(L, luaopen_package);
    ljx_push_int64(L, 123, 0);
    lua_setglobal(L, "a");
    ljx_push_int64(L, UINT64_MAX, 1);
    lua_setglobal(L, "b");
    assert_int_equal(lua_gettop(L), 0);
    check(L, "return ffi == nil and type(a) == 'cdata' and tostring(a) == '123LL'");
    check(L, "return tostring(b) == '18446744073709551615ULL' and tostring(a * 2) == '246LL'");
    check(L, "local ffi = require('ffi') return ffi.istype('int64_t', a) and "
             "ffi.istype('uint64_t', b) and ffi.new('int64_t', 123) == a and b + 1 == 0");
    /* Reading back what was pushed. */
    lua_getglobal(L, "a");
    uint64_t bits;
    int uns;
    assert_int_equal(ljx_cdata_int64(L, -1, &bits, &uns), 1);
    assert_true(bits == 123 && uns == 0);
    lua_close(L);
}

static void raw_reads_see_through_metatables(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    run(L, "return setmetatable({10, 20, nil, 40, k = 'v', [0] = 'z'}, "
           "{__index = error, __len = error}), 'str\\0x'");
    ljx_val t, s, k, v;
    ljx_read(L, 1, &t);
    ljx_read(L, -1, &s);
    assert_int_equal(t.type, LUA_TTABLE);
    assert_int_equal(s.type, LUA_TSTRING);
    assert_int_equal(s.len, 5);
    assert_memory_equal(s.str, "str\0x", 5);
    ljx_read(L, 3, &v);
    assert_int_equal(v.type, LUA_TNONE);
    size_t n = ljx_table_len(t.table);
    assert_true(n == 4 || n == 2); /* any border */
    ljx_table_geti(t.table, 2, &v);
    assert_true(v.type == LUA_TNUMBER && v.num == 20);
    ljx_table_geti(t.table, 3, &v);
    assert_int_equal(v.type, LUA_TNIL);
    size_t pos = 0;
    int count = 0;
    double sum = 0;
    while (ljx_table_next(t.table, &pos, &k, &v)) {
        count++;
        if (v.type == LUA_TNUMBER)
            sum += v.num;
    }
    assert_int_equal(count, 5);
    assert_true(sum == 70);
    assert_int_equal(lua_gettop(L), 2);
    lua_close(L);
}

static double loop_ms(lua_State *L)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    run(L, "local s = 0 for i = 1, 3e7 do s = (s + i * 3) % 1000003 end return s");
    clock_gettime(CLOCK_MONOTONIC, &b);
    lua_pop(L, 1);
    return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
}

/* Whether the state compiled a trace. Opening the jit library resets the JIT parameters
 * (jit_init) but keeps the traces. */
static int has_trace(lua_State *L)
{
    open_lib(L, luaopen_jit);
    run(L, "return require('jit.util').traceinfo(1) ~= nil");
    int r = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return r;
}

static void jit_copy_gives_a_fresh_state_a_working_jit(void **state)
{
    (void)state;
    lua_State *tmpl = luaL_newstate();
    luaL_openlibs(tmpl);
    run(tmpl, "jit.opt.start('hotloop=10')");

    lua_State *copied = luaL_newstate();
    open_lib(copied, luaopen_base);
    open_lib(copied, luaopen_package);
    ljx_jit_copy(copied, tmpl);
    ljx_jit_set_sizemcode(copied, 4);
    ljx_jit_set_maxmcode(copied, 64);

    lua_State *plain = luaL_newstate();
    open_lib(plain, luaopen_base);
    open_lib(plain, luaopen_package);

    double t_copied = loop_ms(copied), t_plain = loop_ms(plain), t_tmpl = loop_ms(tmpl);
    printf("[ bench    ] 3e7-iteration loop: jit copied %.1f ms, template (luaopen_jit) %.1f ms, "
           "no jit %.1f ms\n",
           t_copied, t_tmpl, t_plain);
    /* the trace is the functional proof; the times are printed, not asserted
     * (a shared machine's load makes any ratio flaky) */
    assert_true(has_trace(copied));
    assert_false(has_trace(plain));
    lua_close(copied);
    lua_close(plain);
    lua_close(tmpl);
}

static void gc_total_matches_lua_gc_count(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    size_t kb = (size_t)lua_gc(L, LUA_GCCOUNT, 0), b = (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
    assert_true(ljx_gc_total(L) == kb * 1024 + b);
    size_t before = ljx_gc_total(L);
    run(L, "big = string.rep('x', 100000)");
    assert_true(ljx_gc_total(L) >= before + 100000);
    lua_close(L);
}

/* A new state's empty globals table gives back LuaJIT's 64 nodes (1.5 KB) and keeps room
 * for two keys; it grows as globals come. A globals table with keys in it is left alone. */
static void globals_shrink_frees_the_empty_node_part_and_grows_again(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    size_t before = ljx_gc_total(L);
    ljx_globals_shrink(L);
    assert_true(ljx_gc_total(L) + 1400 <= before);
    open_lib(L, luaopen_base);
    run(L, "for i = 1, 100 do _G['g' .. i] = i end");
    check(L, "local s = 0 for i = 1, 100 do s = s + _G['g' .. i] end return s == 5050 and "
             "type(print) == 'function'");
    size_t full = ljx_gc_total(L);
    ljx_globals_shrink(L);
    assert_true(ljx_gc_total(L) == full);
    check(L, "return g100 == 100 and g1 == 1");
    lua_close(L);
}

/* The strings "s1".."s<n>" interned in L, anchored in the registry's array part. */
static void intern_strings(lua_State *L, int n)
{
    lua_createtable(L, n, 0);
    for (int i = 1; i <= n; i++) {
        lua_pushfstring(L, "s%d", i);
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, LUA_REGISTRYINDEX, "interned");
}

/* Whether each of those strings is still the one a new interning of its bytes finds. */
static int strings_still_interned(lua_State *L, int n)
{
    lua_getfield(L, LUA_REGISTRYINDEX, "interned");
    int same = 1;
    for (int i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        lua_pushfstring(L, "s%d", i);
        same &= lua_tostring(L, -1) == lua_tostring(L, -2);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    return same;
}

/* A fresh state's string table shrinks to 64 slots and gives back 192 (1.5 KB): every string
 * stays where interning looks for it (the same object, not a second copy), LuaJIT's own
 * (metamethod names, reserved words) included, and the table grows again as strings come.
 * A "shrink" to more slots than the table has is a grow, and loses nothing either. */
static void str_shrink_keeps_every_string_findable(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    intern_strings(L, 40);
    size_t before = ljx_gc_total(L);
    ljx_str_shrink(L, 64);
    assert_true(ljx_gc_total(L) + 192 * sizeof(void *) == before);
    assert_true(strings_still_interned(L, 40));
    luaL_openlibs(L);
    check(
        L,
        "local t = setmetatable({}, {__index = function(_, k) return k .. '!' end})\n"
        "local n = 0 for i = 1, 2000 do if t['k' .. i] == 'k' .. i .. '!' then n = n + 1 end end\n"
        "return n == 2000 and type(nil) == 'nil' and #tostring(true) == 4");
    assert_true(strings_still_interned(L, 40));
    ljx_str_shrink(L, 8192);
    assert_true(strings_still_interned(L, 40));
    check(L, "return ('k' .. 7) == 'k7' and string.format('%s', 'x') == 'x'");
    lua_close(L);
}

/* Counts the blocks a state gives back (its allocation function wrapped). */
struct counting {
    lua_Alloc f;
    void *ud;
    unsigned frees;
};

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct counting *c = ud;
    if (ptr && nsize == 0)
        c->frees++;
    return c->f(c->ud, ptr, osize, nsize);
}

/* The blocks opening the base library gives back in a fresh state with shrunk globals (and
 * with 32 nodes reserved for them first, if reserve); the collector is stopped, so only the
 * parts the tables outgrow are freed. */
static unsigned base_open_frees(int reserve)
{
    lua_State *L = luaL_newstate();
    lua_gc(L, LUA_GCSTOP, 0);
    ljx_globals_shrink(L);
    if (reserve)
        ljx_globals_reserve(L, LJX_GLOBALS_BASE_HBITS);
    struct counting c = {NULL, NULL, 0};
    c.f = lua_getallocf(L, &c.ud);
    lua_setallocf(L, counting_alloc, &c);
    open_lib(L, luaopen_base);
    lua_setallocf(L, c.f, c.ud);
    check(L, "return type(print) == 'function' and coroutine.wrap ~= nil and _G._G == _G");
    lua_close(L);
    return c.frees;
}

/* A reserve gives the globals their room at once, keeping their keys: the base library's
 * 31 names then go in without the four doublings (each a new node part, the old one freed)
 * that growing from two nodes takes. A part already as large is left as it is. */
static void globals_reserve_grows_once_and_keeps_the_keys(void **state)
{
    (void)state;
    unsigned grown = base_open_frees(0), reserved = base_open_frees(1);
    assert_true(reserved + 4 <= grown);
    lua_State *L = luaL_newstate();
    ljx_globals_shrink(L);
    run(L, "a, b = 1, 'two'");
    ljx_globals_reserve(L, LJX_GLOBALS_BASE_HBITS);
    check(L, "return a == 1 and b == 'two'");
    size_t total = ljx_gc_total(L);
    ljx_globals_reserve(L, LJX_GLOBALS_BASE_HBITS);
    ljx_globals_reserve(L, LJX_GLOBALS_BASE_HBITS - 2);
    assert_true(ljx_gc_total(L) == total);
    open_lib(L, luaopen_base);
    run(L, "for i = 1, 100 do _G['g' .. i] = i end");
    check(L, "local s = 0 for i = 1, 100 do s = s + _G['g' .. i] end return s == 5050 and a == 1");
    lua_close(L);
}

/* Many allocations under a hold run none of the pending finalizers; after the resume the
 * collector runs again (and one stopped before the hold stays stopped). */
static void gc_hold_runs_no_finalizer_until_resumed(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    run(L,
        "collectgarbage('setpause', 0) fin = 0\n"
        "for i = 1, 100 do getmetatable(newproxy(true)).__gc = function() fin = fin + 1 end end");
    size_t held = ljx_gc_hold(L);
    assert_int_equal(lua_gc(L, LUA_GCISRUNNING, 0), 0);
    for (int i = 0; i < 100000; i++) {
        lua_newtable(L);
        lua_pop(L, 1);
    }
    lua_getglobal(L, "fin");
    assert_int_equal(lua_tointeger(L, -1), 0);
    lua_pop(L, 1);
    ljx_gc_resume(L, held);
    assert_int_equal(lua_gc(L, LUA_GCISRUNNING, 0), 1);
    check(L, "local k = {} for i = 1, 100000 do k[i % 10 + 1] = {} end return fin == 100");
    /* a collector the program stopped stays stopped */
    run(L, "collectgarbage('stop')");
    held = ljx_gc_hold(L);
    ljx_gc_resume(L, held);
    assert_int_equal(lua_gc(L, LUA_GCISRUNNING, 0), 0);
    lua_close(L);
}

/* What an allocation function saw while its state closed (see the test below). */
struct close_watch {
    lua_State *L; /* set once the state exists */
    int closing;
    size_t allocs_in_phase, frees_in_phase;
    int finalized, finalizer_saw_phase;
};

static void *close_watch_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct close_watch *w = ud;
    (void)osize;
    /* asked before the block goes: the last free is the state's own block */
    int phase = w->L && w->closing && ljx_freeing_all(w->L);
    if (nsize == 0) {
        if (ptr && phase)
            w->frees_in_phase++;
        free(ptr);
        return NULL;
    }
    if (phase)
        w->allocs_in_phase++;
    return realloc(ptr, nsize);
}

static int close_watch_finalizer(lua_State *L)
{
    struct close_watch *w = lua_touserdata(L, lua_upvalueindex(1));
    w->finalized++;
    w->finalizer_saw_phase |= ljx_freeing_all(L);
    lua_createtable(L, 0, 4); /* a finalizer may allocate */
    lua_pushstring(L, "made while closing");
    lua_setfield(L, -2, "s");
    return 0;
}

/* ljx_freeing_all is true in lua_close's last phase only: not while the state runs, not in
 * the finalizers lua_close runs, and nothing is allocated once it is true (the closing
 * allocation function of a state with an arena skips the arena's frees then). */
static void freeing_all_marks_only_the_last_phase(void **state)
{
    (void)state;
    struct close_watch w = {0};
    lua_State *L = lua_newstate(close_watch_alloc, &w);
    assert_non_null(L);
    w.L = L;
    luaL_openlibs(L);
    assert_false(ljx_freeing_all(L));
    lua_pushlightuserdata(L, &w);
    lua_pushcclosure(L, close_watch_finalizer, 1);
    lua_setglobal(L, "fin");
    run(L, "keep = {} for i = 1, 100 do local p = newproxy(true) "
           "getmetatable(p).__gc = fin keep[i] = p end "
           "for i = 1, 1000 do keep[#keep + 1] = {i, tostring(i)} end");
    lua_gc(L, LUA_GCCOLLECT, 0);
    assert_false(ljx_freeing_all(L));
    assert_int_equal(w.finalized, 0);
    w.closing = 1;
    lua_close(L);
    assert_int_equal(w.finalized, 100);
    assert_false(w.finalizer_saw_phase);
    assert_int_equal(w.allocs_in_phase, 0);
    /* the 2,000 objects kept and the libraries' are freed in the phase */
    assert_true(w.frees_in_phase > 2000);
}

static void push_answer(lua_State *L, void *ud)
{
    (void)ud;
    lua_pushinteger(L, 42);
}

static void raise_error(lua_State *L, void *ud)
{
    lua_pushinteger(L, 7); /* dropped by the unwind */
    luaL_error(L, "%s", (const char *)ud);
}

static void nothing(lua_State *L, void *ud)
{
    (void)L;
    (void)ud;
}

static void cpcall_catches_errors_and_allocates_nothing(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    lua_pushliteral(L, "below");
    assert_int_equal(ljx_cpcall(L, push_answer, NULL), 0);
    assert_int_equal(lua_gettop(L), 2);
    assert_int_equal(lua_tointeger(L, -1), 42);
    lua_pop(L, 1);
    assert_int_equal(ljx_cpcall(L, raise_error, "boom"), LUA_ERRRUN);
    assert_int_equal(lua_gettop(L), 2);
    assert_string_equal(lua_tostring(L, -1), "boom");
    lua_pop(L, 1);
    assert_string_equal(lua_tostring(L, -1), "below");
    size_t before = ljx_gc_total(L);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ljx_cpcall(L, nothing, NULL), 0);
    assert_true(ljx_gc_total(L) == before);
    lua_close(L);
}

/* The slots of a wait's anchor: the table made in the registry on the first store, stored,
 * read back and cleared, a shorter store clearing what a longer one left, the values kept
 * alive by the table across full collections. */
#define ANCHOR_KEY (-77)
/* a head's count of values: its integer part here */
static int head_values(double head) { return (int)head; }
static void anchor_holds_values_until_taken(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    assert_true(ljx_anchor_take(L, ANCHOR_KEY, head_values) == 0); /* none yet */
    assert_int_equal(lua_gettop(L), 0);
    lua_newuserdata(L, 16); /* 1..3: the values */
    lua_pushliteral(L, "*r");
    lua_pushnumber(L, 2.5);
    ljx_anchor_store(L, ANCHOR_KEY, 8, 3.0, 1, 3);
    const void *ud = lua_topointer(L, 1);
    lua_settop(L, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    assert_true(ljx_anchor_take(L, ANCHOR_KEY, head_values) == 3.0);
    assert_int_equal(lua_gettop(L), 3);
    assert_ptr_equal(lua_topointer(L, 1), ud);
    assert_string_equal(lua_tostring(L, 2), "*r");
    assert_true(lua_tonumber(L, 3) == 2.5);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ANCHOR_KEY);
    assert_true(lua_istable(L, -1));
    for (int i = 1; i <= 4; i++) {
        lua_rawgeti(L, -1, i);
        assert_true(lua_isnil(L, -1));
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    assert_true(ljx_anchor_take(L, ANCHOR_KEY, head_values) == 0); /* taken */
    assert_int_equal(lua_gettop(L), 3);
    /* a store of 3, left behind (an interrupted wait), then a store of 1, in the same table */
    ljx_anchor_store(L, ANCHOR_KEY, 8, 3.0, 1, 3);
    ljx_anchor_store(L, ANCHOR_KEY, 8, 1.0, 2, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ANCHOR_KEY);
    lua_rawgeti(L, -1, 1);
    assert_true(lua_tonumber(L, -1) == 1.0);
    lua_pop(L, 1);
    lua_rawgeti(L, -1, 2);
    assert_string_equal(lua_tostring(L, -1), "*r");
    lua_pop(L, 1);
    for (int i = 3; i <= 8; i++) {
        lua_rawgeti(L, -1, i);
        assert_true(lua_isnil(L, -1));
        lua_pop(L, 1);
    }
    lua_close(L);
}

static const char key_a = 'a', key_b = 'b';

/* registry[key] through ljx_registry_get, as a string (or NULL for none). */
static const char *reg_str(lua_State *L, const void *key)
{
    if (!ljx_registry_get(L, key))
        return NULL;
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1);
    return s;
}

static void reg_set(lua_State *L, const void *key, const char *value)
{
    lua_pushlightuserdata(L, (void *)key);
    if (value)
        lua_pushstring(L, value);
    else
        lua_pushnil(L);
    lua_rawset(L, LUA_REGISTRYINDEX);
}

/* The lookup keeps hints per thread (where a key's node was): whatever happened to a registry
 * since a hint was taken, a lookup gives what the registry holds now. */
static void registry_lookups_follow_every_change(void **state)
{
    (void)state;
    lua_State *one = luaL_newstate(), *two = luaL_newstate();
    assert_non_null(one);
    assert_non_null(two);
    /* two states of different layouts: two's registry has many more keys */
    for (int i = 0; i < 200; i++) {
        lua_pushinteger(two, i);
        lua_setfield(two, LUA_REGISTRYINDEX, lua_pushfstring(two, "pad%d", i));
        lua_pop(two, 1);
    }
    reg_set(one, &key_a, "one a");
    reg_set(two, &key_a, "two a");
    reg_set(one, &key_b, "one b");
    for (int round = 0; round < 3; round++) {
        assert_string_equal(reg_str(one, &key_a), "one a");
        assert_string_equal(reg_str(two, &key_a), "two a");
        assert_string_equal(reg_str(one, &key_b), "one b");
        assert_null(reg_str(two, &key_b));
    }
    /* a value replaced, a key removed (its node stays, with nil) */
    reg_set(one, &key_a, "one a again");
    reg_set(one, &key_b, NULL);
    assert_string_equal(reg_str(one, &key_a), "one a again");
    assert_null(reg_str(one, &key_b));
    /* the registry rehashed under the hint: a's node moves */
    for (int i = 0; i < 500; i++) {
        lua_pushinteger(one, i);
        lua_setfield(one, LUA_REGISTRYINDEX, lua_pushfstring(one, "grow%d", i));
        lua_pop(one, 1);
    }
    assert_string_equal(reg_str(one, &key_a), "one a again");
    /* and shrunk: a new registry with only b (a table of other size) */
    lua_newtable(one);
    lua_pushlightuserdata(one, (void *)&key_b);
    lua_pushstring(one, "new b");
    lua_rawset(one, -3);
    lua_replace(one, LUA_REGISTRYINDEX);
    assert_string_equal(reg_str(one, &key_b), "new b");
    assert_null(reg_str(one, &key_a));
    assert_string_equal(reg_str(two, &key_a), "two a");
    /* writes by hint (ljx_registry_set): seen by a plain rawget too, in the right state */
    static const char key_c = 'c';
    for (int round = 0; round < 3; round++) {
        lua_pushstring(one, round ? "one b set" : "one b first");
        ljx_registry_set(one, &key_b, -1); /* the stack is unchanged */
        lua_pop(one, 1);
        lua_pushstring(two, "two c");
        ljx_registry_set(two, &key_c, lua_gettop(two)); /* a new key, then an existing one */
        lua_pop(two, 1);
        lua_pushlightuserdata(one, (void *)&key_b);
        lua_rawget(one, LUA_REGISTRYINDEX);
        assert_string_equal(lua_tostring(one, -1), round ? "one b set" : "one b first");
        lua_pop(one, 1);
        assert_string_equal(reg_str(two, &key_c), "two c");
        assert_null(reg_str(one, &key_c));
        ljx_registry_set(one, &key_b, 0); /* nil: the node stays, the value goes */
        assert_null(reg_str(one, &key_b));
        assert_int_equal(lua_gettop(one), 0);
    }
    lua_close(one);
    lua_close(two);
}

/* A wait's anchor keeps its value alive through full collections until it is cleared, and
 * gives it back as it was. */
static void wait_anchor_keeps_its_value_until_cleared(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    assert_int_equal(ljx_wait_anchored(L), 0); /* nothing yet (and no roots made) */
    run(L, "collected = setmetatable({}, {__mode = 'k'})");
    /* a table only the anchor and a weak table hold */
    lua_newtable(L);
    lua_pushinteger(L, 42);
    lua_setfield(L, -2, "answer");
    lua_getglobal(L, "collected");
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_settable(L, -3);
    lua_pop(L, 1);
    ljx_wait_anchor(L, lua_gettop(L));
    lua_pop(L, 1);
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    check(L, "return next(collected) ~= nil");
    assert_int_equal(ljx_wait_anchored(L), 1);
    lua_getfield(L, -1, "answer");
    assert_int_equal(lua_tointeger(L, -1), 42);
    lua_pop(L, 2);
    /* cleared: the slot is empty and the value is collectable */
    ljx_wait_anchor(L, 0);
    assert_int_equal(ljx_wait_anchored(L), 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    check(L, "return next(collected) == nil");
    lua_close(L);
}

/* The decoders' string cache answers with a string of the same bytes or makes one: for every
 * length it caches (and one past), strings that differ in one byte at any position, each
 * looked up right after the other (the same slot when the first and last bytes agree). */
static void short_strings_are_the_bytes_asked_for(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    char a[LJX_SHORT_STRING + 2], b[LJX_SHORT_STRING + 2];
    for (size_t n = 0; n <= LJX_SHORT_STRING + 1; n++) {
        for (size_t at = 0; at < (n ? n : 1); at++) {
            for (size_t i = 0; i < n; i++)
                a[i] = b[i] = (char)('a' + (i * 7 + n) % 26);
            if (n)
                b[at] = (char)(b[at] ^ 0x20);
            for (int round = 0; round < 2; round++) {
                const char *want[2] = {a, b};
                for (int k = 0; k < 2; k++) {
                    ljx_push_short_string(L, want[k], n);
                    size_t len;
                    const char *got = lua_tolstring(L, -1, &len);
                    assert_int_equal(len, n);
                    assert_memory_equal(got, want[k], n);
                    lua_pop(L, 1);
                    /* the interned string of those bytes (lua_topointer: its object) */
                    lua_pushlstring(L, want[k], n);
                    assert_ptr_equal(ljx_short_string(L, want[k], n), lua_topointer(L, -1));
                    lua_pop(L, 1);
                }
            }
        }
    }
    lua_close(L);
}

/* Two strings the decoders take in turn that share a slot (same length, first and last
 * bytes) both stay cached: direct-mapped, each pushed the other out, and every message that
 * carried both made them again (a third of the runs of a gen_server call, whose protocol tag
 * is random per process). */
static void short_strings_sharing_a_slot_both_stay(void **state)
{
    (void)state;
    lua_State *L = luaL_newstate();
    for (int round = 0; round < 3; round++) {
        ljx_push_short_string(L, "call", 4);
        ljx_push_short_string(L, "coal", 4);
        lua_pop(L, 2);
        assert_true(ljx_short_string_cached(L, "call", 4));
        assert_true(ljx_short_string_cached(L, "coal", 4));
    }
    /* a third takes the slot; the newest two are kept */
    ljx_push_short_string(L, "cool", 4);
    lua_pop(L, 1);
    assert_true(ljx_short_string_cached(L, "cool", 4));
    assert_true(ljx_short_string_cached(L, "coal", 4));
    assert_false(ljx_short_string_cached(L, "call", 4));
    lua_close(L);
}

/* What a wait's C function records of its Lua caller: the line, the chunk, and the call
 * site's hints for a waker (the call's bytecode, its prototype, the calling function's
 * bytecode pointer, its frame), written when the call site changes and left alone at the
 * same one, but for the frame's slot, which follows the stack. */
static struct {
    const void *chunk, *at;
    char file[56];
    int32_t line;
    _Atomic(const void *) site[LJX_SITE_HINTS];
} where;

static int note_where(lua_State *L)
{
    ljx_caller_where(L, &where.chunk, where.file, sizeof where.file, &where.line, &where.at,
                     where.site);
    return 0;
}

static const void *site(int i) { return atomic_load(&where.site[i]); }

/* A state whose Lua code can call note_where, with the record cleared. */
static lua_State *where_state(void)
{
    lua_State *L = luaL_newstate();
    lua_register(L, "note_where", note_where);
    memset(&where, 0, sizeof where);
    return L;
}

/* Calls the function on top of L's stack (and keeps it there) with the integer k. */
static void call_with(lua_State *L, lua_Integer k)
{
    lua_pushvalue(L, -1);
    lua_pushinteger(L, k);
    lua_call(L, 1, 0);
}

/* The low 32 bits of the reference in a prototype's constant slot (a GCRef: the object's
 * address, 32 or 64 bits wide), for comparing it with an object's address. */
static uint32_t const_ref_low(const void *slot)
{
    uint32_t low;
    memcpy(&low, slot, sizeof low);
    return low;
}

/* After the call, the first table constructor's template: what a message loop's reply
 * (`send(next, {hop = k + 1})`) copies next, hinted so that a waker asks for it; none when no
 * constructor follows. And the slot of the first constant the code after the call reads (the
 * constructor's template here), whose line of the prototype's constants is cold too. */
static void caller_where_hints_the_template_of_the_reply_after_the_call(void **state)
{
    (void)state;
    lua_State *L = where_state();
    luaL_openlibs(L);
    static const char code[] = "local function f(k)\n"
                               "  if k == 1 then note_where() return {hop = k + 1} end\n"
                               "  note_where() return k\n"
                               "end\n"
                               "local util = require 'jit.util'\n"
                               "for i = -1, -20, -1 do\n"
                               "  local c = util.funck(f, i)\n"
                               "  if type(c) == 'table' then return f, c end\n"
                               "end\n";
    run_named(L, code, "=template", 2);
    const void *tpl = lua_topointer(L, -1);
    assert_non_null(tpl);
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushinteger(L, 1);
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "hop");
    assert_int_equal(lua_tointeger(L, -1), 2);
    lua_pop(L, 2);
    assert_ptr_equal(site(LJX_SITE_TEMPLATE), tpl);
    assert_non_null(site(LJX_SITE_CONST));
    assert_int_equal(const_ref_low(site(LJX_SITE_CONST)), (uint32_t)(uintptr_t)tpl);
    /* the other call site: no constructor and no constant after it */
    lua_pushinteger(L, 2);
    lua_call(L, 1, 1);
    assert_null(site(LJX_SITE_TEMPLATE));
    assert_null(site(LJX_SITE_CONST));
    lua_close(L);
}

/* The first constant read after the call may be a field's key: `m.hop` in a message loop
 * (`local k = recv().hop`) reads the string's slot before anything else. The hint is that
 * slot, which holds the key string: its address is the one lua_tostring's bytes follow. */
static void caller_where_hints_the_first_constant_read_after_the_call(void **state)
{
    (void)state;
    lua_State *L = where_state();
    static const char code[] = "local t = {hop = 7}\n"
                               "return function() note_where() return t.hop end\n";
    run_named(L, code, "=const", 1);
    lua_pushvalue(L, -1);
    lua_call(L, 0, 1);
    assert_int_equal(lua_tointeger(L, -1), 7);
    lua_pop(L, 1);
    assert_null(site(LJX_SITE_TEMPLATE));
    const void *slot = site(LJX_SITE_CONST);
    assert_non_null(slot);
    /* the slot refers to the interned "hop", whose bytes follow its header */
    lua_pushliteral(L, "hop");
    const char *bytes = lua_tostring(L, -1);
    uint32_t ref = const_ref_low(slot);
    assert_true((uint32_t)(uintptr_t)bytes > ref && (uint32_t)(uintptr_t)bytes - ref <= 32);
    lua_close(L);
}

static void caller_where_fills_the_site_hints_when_the_site_changes(void **state)
{
    (void)state;
    lua_State *L = where_state();
    /* called from C, not from Lua: nothing is written */
    lua_getglobal(L, "note_where");
    lua_call(L, 0, 0);
    assert_null(where.at);
    for (int i = 0; i < LJX_SITE_HINTS; i++)
        assert_null(site(i));
    static const char code[] = "return function(k)\n"
                               "  if k == 1 then note_where() else\n"
                               "  note_where() end\n"
                               "end";
    run_named(L, code, "=sites", 1);
    const void *fn = lua_topointer(L, -1);
    call_with(L, 1);
    assert_int_equal(where.line, 2);
    assert_string_equal(where.file, "sites");
    const void *pc = site(LJX_SITE_PC), *proto = site(LJX_SITE_PROTO),
               *frame = site(LJX_SITE_FRAME);
    /* the closure's field the return reads (its bytecode pointer), past its header */
    const char *fn_pc = site(LJX_SITE_FN);
    assert_true(fn_pc > (const char *)fn && fn_pc < (const char *)fn + 64);
    assert_non_null(pc);
    assert_non_null(proto);
    assert_non_null(frame);
    assert_ptr_equal((const char *)pc + 4, where.at); /* the call instruction, before the return */
    /* the same site: left alone (the hints were cleared to see it), but for the frame's
     * slot, the same one at the same depth */
    for (int i = 0; i < LJX_SITE_HINTS; i++)
        atomic_store(&where.site[i], NULL);
    call_with(L, 1);
    for (int i = 0; i < LJX_SITE_HINTS; i++)
        if (i != LJX_SITE_FRAME)
            assert_null(site(i));
    assert_ptr_equal(site(LJX_SITE_FRAME), frame);
    /* another site of the same function: its call instruction, the same prototype */
    call_with(L, 2);
    assert_int_equal(where.line, 3);
    assert_ptr_equal(site(LJX_SITE_FN), fn_pc);
    assert_ptr_equal(site(LJX_SITE_PROTO), proto);
    assert_true((const char *)site(LJX_SITE_PC) > (const char *)pc);
    lua_close(L);
}

/* The frame's slot of the same call site moves with the stack: called deeper, or after the
 * stack grew and moved (a message loop's coroutine grew once after its first wait, and its
 * hint pointed into the freed stack at 97% of a ring's waits). */
static void caller_where_follows_the_frame_to_where_the_stack_put_it(void **state)
{
    (void)state;
    lua_State *L = where_state();
    static const char code[] = "local function f() note_where() end\n"
                               "local function deep(n)\n"
                               "  if n == 0 then f() return end\n"
                               "  deep(n - 1)\n"
                               "end\n"
                               "return deep";
    run_named(L, code, "=frames", 1);
    call_with(L, 0);
    const void *at = where.at, *pc = site(LJX_SITE_PC), *frame = site(LJX_SITE_FRAME);
    assert_non_null(frame);
    /* a thousand frames deeper: the stack grows (and is moved by the reallocation) */
    call_with(L, 1000);
    assert_ptr_equal(where.at, at); /* the same call site */
    assert_ptr_equal(site(LJX_SITE_PC), pc);
    const void *deeper = site(LJX_SITE_FRAME);
    assert_non_null(deeper);
    assert_ptr_not_equal(deeper, frame);
    /* and back at the first depth, in the grown stack: a slot of its own again */
    call_with(L, 0);
    assert_ptr_not_equal(site(LJX_SITE_FRAME), deeper);
    lua_close(L);
}

/* A state with the standard libraries whose collector runs only the cycles the test runs
 * (a cycle begins at the collector's pause) and records no trace (a loop's compile may make
 * strings: its penalties are random). */
static lua_State *state_for_cycles(void)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    run(L, "jit.off() collectgarbage() collectgarbage('setpause', 100000)");
    return L;
}

/* A cycle between waits sweeps the strings only when some were made since its last sweep:
 * one without puts off freeing the dead ones (never a live one), and the next cycle after a
 * new string frees them. */
static void cycle_sweeps_strings_only_after_new_ones(void **state)
{
    (void)state;
    lua_State *L = state_for_cycles();
    uint32_t strings = 0;
    run(L, "keep = {} for i = 1, 200 do keep[i] = 'str' .. i end\n"
           "function drop() for i = 1, 200, 2 do keep[i] = false end end\n"
           "function intact()\n"
           "  for i = 2, 200, 2 do if keep[i] ~= 'str' .. i then return false end end\n"
           "  return true\n"
           "end");
    ljx_gc_cycle(L, &strings);
    assert_int_equal(strings, ljx_string_count(L)); /* swept: the count is noted */
    uint32_t all = strings;
    /* half of them die; no string is made (a chunk run from source would make its text a
     * string: a function made before is called instead): the cycle leaves them */
    lua_getglobal(L, "drop");
    lua_call(L, 0, 0);
    ljx_gc_cycle(L, &strings);
    /* the 100 dead stay but for those of the one chain the atomic step sweeps (the chain
     * a string lands in depends on the state's random hash seed) */
    assert_true(ljx_string_count(L) > all - 10);
    assert_int_equal(strings, ljx_string_count(L));
    uint32_t left = strings;
    ljx_gc_cycle(L, &strings);
    assert_true(ljx_string_count(L) > left - 10);
    /* the live ones are intact, and a dead one made again is the same string, alive */
    check(L, "keep[1] = 'str' .. 1 return intact() and keep[1] == 'str1'");
    /* one new string: the next cycles free the 99 dead (the whites swap at every cycle, so
     * some may wait for the second) */
    run(L, "fresh = 'a string not made before'");
    ljx_gc_cycle(L, &strings);
    ljx_gc_cycle(L, &strings);
    run(L, "fresh2 = 'and another'");
    ljx_gc_cycle(L, &strings);
    /* the chunks run since made five strings of their own (their text, two literals) */
    assert_true(ljx_string_count(L) <= all + 5 - 99);
    check(L, "return intact() and keep[1] == 'str1' and fresh == 'a string not made before'");
    lua_close(L);
}

/* Strings dying, coming back and made anew across cycles that skip their sweep and cycles
 * that do not: every live string keeps its bytes (the sanitizer builds would see a freed one
 * read), and the state's count of strings stays bounded. */
static void strings_survive_cycles_that_skip_their_sweep(void **state)
{
    (void)state;
    lua_State *L = state_for_cycles();
    uint32_t strings = 0;
    run(L, "keep, round = {}, 0\n"
           "function step()\n"
           "  round = round + 1\n"
           "  for i = 1, 40 do\n"
           "    local k = 'k' .. ((round * 7 + i * 13) % 150)\n"
           "    if keep[k] and keep[k] ~= k then error('lost ' .. k) end\n"
           "    if (round + i) % 3 == 0 then keep[k] = k else keep[k] = nil end\n"
           "  end\n"
           "  if round % 5 == 0 then keep['new' .. round] = 'new' .. round end\n"
           "  for k, v in pairs(keep) do if k ~= v then error('bad ' .. k) end end\n"
           "end");
    uint32_t most = 0;
    for (int i = 0; i < 400; i++) {
        run(L, "step()");
        ljx_gc_cycle(L, &strings);
        if (ljx_string_count(L) > most)
            most = ljx_string_count(L);
    }
    check(L, "local n = 0 for k, v in pairs(keep) do n = n + 1 if k ~= v then return false end "
             "end return n > 0");
    assert_true(most < 1000); /* 150 keys, 80 made for the rounds and the library's own */
    lua_close(L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(can_yield_only_without_a_c_boundary),
        cmocka_unit_test(cdata_int64_recognises_only_64_bit_integers),
        cmocka_unit_test(pushed_int64_behaves_like_ffi_new_in_a_state_without_ffi),
        cmocka_unit_test(raw_reads_see_through_metatables),
        cmocka_unit_test(jit_copy_gives_a_fresh_state_a_working_jit),
        cmocka_unit_test(gc_total_matches_lua_gc_count),
        cmocka_unit_test(globals_shrink_frees_the_empty_node_part_and_grows_again),
        cmocka_unit_test(globals_reserve_grows_once_and_keeps_the_keys),
        cmocka_unit_test(str_shrink_keeps_every_string_findable),
        cmocka_unit_test(gc_hold_runs_no_finalizer_until_resumed),
        cmocka_unit_test(freeing_all_marks_only_the_last_phase),
        cmocka_unit_test(cpcall_catches_errors_and_allocates_nothing),
        cmocka_unit_test(anchor_holds_values_until_taken),
        cmocka_unit_test(registry_lookups_follow_every_change),
        cmocka_unit_test(wait_anchor_keeps_its_value_until_cleared),
        cmocka_unit_test(short_strings_are_the_bytes_asked_for),
        cmocka_unit_test(short_strings_sharing_a_slot_both_stay),
        cmocka_unit_test(caller_where_fills_the_site_hints_when_the_site_changes),
        cmocka_unit_test(caller_where_hints_the_template_of_the_reply_after_the_call),
        cmocka_unit_test(caller_where_hints_the_first_constant_read_after_the_call),
        cmocka_unit_test(caller_where_follows_the_frame_to_where_the_stack_put_it),
        cmocka_unit_test(cycle_sweeps_strings_only_after_new_ones),
        cmocka_unit_test(strings_survive_cycles_that_skip_their_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
