/* Per-actor LuaJIT states. A new state opens no library eagerly: each opens on
 * first use through _G's __index (and the string metatable), which keeps an idle
 * actor small and a spawn cheap, and a walk of _G opens the rest so it lists them
 * all. Modules come from the runtime's bytecode cache (modcache.c). */
#include "base/critical.h"
#include "vm/luavm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "core/actor.h"
#include "vm/codec.h"
#include "vm/dispatch_share.h"
#include "vm/collect.h"
#include "vm/flat.h"
#include "core/exit.h"
#include "vm/body.h"
#include "base/heap.h"
#include "base/mailbox.h"
#include "vm/ljx.h"
#include "vm/modcache.h"
#include "vm/pool_pick.h"
#include "core/logsink.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "base/spin.h"
#include "core/scheduler.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* ---- allocation: every byte a state holds is counted on its actor ----
 *
 * LuaJIT survives a refused allocation in ordinary code (it raises "not enough memory"),
 * but not everywhere: lua_newstate frees a half-made state through a path that crashes
 * (lj_gc_freeall walks the string table before it exists), luaopen_ffi leaves a ctype
 * state without its finalizer table that lua_close then reads, and lua_close runs
 * finalizers that must be able to allocate. So max_heap is enforced only between boot and
 * close (the state is made, booted and closed by actor_alloc, which has no limit), and an
 * allocation that crosses it still succeeds: the actor is stopped instead, like
 * smarm.kill (no pcall catches it), and ends with reason "memory". Only an allocation
 * that would take the heap more than HEAP_SLACK past max_heap is refused; no single
 * step LuaJIT cannot leave half-done (opening the FFI takes about 11 KB, a cdef of the
 * runtime's FFI surface about 7 KB) comes near it, and the actor is stopped all the same. */

#define HEAP_SLACK (64 * 1024)

static void *actor_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
static void *actor_alloc_arena(void *ud, void *ptr, size_t osize, size_t nsize);

/* ---- a large heap's arena ----
 * The runtime's heap serves size classes from per-thread magazines: cheap for the many
 * small states, but a block comes back wherever the last free of its class left one, so a
 * state that allocates and frees millions of objects scatters them, and LuaJIT's collector,
 * which walks every object in allocation order, takes a cache miss per object (binary-trees
 * at depth 16 spent 37% of its time on the sweep's loads, against 6% under plain luajit).
 * So a state whose heap passes ARENA_AT takes an arena of LuaJIT's own allocator for its
 * small blocks from then on: its freed neighbours coalesce and new blocks are carved in
 * order, as under plain luajit. Blocks it already holds stay where they are; a free finds
 * a block's allocator by its address (heap_owns). Large blocks (> HEAP_MAX_SMALL) come from
 * malloc either way. The arena goes with the state. */
#define ARENA_AT (4u << 20)

/* Who gave a block LuaJIT holds (size osize). */
enum { FROM_HEAP, FROM_MALLOC, FROM_ARENA };

static int take_kept(actor *a, void *p)
{
    for (int i = 0; i < a->vm.nkept; i++)
        if (a->vm.kept[i] == p) {
            a->vm.kept[i] = a->vm.kept[--a->vm.nkept];
            return 1;
        }
    return 0;
}

/* The allocator of p; a kept block is taken off the list (the caller frees or moves it). */
static int owner_of(actor *a, void *p, size_t osize)
{
    if (osize > HEAP_MAX_SMALL)
        return FROM_MALLOC;
    if (a->vm.nkept && take_kept(a, p))
        return FROM_MALLOC;
    if (!a->vm.arena || heap_owns(p))
        return FROM_HEAP;
    return FROM_ARENA;
}

static void release(actor *a, void *p, size_t osize, int owner)
{
    if (owner == FROM_ARENA)
        smarm_lj_alloc_free(a->vm.arena_msp, p);
    else if (owner == FROM_MALLOC)
        free(p);
    else
        heap_free(&a->rt->heap, a->run.heap_cache, p, osize);
}

/* A new block: large ones from malloc (through the heap), small ones from the arena when
 * the state has one. */
static void *obtain(actor *a, size_t n)
{
    if (a->vm.arena && n <= HEAP_MAX_SMALL)
        return smarm_lj_alloc_malloc(a->vm.arena_msp, n);
    return heap_alloc(&a->rt->heap, a->run.heap_cache, n);
}

/* alloc_in's general case: a state with an arena or with kept blocks, or a request the
 * heap's fast path did not satisfy. */
static __attribute__((noinline)) void *alloc_general(actor *a, void *ptr, size_t osize,
                                                     size_t nsize, int heap_refuses)
{
    int owner = ptr ? owner_of(a, ptr, osize) : FROM_HEAP;
    crit_enter();
    void *p = NULL;
    if (nsize == 0) {
        if (ptr)
            release(a, ptr, osize, owner);
    } else if (heap_refuses) {
        /* the test hook: nothing is given */
    } else if (!ptr) {
        p = obtain(a, nsize);
    } else if (owner == FROM_ARENA && nsize <= HEAP_MAX_SMALL) {
        p = lj_alloc_f(a->vm.arena_msp, ptr, osize, nsize);
    } else if (!a->vm.arena && (owner == FROM_HEAP || osize > HEAP_MAX_SMALL)) {
        p = heap_realloc(&a->rt->heap, a->run.heap_cache, ptr, osize, nsize);
    } else if (owner == FROM_MALLOC && osize > HEAP_MAX_SMALL && nsize > HEAP_MAX_SMALL) {
        p = realloc(ptr, nsize);
    } else if ((p = obtain(a, nsize))) {
        memcpy(p, ptr, osize < nsize ? osize : nsize);
        release(a, ptr, osize, owner);
    }
    crit_exit();
    if (nsize == 0) {
        if (ptr)
            a->vm.mem -= osize;
        return NULL;
    }
    /* A shrink must not fail: LuaJIT shrinks a table's array part after it has replaced the
     * hash part (lj_tab_resize), and an error there loses the table's entries. The block
     * stays where it is. Freed as nsize bytes later, a heap block serves a smaller size
     * class; a malloc'd one is remembered, so that it goes back to free. */
    if (!p && ptr && nsize <= osize) {
        if (owner == FROM_MALLOC && nsize <= HEAP_MAX_SMALL) {
            if (a->vm.nkept == (int)(sizeof a->vm.kept / sizeof a->vm.kept[0]))
                return NULL; /* out of memory everywhere, again and again */
            a->vm.kept[a->vm.nkept++] = ptr;
            a->vm.general = 1;
        }
        p = ptr;
    }
    if (p)
        a->vm.mem += nsize - (ptr ? osize : 0);
    return p;
}

/* The state's heap passed arena_at: it takes an arena if one can be had (else it goes on
 * with the heap, and asks again when it has doubled). */
static void __attribute__((noinline, cold)) arena_start(actor *a)
{
    if (a->vm.closing || !heap_owns_ready()) {
        a->vm.arena_at = a->vm.mem * 2;
        return;
    }
    crit_enter();
    a->vm.arena = ljx_arena_new();
    crit_exit();
    a->vm.general = a->vm.arena != NULL;
    a->vm.arena_at = a->vm.arena ? SIZE_MAX : a->vm.mem * 2;
    if (!a->vm.arena)
        return;
    a->vm.arena_msp = ljx_arena_msp(a->vm.arena);
    arena_map_bounds(ljx_arena_map(a->vm.arena), &a->vm.arena_lo, &a->vm.arena_span);
    /* the plain allocation function gives way to the arena's own (a state under max_heap or
     * a test hook keeps its function, whose calls reach alloc_general) */
    void *ud;
    if (a->vm.L && lua_getallocf(a->vm.L, &ud) == actor_alloc)
        lua_setallocf(a->vm.L, actor_alloc_arena, a);
}

/* The reservation of the arena of the actor running on the calling thread (arena_map's
 * hook: a new piece of an arena's memory comes from its reservation, so that the pieces
 * touch and LuaJIT's allocator merges them as under plain luajit). */
arena_map *luavm_running_arena_map(void)
{
    sched *s = sched_current();
    actor *a = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    return a && a->vm.arena ? ljx_arena_map(a->vm.arena) : NULL;
}

/* Whether p lies inside the reservation of a's arena, and so is the arena's: heap chunks,
 * malloc'd blocks (large or kept) never lie there, and NULL wraps past the span. One
 * subtraction and one compare, where the heap's chunk map took a dozen instructions and a
 * load (binary-trees frees 3 million blocks a second). A block the arena mapped elsewhere
 * (its reservation full) is not found here and takes the general path. */
static inline int in_arena_span(const actor *a, const void *p)
{
    return (uintptr_t)p - a->vm.arena_lo < a->vm.arena_span;
}

/* The allocation function of a state with an arena (set by arena_start when the state had
 * the plain one): its common cases, a small block from the arena and a small block of the
 * arena's back to it, straight to the malloc and free of LuaJIT's allocator (lj_alloc_f's
 * dispatch on its arguments was 4.5 instructions of each of binary-trees' 29 million calls,
 * on top of this function's 9.5); the rest to alloc_general. */
static void *actor_alloc_arena(void *ud, void *ptr, size_t osize, size_t nsize)
{
    actor *a = ud;
    /* No critical section around the arena's calls: the arena is this state's alone, so
     * a stack overflow inside one leaves nothing of the runtime half done (luavm_abandon
     * leaves such an arena alone, as it leaves the state) */
    if (nsize == 0) {
        if (in_arena_span(a, ptr)) {
            a->vm.mem -= osize;
            return smarm_lj_alloc_free(a->vm.arena_msp, ptr);
        }
    } else if (!ptr && nsize <= HEAP_MAX_SMALL) {
        /* counted before the call, so that both paths are tail calls and the function
         * needs no frame (binary-trees makes 6 million calls here: the frame was 14
         * instructions of every one). The arena refuses only when the system does, and
         * then no other allocator would give the block either: LuaJIT raises its
         * memory error and the count is nsize high in a state that is failing. */
        a->vm.mem += nsize;
        return smarm_lj_alloc_malloc(a->vm.arena_msp, nsize);
    }
    return alloc_general(a, ptr, osize, nsize, 0);
}

/* alloc_in's cases off its fast path: a resize, the heap's slow paths, the arena check. */
static __attribute__((noinline)) void *alloc_heap(actor *a, void *ptr, size_t osize, size_t nsize)
{
    heap *h = &a->rt->heap;
    void *p = ptr ? heap_realloc(h, a->run.heap_cache, ptr, osize, nsize)
                  : heap_alloc(h, a->run.heap_cache, nsize);
    if (__builtin_expect(!p, 0))
        return alloc_general(a, ptr, osize, nsize, 1);
    a->vm.mem += nsize - (ptr ? osize : 0);
    /* arena_at is never below ARENA_AT: a small state reads no line of it */
    if (__builtin_expect(a->vm.mem > ARENA_AT, 0) && a->vm.mem > a->vm.arena_at)
        arena_start(a);
    return p;
}

/* heap_refuses: a test hook's stand-in for the heap running out of memory. The two fast
 * paths (a block from or back to the thread's magazine) make no call, so the compiler keeps
 * them free of a frame; everything else is a tail call. */
static inline __attribute__((always_inline)) void *alloc_in(actor *a, void *ptr, size_t osize,
                                                            size_t nsize, int heap_refuses)
{
    if (__builtin_expect(a->vm.general | heap_refuses, 0))
        return alloc_general(a, ptr, osize, nsize, heap_refuses);
    heap_cache *cache = a->run.heap_cache;
    if (nsize == 0) {
        if (!ptr)
            return NULL;
        if (__builtin_expect(!heap_free_fast(cache, ptr, osize), 0))
            return alloc_general(a, ptr, osize, 0, 0);
        a->vm.mem -= osize;
        return NULL;
    }
    /* whether the heap passed arena_at is asked on the slow path only (alloc_heap): a
     * magazine holds 16 to 128 blocks, so a growing state gets there soon enough */
    if (!ptr) {
        void *b = heap_alloc_fast(cache, nsize);
        if (__builtin_expect(b != NULL, 1)) {
            if (a->vm.gc_log)
                collect_note(a, b);
            a->vm.mem += nsize;
            return b;
        }
    }
    return alloc_heap(a, ptr, osize, nsize);
}

static void *actor_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    return alloc_in(ud, ptr, osize, nsize, 0);
}

/* The first allocation past max_heap: the actor is stopped like smarm.kill (the stop word
 * makes the scheduler end it on a fresh context wherever it leaves next, and the stop's
 * preemption signal, which lands here on the actor's own thread, makes it leave soon). */
static void over_max_heap(actor *a)
{
    a->vm.heap_exceeded = 1;
    sched_stop(a->rt, a->pid, STOP_KILL);
}

/* actor_alloc with max_heap, from the end of boot until close. */
static void *actor_alloc_capped(void *ud, void *ptr, size_t osize, size_t nsize)
{
    actor *a = ud;
    size_t old = ptr ? osize : 0;
    if (nsize > old && a->vm.mem + (nsize - old) > a->vm.max_heap) {
        if (!a->vm.heap_exceeded)
            over_max_heap(a);
        if (a->vm.mem + (nsize - old) - a->vm.max_heap > HEAP_SLACK)
            return NULL; /* LuaJIT raises "not enough memory"; the stop stands */
    }
    return a->vm.arena ? actor_alloc_arena(ud, ptr, osize, nsize)
                       : actor_alloc(ud, ptr, osize, nsize);
}

/* Test hook (see luavm.h): the heap refuses the calling actor's state. */
static _Atomic int refuse_grow, refuse_shrink;

static void *actor_alloc_refused(void *ud, void *ptr, size_t osize, size_t nsize)
{
    int refuse = nsize > (ptr ? osize : 0)
                     ? atomic_load_explicit(&refuse_grow, memory_order_relaxed)
                     : atomic_load_explicit(&refuse_shrink, memory_order_relaxed);
    return alloc_in(ud, ptr, osize, nsize, refuse);
}

void luavm_test_heap_refuses(int grow, int shrink)
{
    actor *a = atomic_load_explicit(&sched_current()->cur, memory_order_relaxed);
    atomic_store_explicit(&refuse_grow, grow, memory_order_relaxed);
    atomic_store_explicit(&refuse_shrink, shrink, memory_order_relaxed);
    lua_setallocf(a->vm.L, actor_alloc_refused, a);
}

int luavm_registry_get(lua_State *L, const void *key) { return ljx_registry_get(L, key); }

void luavm_registry_keep(lua_State *L, const void *key) { ljx_registry_set(L, key, -1); }

void luavm_registry_set(lua_State *L, const void *key, int idx) { ljx_registry_set(L, key, idx); }

actor *luavm_actor(lua_State *L) { return ljx_alloc_data(L); }

smarm_runtime *luavm_runtime(lua_State *L) { return luavm_actor(L)->rt; }

void luavm_safe_point(actor *a, lua_State *L)
{
    luavm_shared *vm = a->rt->vm;
    uint32_t epoch = atomic_load_explicit(&vm->reload_epoch, memory_order_acquire);
    if (epoch == a->vm.code_epoch)
        return;
    /* noted first: a reload step that waits (an on_reload hook may) does not nest */
    a->vm.code_epoch = epoch;
    if (!vm->take_reload || a->vm.closing || a->vm.in_cont)
        return;
    lua_pushcfunction(L, vm->take_reload);
    if (lua_pcall(L, 0, 0, 0) != 0) {
        const char *err = lua_tostring(L, -1);
        luavm_report(a, "reload", err ? err : "(error object is not a string)");
        lua_pop(L, 1);
    }
}

/* ---- lazily opened libraries ---- */

static const struct lazy_lib {
    const char *name;
    lua_CFunction open;
} lazy_libs[] = {
    {LUA_STRLIBNAME, luaopen_string},
    {LUA_TABLIBNAME, luaopen_table},
    {LUA_MATHLIBNAME, luaopen_math},
    {LUA_IOLIBNAME, luaopen_io},
    {LUA_OSLIBNAME, luaopen_os},
    {LUA_DBLIBNAME, luaopen_debug},
    {LUA_BITLIBNAME, luaopen_bit},
    {LUA_JITLIBNAME, luaopen_jit},
    {LUA_LOADLIBNAME, NULL}, /* package: see open_package */
    {NULL, NULL},
};

static const char real_require_key = 'r';
static const char image_key = 'i'; /* a pooled state's image (see luavm_release) */

/* Bits of actor_vm's libs_open and image_libs: the base library, then lazy_libs' entries. */
#define LIB_BASE 1u
static unsigned lib_bit(const struct lazy_lib *lib) { return 2u << (lib - lazy_libs); }

/* Notes that the running actor opened lib (NULL: the base library). */
static void note_open(lua_State *L, const struct lazy_lib *lib)
{
    luavm_actor(L)->vm.libs_open |= lib ? lib_bit(lib) : LIB_BASE;
}

static void open_lib(lua_State *L, const struct lazy_lib *lib);

/* package.preload entry of a standard library not opened yet. */
static int preload_lib(lua_State *L)
{
    const struct lazy_lib *lib = lua_touserdata(L, lua_upvalueindex(1));
    open_lib(L, lib);
    lua_getfield(L, LUA_GLOBALSINDEX, lib->name);
    return 1;
}

static int fast_require(lua_State *L);

/* The modules libraries register when they open: the jit library jit.opt (in package.loaded),
 * jit.util and jit.profile (in package.preload), the table library table.new and table.clear
 * (package.preload). Until a library has opened, these preload entries open it first, so that
 * require finds them as under plain luajit. */
static const char *const lib_modules[] = {"jit.opt",   "jit.util",    "jit.profile",
                                          "table.new", "table.clear", NULL};

static int preload_lib_module(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    /* the library's name: the module's up to its dot */
    const char *dot = strchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_pushlstring(L, name, len);
    lua_rawget(L, -2);
    int open = !lua_isnil(L, -1);
    lua_pop(L, 2);
    if (!open) {
        for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++)
            if (lib->open && strlen(lib->name) == len && memcmp(lib->name, name, len) == 0)
                open_lib(L, lib);
    }
    /* jit.opt (require has put its sentinel, a light userdata, under the name meanwhile) */
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, name);
    if (lua_istable(L, -1))
        return 1;
    lua_pop(L, 2);
    /* the others: the library's own loader took this entry's place */
    lua_getfield(L, LUA_REGISTRYINDEX, "_PRELOAD");
    lua_getfield(L, -1, name);
    if (!lua_isfunction(L, -1) || lua_tocfunction(L, -1) == preload_lib_module)
        return luaL_error(L, "module '%s' not found", name);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

/* require "smarm": the library above installs how its table is made (luavm_shared) */
static void push_library(lua_State *L) { luavm_runtime(L)->vm->push_library(L); }

static int preload_smarm(lua_State *L)
{
    push_library(L);
    return 1;
}

/* Opens the package library with the cache searcher in front of the file searchers. */
static void open_package(lua_State *L)
{
    luavm_shared *vm = luavm_runtime(L)->vm;
    lua_pushcfunction(L, luaopen_package);
    lua_pushstring(L, LUA_LOADLIBNAME);
    lua_call(L, 1, 1); /* package table */
    /* package.loaders = {preload, cache, C, Croot}: the cache replaces the Lua file searcher */
    lua_getfield(L, -1, "loaders");
    lua_pushcfunction(L, modcache_searcher);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 1);
    if (vm->package_path) {
        lua_getfield(L, -1, "path");
        lua_pushfstring(L, "%s;%s", vm->package_path, lua_tostring(L, -1));
        lua_setfield(L, -3, "path");
        lua_pop(L, 1);
    }
    /* ffi is preloaded, as luaL_openlibs does, and so are the libraries not opened yet */
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, preload_smarm);
    lua_setfield(L, -2, "smarm");
    lua_pushcfunction(L, luaopen_ffi);
    lua_setfield(L, -2, LUA_FFILIBNAME);
    for (const luaL_Reg *r = vm->preloads; r && r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    /* the host's modules, oldest first so a later one of a name wins */
    int nhost = 0;
    for (luavm_preload *p = atomic_load_explicit(&vm->host_preloads, memory_order_acquire); p;
         p = p->next, nhost++) {
        luaL_checkstack(L, 4, "too many host modules");
        lua_pushlightuserdata(L, p);
    }
    for (; nhost > 0; nhost--) {
        luavm_preload *p = lua_touserdata(L, -1);
        lua_pop(L, 1);
        lua_pushcfunction(L, p->open);
        lua_setfield(L, -1 - nhost, p->name);
    }
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++) {
        if (!lib->open)
            continue;
        lua_pushlightuserdata(L, (void *)lib);
        lua_pushcclosure(L, preload_lib, 1);
        lua_setfield(L, -2, lib->name);
    }
    for (const char *const *m = lib_modules; *m; m++) {
        lua_getfield(L, -1, *m);
        int have = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (!have) {
            lua_pushcfunction(L, preload_lib_module);
            lua_setfield(L, -2, *m);
        }
    }
    lua_pop(L, 1);
    /* a new state's package.path, for the states that have not opened the library */
    if (!atomic_load_explicit(&vm->search_path, memory_order_acquire)) {
        lua_getfield(L, -1, "path");
        const char *path = lua_tostring(L, -1);
        char *copy = path ? strdup(path) : NULL, *none = NULL;
        if (copy && !atomic_compare_exchange_strong(&vm->search_path, &none, copy))
            free(copy);
        lua_pop(L, 1);
    }
    /* keep the real require for the fast require below */
    lua_getfield(L, LUA_GLOBALSINDEX, "require");
    lua_pushlightuserdata(L, (void *)&real_require_key);
    lua_insert(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
    lua_pushcfunction(L, fast_require);
    lua_setfield(L, LUA_GLOBALSINDEX, "require");
    lua_pop(L, 1);
}

static void open_lib(lua_State *L, const struct lazy_lib *lib)
{
    note_open(L, lib);
    if (!lib->open) {
        open_package(L);
    } else {
        lua_pushcfunction(L, lib->open);
        lua_pushstring(L, lib->name);
        lua_call(L, 1, 0);
        /* opening jit resets the JIT flags and parameters to LuaJIT's defaults (hotloop 56,
         * 64 KB machine-code areas): the state keeps the template's */
        if (lib->open == luaopen_jit)
            ljx_jit_copy(L, luavm_runtime(L)->vm->tmpl);
    }
}

/* ---- a complete _G for whoever looks at all of it ----
 *
 * A state that iterates _G (or package.loaded) must see every library plain LuaJIT has,
 * opened or not. Iterating needs `next` or `pairs` (a `for k, v in pairs(t)` loop runs
 * LuaJIT's inline traversal, with no hook, once pairs has returned the real next), so those
 * two are where the libraries get completed: the base library opens without them (they
 * wait in _G's metatable), the first mention of `next` opens everything and puts the real
 * one in _G, and the first mention of `pairs` puts in _G a small Lua function that opens
 * everything when handed _G or package.loaded and otherwise returns the real pairs(t).
 * Being Lua, it is compiled into the caller's trace, so the loop over its result keeps
 * LuaJIT's compiled traversal; once everything is open _G holds the real pairs again. */

/* slots of _G's metatable's array part (a key in the registry costs a rehash per state) */
enum { SLOT_NEXT = 1, SLOT_PAIRS, SLOT_COMPLETE, NSLOTS = SLOT_COMPLETE };

/* The pairs above, compiled once in the template; a state loads the inner function alone
 * and sets its upvalues (pairs_upvalues names them in pairs_uv's order). Only _G and
 * package.loaded (which shares _G's metatable meanwhile) have metatables among the tables
 * it watches, so an ordinary table costs one load of its metatable field in a trace. */
static const char pairs_maker_src[] =
    "local pairs, G, loaded, open_all, rawequal, getmetatable\n"
    "local done = false\n"
    "return function(t)\n"
    "   if getmetatable(t) ~= nil and not done and (rawequal(t, G) or rawequal(t, loaded)) then\n"
    "      done = true\n"
    "      open_all()\n"
    "   end\n"
    "   return pairs(t)\n"
    "end\n";

static const char *const pairs_upvalues[6] = {"pairs",    "G",        "loaded",
                                              "open_all", "rawequal", "getmetatable"};

static int base_is_open(lua_State *L)
{
    int open = 0;
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "_G");
        open = !lua_isnil(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return open;
}

/* Pushes slot of _G's metatable (nil if _G lost it). */
static void push_slot(lua_State *L, int slot)
{
    if (!lua_getmetatable(L, LUA_GLOBALSINDEX)) {
        lua_pushnil(L);
        return;
    }
    lua_rawgeti(L, -1, slot);
    lua_remove(L, -2);
}

/* Pops a value into slot of _G's metatable. */
static void set_slot(lua_State *L, int slot)
{
    if (!lua_getmetatable(L, LUA_GLOBALSINDEX)) {
        lua_pop(L, 1);
        return;
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, slot);
    lua_pop(L, 1);
}

/* Moves _G[name] to slot. */
static void stash_global(lua_State *L, const char *name, int slot)
{
    lua_pushstring(L, name);
    lua_pushvalue(L, -1);
    lua_rawget(L, LUA_GLOBALSINDEX);
    set_slot(L, slot);
    lua_pushnil(L);
    lua_rawset(L, LUA_GLOBALSINDEX);
}

/* The base library (with coroutine), next and pairs kept aside. */
static void open_base(lua_State *L)
{
    note_open(L, NULL);
    /* one resize, not a doubling (a new part, every key reinserted) per power of two */
    ljx_globals_reserve(L, LJX_GLOBALS_BASE_HBITS);
    lua_pushcfunction(L, luaopen_base);
    lua_call(L, 0, 0);
    stash_global(L, "next", SLOT_NEXT);
    stash_global(L, "pairs", SLOT_PAIRS);
}

static int is_complete(lua_State *L)
{
    push_slot(L, SLOT_COMPLETE);
    int done = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return done;
}

/* Opens every library not open yet and puts the real next and pairs in _G. */
static int open_all(lua_State *L)
{
    if (is_complete(L))
        return 0;
    if (!base_is_open(L))
        open_base(L);
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++) {
        if (!lib->open) {
            lua_pushlightuserdata(L, (void *)&real_require_key);
            lua_rawget(L, LUA_REGISTRYINDEX);
            if (lua_isnil(L, -1))
                open_package(L);
            lua_pop(L, 1);
            continue;
        }
        lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
        lua_getfield(L, -1, lib->name);
        int open = !lua_isnil(L, -1);
        lua_pop(L, 2);
        if (!open)
            open_lib(L, lib);
    }
    lua_pushboolean(L, 1);
    set_slot(L, SLOT_COMPLETE);
    /* package.loaded loses the mark push_pairs gave it (unless another took its place) */
    luaL_findtable(L, LUA_REGISTRYINDEX, "_LOADED", 16);
    if (lua_getmetatable(L, -1)) {
        if (lua_getmetatable(L, LUA_GLOBALSINDEX) && lua_rawequal(L, -1, -2)) {
            lua_pushnil(L);
            lua_setmetatable(L, -4);
        }
        lua_settop(L, -3);
    }
    lua_pop(L, 1);
    lua_pushliteral(L, "next");
    push_slot(L, SLOT_NEXT);
    lua_rawset(L, LUA_GLOBALSINDEX);
    lua_pushliteral(L, "pairs");
    push_slot(L, SLOT_PAIRS);
    lua_rawset(L, LUA_GLOBALSINDEX);
    return 0;
}

/* _G.pairs on its first mention (the base library is open). */
static void push_pairs(lua_State *L)
{
    if (is_complete(L)) {
        push_slot(L, SLOT_PAIRS);
    } else {
        luavm_shared *vm = luavm_runtime(L)->vm;
        if (luaL_loadbuffer(L, vm->pairs_bc, vm->pairs_bc_len, "=[C]") != 0)
            lua_error(L);
        push_slot(L, SLOT_PAIRS);
        lua_setupvalue(L, -2, vm->pairs_uv[0]);
        lua_pushvalue(L, LUA_GLOBALSINDEX);
        lua_setupvalue(L, -2, vm->pairs_uv[1]);
        /* the mark that lets the new pairs tell package.loaded from tables without one */
        luaL_findtable(L, LUA_REGISTRYINDEX, "_LOADED", 16);
        lua_getmetatable(L, LUA_GLOBALSINDEX);
        lua_setmetatable(L, -2);
        lua_setupvalue(L, -2, vm->pairs_uv[2]);
        lua_pushcfunction(L, open_all);
        lua_setupvalue(L, -2, vm->pairs_uv[3]);
        lua_getfield(L, LUA_GLOBALSINDEX, "rawequal");
        lua_setupvalue(L, -2, vm->pairs_uv[4]);
        lua_getfield(L, LUA_GLOBALSINDEX, "getmetatable");
        lua_setupvalue(L, -2, vm->pairs_uv[5]);
    }
    lua_pushliteral(L, "pairs");
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_GLOBALSINDEX);
}

/* _G.__index: opens a standard library on first mention of its name. */
static int lazy_global(lua_State *L)
{
    const char *k = lua_tostring(L, 2);
    /* package.loaded shares this metatable for a while (push_pairs) and opens nothing */
    if (!k || lua_type(L, 2) != LUA_TSTRING || !lua_rawequal(L, 1, LUA_GLOBALSINDEX))
        return 0;
    /* a library's own name opens that library alone: the base library (some 40 closures
     * and their names) is not needed to reach `debug` or `string` */
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++) {
        if (strcmp(k, lib->name) == 0 || (!lib->open && strcmp(k, "module") == 0)) {
            open_lib(L, lib);
            lua_pushvalue(L, 2);
            lua_rawget(L, 1);
            return 1;
        }
    }
    /* the base library (with coroutine) opens on the first other name, which it might hold */
    int base_was_open = base_is_open(L);
    if (!base_was_open)
        open_base(L);
    if (strcmp(k, "pairs") == 0) {
        push_pairs(L);
        return 1;
    }
    if (strcmp(k, "next") == 0)
        open_all(L);
    else if (base_was_open)
        return 0;
    lua_pushvalue(L, 2);
    lua_rawget(L, 1);
    return 1;
}

/* The string metatable's __index until the string library opens (which
 * installs the real metatable). */
static int lazy_string_index(lua_State *L)
{
    note_open(L, &lazy_libs[0]);
    lua_pushcfunction(L, luaopen_string);
    lua_pushstring(L, LUA_STRLIBNAME);
    lua_call(L, 1, 1);
    lua_pushvalue(L, 2);
    lua_gettable(L, -2);
    return 1;
}

/* What package.loaded[name] holds while require_unopened runs the module's chunk (the
 * package library's own mark is private to it): met again, the load looped or failed. */
static const char require_sentinel = 's';

/* Pushes the loader the package library's preload table would hold for name (what
 * open_package puts there: ffi, the library's C modules, the host's, the standard libraries
 * not opened yet and their modules) and returns 1; 0 (nothing pushed) if it holds none, or
 * for the package library itself (opened by the real require). */
static int push_preload(lua_State *L, luavm_shared *vm, const char *name)
{
    lua_CFunction f = NULL;
    if (strcmp(name, LUA_FFILIBNAME) == 0)
        f = luaopen_ffi;
    for (const luaL_Reg *r = vm->preloads; !f && r && r->name; r++)
        if (strcmp(r->name, name) == 0)
            f = r->func;
    for (luavm_preload *p = atomic_load_explicit(&vm->host_preloads, memory_order_acquire); !f && p;
         p = p->next) /* the newest first: a later module of a name wins */
        if (strcmp(p->name, name) == 0)
            f = p->open;
    for (const char *const *m = lib_modules; !f && *m; m++)
        if (strcmp(*m, name) == 0)
            f = preload_lib_module;
    if (f) {
        lua_pushcfunction(L, f);
        return 1;
    }
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++) {
        if (strcmp(lib->name, name) == 0) {
            if (!lib->open)
                return 0;
            lua_pushlightuserdata(L, (void *)lib);
            lua_pushcclosure(L, preload_lib, 1);
            return 1;
        }
    }
    return 0;
}

/* require in a state that has not opened its package library, for a name package.loaded
 * does not hold, as the real require would answer it (the preload table's loaders, then a
 * module of the library (smarm.*) or a file on the path a new state's package.path has,
 * through the cache, as the cache's searcher would find it; the loader called with the name,
 * package.loaded[name] marked meanwhile, then set to what it returned or true) without
 * opening the package library: its tables, closures and path strings, and the collections
 * they cost, were 71,000 of the 222,000 instructions a new supervisor child took to start.
 * 1 with the module's value pushed; 0 (the stack as it was) when no loader is found, which
 * the real require then reports. */
static int require_unopened(lua_State *L, const char *name)
{
    luavm_shared *vm = luavm_runtime(L)->vm;
    const char *path = atomic_load_explicit(&vm->search_path, memory_order_acquire);
    if (!path)
        return 0;
    int top = lua_gettop(L);
    /* not loaded (fast_require looked) */
    if (luaL_findtable(L, LUA_REGISTRYINDEX, "_LOADED", 16) != NULL)
        return 0; /* something else than a table there: the real require tells */
    if (!push_preload(L, vm, name) && !modcache_load_unopened(L, name, path)) {
        lua_settop(L, top);
        return 0;
    }
    lua_pushlightuserdata(L, (void *)&require_sentinel);
    lua_setfield(L, top + 1, name);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (!lua_isnil(L, -1))
        lua_setfield(L, top + 1, name);
    else
        lua_pop(L, 1);
    lua_getfield(L, top + 1, name);
    if (lua_touserdata(L, -1) == (void *)&require_sentinel) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
        lua_pushvalue(L, -1);
        lua_setfield(L, top + 1, name);
    }
    lua_replace(L, top + 1);
    lua_settop(L, top + 1);
    return 1;
}

/* require: "smarm" is answered from the state's own core table without opening the package
 * library, and so are the library's modules and the files on the path until it is open
 * (require_unopened); anything else goes to the real require. */
static int fast_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (strcmp(name, "smarm") == 0) {
        push_library(L);
        return 1;
    }
    /* package.loaded first, as the real require looks: a module loaded is returned here; one
     * require_unopened is loading, or failed to load, raises as the package library says of
     * its own (whose mark, another light userdata, is left to it) */
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, name);
        if (lua_touserdata(L, -1) == (void *)&require_sentinel)
            return luaL_error(L, "loop or previous error loading module '%s'", name);
        if (lua_toboolean(L, -1) && !lua_islightuserdata(L, -1))
            return 1;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_pushlightuserdata(L, (void *)&real_require_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        if (require_unopened(L, name))
            return 1;
        open_package(L);
        lua_pushlightuserdata(L, (void *)&real_require_key);
        lua_rawget(L, LUA_REGISTRYINDEX);
    }
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static int open_state(lua_State *L, int fresh)
{
    /* a new state starts with a small string table; it grows as strings come */
    if (fresh) {
        ljx_str_shrink(L, 64);
        ljx_globals_shrink(L);
    }
    /* _G's metatable opens the libraries, base included, on demand */
    lua_createtable(L, NSLOTS, 1);
    lua_pushcfunction(L, lazy_global);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, LUA_GLOBALSINDEX);
    lua_pushliteral(L, "");
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, lazy_string_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
    lua_pushcfunction(L, fast_require);
    lua_setfield(L, LUA_GLOBALSINDEX, "require");
    return 0;
}

/* ---- booting an actor ---- */

void luavm_report(actor *a, const char *what, const char *detail)
{
    log_report(a->rt, LOG_ERROR, "crash_report", a->pid, what, detail);
}

static uint32_t rd_u32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* payload of BOOT_FILE / BOOT_STRING: text\0 u32 argc then argc strings\0 */
static int boot_chunk(lua_State *L, actor *a)
{
    const char *text = a->vm.boot;
    const char *p = text + strlen(text) + 1;
    uint32_t argc = rd_u32(p);
    p += 4;
    int st = a->vm.boot_kind == BOOT_FILE
                 ? luaL_loadfile(L, text)
                 : luaL_loadbuffer(L, text, strlen(text), "=(command line)");
    if (st != 0)
        return -1;
    lua_createtable(L, (int)argc, 1);
    lua_pushstring(L, a->vm.boot_kind == BOOT_FILE ? text : "-e");
    lua_rawseti(L, -2, 0);
    for (uint32_t i = 0; i < argc; i++) {
        lua_pushstring(L, p);
        p += strlen(p) + 1;
        lua_rawseti(L, -2, (int)i + 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_GLOBALSINDEX, "arg");
    /* the chunk's ... are the arguments too */
    luaL_checkstack(L, (int)argc + 4, "too many arguments");
    int t = lua_gettop(L);
    for (uint32_t i = 0; i < argc; i++)
        lua_rawgeti(L, t, (int)i + 1);
    lua_remove(L, t);
    return (int)argc;
}

/* payload of BOOT_FUNC: u32 bytecode length, bytecode, codec argument list */
static int boot_func(lua_State *L, actor *a)
{
    uint32_t bclen = rd_u32(a->vm.boot);
    const char *bc = a->vm.boot + 4;
    if (!a->vm.image || !ljx_image_load(L, a->vm.image, bc, bclen)) {
        if (luaL_loadbuffer(L, bc, bclen, "=spawn") != 0)
            return -1;
        if (a->vm.image)
            ljx_image_keep_load(L, a->vm.image, bc, bclen);
    }
    char err[256];
    int n = 0;
    if (codec_decode_args(L, a->vm.boot + 4 + bclen, a->vm.boot_len - 4 - bclen, &n, err,
                          sizeof err) != 0) {
        lua_pushstring(L, err);
        return -1;
    }
    return n;
}

struct boot_call {
    actor *a;
    int nargs;
};

/* Under ljx_cpcall: lua_cpcall made a C closure for every boot (and a light userdata for
 * bc), some 500 instructions of a pooled state's boot of 3,400. */
static void boot_protected(lua_State *L, void *ud)
{
    struct boot_call *bc = ud;
    actor *a = bc->a;
    if (a->vm.image) /* an image holds what open_state makes */
        ljx_image_boot_prefetch(L, a->vm.image);
    else
        open_state(L, !a->vm.recycled);
    /* a pooled state's last body coroutine, already at the registry's index 1 */
    lua_State *co = a->vm.recycled ? ljx_thread_kept(L) : NULL;
    if (!co) {
        co = lua_newthread(L);
        /* the coroutine stays reachable from the registry for the actor's life, at the index
         * luaL_ref would give it in a state's registry (nothing else refs into it) without
         * luaL_ref's free-list walk */
        lua_rawseti(L, LUA_REGISTRYINDEX, 1);
    }
    a->vm.co = co;
    if (a->vm.boot_kind == BOOT_HOST) {
        bc->nargs = 0; /* a host thread drives the main state: no body */
        return;
    }
    int n = a->vm.boot_kind == BOOT_FUNC ? boot_func(L, a) : boot_chunk(L, a);
    if (n < 0)
        lua_error(L);
    lua_xmove(L, co, n + 1);
    bc->nargs = n;
}

/* ---- making a state ----
 *
 * When an allocation fails inside lua_newstate after the GG_State, LuaJIT frees the partial
 * state through lj_gc_freeall, which walks a string table that does not exist yet and
 * crashes. So the state is made with a reserve at hand: an allocation the heap refuses is
 * carved from the reserve instead, lua_newstate always completes, and a state that needed
 * the reserve is closed at once (freeing a reserve block does nothing) and the actor fails
 * as out of memory. lua_newstate takes about 11 KB. */

#define NEWSTATE_RESERVE 16384

typedef struct newstate {
    actor *a;
    char *reserve;
    size_t used; /* bytes carved from the reserve */
    int fail_at; /* test hook: the fail_at-th allocation fails as if malloc had (0: none) */
    int allocs;
} newstate;

static _Atomic int inject_state, inject_alloc;

void luavm_inject_newstate_failure(int state, int k)
{
    atomic_store_explicit(&inject_alloc, k, memory_order_relaxed);
    atomic_store_explicit(&inject_state, state, memory_order_release);
}

/* The allocation the test hook makes this new state fail (0: none). */
static int injected_failure(void)
{
    if (atomic_load_explicit(&inject_state, memory_order_acquire) <= 0)
        return 0;
    if (atomic_fetch_sub_explicit(&inject_state, 1, memory_order_acq_rel) != 1)
        return 0;
    return atomic_load_explicit(&inject_alloc, memory_order_relaxed);
}

static int in_reserve(const newstate *ns, const void *p)
{
    return (const char *)p >= ns->reserve && (const char *)p < ns->reserve + NEWSTATE_RESERVE;
}

static void *carve(newstate *ns, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > NEWSTATE_RESERVE - ns->used)
        return NULL;
    void *p = ns->reserve + ns->used;
    ns->used += n;
    return p;
}

static void *newstate_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    newstate *ns = ud;
    if (ptr && in_reserve(ns, ptr)) {
        /* a reserve block is never freed; one that must grow moves to a new place */
        if (nsize <= osize)
            return nsize ? ptr : NULL;
        void *p = newstate_alloc(ud, NULL, 0, nsize);
        if (p)
            memcpy(p, ptr, osize);
        return p;
    }
    void *p = NULL;
    if (nsize == 0 && dshare_owns(ptr, osize)) { /* lua_newstate failed */
        dshare_free(ptr);
        ns->a->vm.mem -= osize;
        return NULL;
    }
    if (nsize == 0 || ++ns->allocs != ns->fail_at) {
        /* its first allocation is the GG_State (lua_newstate), which the region may hold */
        if (!ptr && ns->allocs == 1 && nsize == DSHARE_GG_SIZE && (p = dshare_alloc())) {
            ns->a->vm.mem += nsize;
            return p;
        }
        p = alloc_in(ns->a, ptr, osize, nsize, 0);
    }
    if (p || nsize == 0)
        return p;
    /* the heap refused: the reserve answers, and the state will not be used */
    p = carve(ns, nsize);
    if (p && ptr) {
        memcpy(p, ptr, osize < nsize ? osize : nsize);
        alloc_in(ns->a, ptr, osize, 0, 0);
    }
    return p;
}

/* lua_close for a state whose GG_State may be the dispatch region's (vm/dispatch_share.h):
 * LuaJIT frees that block last, through the state's allocation function, which the region's
 * block must not reach. So the close goes through a closing function that gives it back and
 * passes every other block on. (The allocation functions themselves do not ask: they run for
 * every block.) An actor's state keeps the actor as its allocation data, which its
 * finalizers find it by (luavm_actor); it closes with actor_alloc or, with an arena,
 * actor_alloc_arena (luavm_close, luavm_release), which the actor tells apart. A pooled state
 * runs no finalizer (may_recycle), and its closing function has data of its own. */
static void *closing_actor_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    actor *a = ud;
    if (nsize == 0 && dshare_owns(ptr, osize)) {
        dshare_free(ptr);
        a->vm.mem -= osize;
        return NULL;
    }
    if (!a->vm.arena)
        return actor_alloc(ud, ptr, osize, nsize);
    /* The last phase frees every object one by one, and LuaJIT's allocator would coalesce
     * each with its neighbours and bin it: work for memory that goes back whole with the
     * arena right after (luavm_close). An arena block is only counted off then. */
    if (nsize == 0 && in_arena_span(a, ptr) && ljx_freeing_all(a->vm.L)) {
        a->vm.mem -= osize;
        return NULL;
    }
    return actor_alloc_arena(ud, ptr, osize, nsize);
}

struct closing {
    lua_Alloc f;
    void *ud;
};

static void *closing_pooled_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct closing *c = ud;
    if (nsize == 0 && dshare_owns(ptr, osize)) {
        dshare_free(ptr);
        return NULL;
    }
    return c->f(c->ud, ptr, osize, nsize);
}

static void *pooled_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

static void close_lua(lua_State *L)
{
    void *ud;
    lua_Alloc f = lua_getallocf(L, &ud);
    /* newstate_alloc gives the block back itself (a state that needed the reserve) */
    if (!dshare_owns(L, DSHARE_GG_SIZE) || f == newstate_alloc) {
        lua_close(L);
        return;
    }
    if (f == pooled_alloc) {
        struct closing c = {f, ud};
        lua_setallocf(L, closing_pooled_alloc, &c);
        lua_close(L);
        return;
    }
    actor *a = ud;
    lua_setallocf(L, closing_actor_alloc, a);
    lua_close(L);
}

/* Reports why the actor could not start and sets its reason: "memory" past max_heap,
 * else "error" with detail as the message. Returns -1. */
static int boot_failed(actor *a, int memory, const char *what, const char *detail)
{
    luavm_report(a, what, detail);
    if (memory)
        exit_set_reason(a, "memory", 1);
    else
        exit_set_error(a, detail, NULL);
    if (a->pid == a->rt->root_pid)
        a->rt->root_status = 1;
    return -1;
}

/* The reserve, one per thread: a spawn storm would otherwise malloc and free 16 KiB per
 * state. Used only inside new_state, which cannot switch away, so the thread-local address
 * is not kept across a switch; a state that drew on it is closed before new_state returns. */
static __thread char newstate_reserve[NEWSTATE_RESERVE] __attribute__((aligned(16)));

/* A new state allocating through actor_alloc, or NULL (reported) when memory ran out. */
static lua_State *new_state(actor *a)
{
    newstate ns = {a, newstate_reserve, 0, 0, 0};
    ns.fail_at = injected_failure();
    lua_State *L = lua_newstate(newstate_alloc, &ns);
    if (L && ns.used) {
        close_lua(L);
        L = NULL;
    }
    if (!L) {
        boot_failed(a, 0, "could not start", "out of memory");
        return NULL;
    }
    lua_setallocf(L, actor_alloc, a);
    return L;
}

void luavm_drop_boot(actor *a)
{
    if (!a->vm.boot)
        return;
    if (a->vm.boot_kind == BOOT_FUNC) {
        /* arguments never decoded still hold channel references */
        uint32_t bclen = rd_u32(a->vm.boot);
        wire_release(a->vm.boot + 4 + bclen, a->vm.boot_len - 4 - bclen);
    }
    sched_drop_payload(a, a->run.heap_cache); /* it runs on this thread */
}

static lua_State *pool_take(actor *a);

/* A booted state collects for the first time after 4 to 16 KB of allocation (LuaJIT's own
 * first threshold, four times the new state's size, left about 32 KB). Every byte of garbage
 * before a state's first cycle is memory it touches for the first time, and a thousand
 * actors that allocate as they talk (a ring) each touched 32 KB of it before their first
 * cycle freed anything for reuse, at the cost of page faults (microseconds each on a VM) and
 * misses to memory; an actor that parks for good after a burst also keeps less.
 * The room is drawn from the pid: actors started together with the same work would otherwise
 * collect in the same lap, lap after lap (a cycle's threshold follows from the last one's),
 * and free their garbage in bursts that the heap's magazines hand out again long after,
 * cold (docs/DESIGN.md, "Collections between waits"). The draws span FIRST_CYCLE_SPAN, about
 * what a fresh message loop's state frees per cycle (its kept heap, 10-12 KB), so its later
 * cycles, a period apart, stay spread over the period too: a ring of 1,000 ran 20 cycles a
 * lap with a standard deviation of 3.7 per lap, against 7.0 with 8 to 24 KB and 12.1 with
 * 4 to 12 KB, and the memory it touched fell with the bursts (a 16 MB last-level cache
 * simulated: 1.9 misses per hop against 2.8 and 3.2). */
#define FIRST_CYCLE_MIN (4 * 1024)
#define FIRST_CYCLE_SPAN (12 * 1024)

static size_t first_cycle_room(uint64_t pid)
{
    uint64_t h = pid * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing: the high bits mix */
    return FIRST_CYCLE_MIN + (size_t)((h >> 32) % FIRST_CYCLE_SPAN);
}

/* The state is booted without max_heap (nothing LuaJIT does while opening a state is left
 * half-done by a refused allocation); the limit applies from the end of the boot on. */
int luavm_boot(actor *a)
{
    luavm_shared *vm = a->rt->vm;
    const char *fresh = heap_fresh_at(a->run.heap_cache);
    a->vm.arena_at = ARENA_AT;
    lua_State *L = pool_take(a);
    if (!L) {
        L = new_state(a);
        if (!L)
            return -1;
        ljx_jit_copy(L, vm->tmpl); /* a pooled state's reset did this */
    }
    a->vm.L = L;
    /* The root is retuned from the start: the runtime's parameters keep thousands of
     * message loops from compiling a state each, which one state does not need, and a
     * compute program retuned after its first whole slice has its trace tree shaped by
     * when that slice ended (binary-trees ran 30-75% more machine-code instructions than
     * under plain luajit, varying from run to run). */
    if (a->pid == a->rt->root_pid && ljx_jit_retune(L) == 0)
        a->vm.jit_retuned = 1;
    /* every module it requires from here on is the newest version */
    a->vm.code_epoch = atomic_load_explicit(&vm->reload_epoch, memory_order_acquire);
    struct boot_call bc = {a, 0};
    int st = ljx_cpcall(L, boot_protected, &bc);
    luavm_drop_boot(a); /* arguments the boot decoded were marked taken */
    if (st != 0)
        return boot_failed(a, 0, "could not start", lua_tostring(L, -1));
    if (a->vm.max_heap) {
        if (a->vm.mem > a->vm.max_heap) {
            char detail[128];
            snprintf(detail, sizeof detail,
                     "its Lua heap takes %zu bytes once booted, more than max_heap (%zu bytes)",
                     a->vm.mem, a->vm.max_heap);
            a->vm.heap_exceeded = 1;
            return boot_failed(a, 1, "could not start (memory)", detail);
        }
        lua_setallocf(L, actor_alloc_capped, a);
    }
    ljx_gc_room(L, first_cycle_room(a->pid));
    collect_booted(a, fresh, heap_fresh_at(a->run.heap_cache));
    atomic_store_explicit(&a->warm.state, (void *)L, memory_order_relaxed);
    atomic_store_explicit(&a->warm.co, (void *)a->vm.co, memory_order_relaxed);
    return bc.nargs;
}

/* Closing runs the finalizers, which may allocate, and frees: without max_heap. */
/* The state is closed or abandoned: what the actor kept beside it goes too. */
static void forget_state(actor *a)
{
    collect_forget(a);
    a->vm.L = NULL;
    a->vm.co = NULL;
    a->vm.image = NULL;
    actor_warm_clear(&a->warm);
    a->vm.arena = NULL;
    a->vm.arena_lo = 0;
    a->vm.arena_span = 0;
    a->vm.nkept = 0;
    a->vm.general = 0;
    /* a reason whose smarm.exit a pcall caught; a message whose decoding raised */
    free(a->vm.exit_bytes);
    a->vm.exit_bytes = NULL;
    if (a->vm.decoding)
        msg_free(a->vm.decoding);
    a->vm.decoding = NULL;
}

void luavm_close(actor *a)
{
    if (!a->vm.L)
        return;
    a->vm.closing = 1;
    lua_setallocf(a->vm.L, a->vm.arena ? actor_alloc_arena : actor_alloc, a);
    close_lua(a->vm.L);
    /* every block outside the arena went back (closing_actor_alloc counts the arena's off
     * in the last phase); the arena's memory goes with it */
    ljx_arena_free(a->vm.arena);
    forget_state(a);
}

void luavm_abandon(actor *a)
{
    /* its arena is left as the state is: a stack overflow may have cut one of its calls */
    a->vm.closing = 1;
    forget_state(a);
}

/* ---- the state pool ----
 *
 * Making a state and closing it are most of a short actor's cost: lua_newstate interns
 * LuaJIT's fixed strings and builds its dispatch table, and lua_close sweeps them again. So
 * the state of an actor whose body returned or raised is reset instead (vm/ljx.c: an empty
 * registry and globals table, no base-type metatables, no hook, the JIT set up as a new
 * state's; a small state's reset is left to the spawn that takes it: luavm_release) and kept
 * for the next spawn on the same scheduler, which boots it as it would a new one (or on
 * another, see pool_for). Lua code cannot tell: what it could reach of the last
 * actor hung from the registry, the globals, the metatables of the basic types, the hook and the
 * JIT state, and math.random's seed, package.loaded and the libraries are all made anew by the
 * boot. What a reset cannot undo makes a state ineligible (ljx_state_resettable: the FFI's C types,
 * compiled traces, userdata whose metatable has a __gc, which must run at the actor's end), as
 * do an actor killed in the middle of its code (one killed in a coroutine's wait is recycled
 * like a returned one) or abandoned, a crash on the main state, a heap that went over max_heap
 * and a test hook's allocator. The last actor's garbage comes along until the GC takes it,
 * and counts on the new actor's memory, so a spawn with max_heap always makes a new state;
 * a state bigger than POOL_COLLECT_AT after its reset is collected in full, and one still
 * bigger than POOL_STATE_MAX is closed.
 *
 * A pool holds up to POOL_STATES: actors that each live a while (a sleep, a request) end in
 * waves while new ones start, and a pool must hold a whole wave, or it closes the states the
 * next spawns then make again. In tests/bench/timers.lua at -S 1 (one pool, nobody to lend
 * to: pool_for) the waves peak at 4,100-5,100 states alive; the figures for each size tried
 * are in docs/DESIGN.md ("The state pool"). What a wave leaves
 * behind goes back to the system: once a second (luavm_trim, from the watchdog) the states
 * that lay at the bottom of a pool for the whole second, unused, are closed, down to
 * POOL_KEEP. */

#define POOL_SLOTS 16    /* pools; a scheduler uses the one of its id */
#define POOL_STATES 4096 /* states per pool (a trim empties a full one in about a minute) */
#define POOL_KEEP 32     /* states a trim leaves in a pool */
/* states one trim closes per pool: the watchdog closes them, and its ticks wait meanwhile
 * (a pooled state's lua_close is some 50,000 instructions) */
#define POOL_TRIM_MAX 64
#define POOL_COLLECT_AT (32 * 1024) /* a reset state above this is collected in full */
#define POOL_STATE_MAX (48 * 1024)  /* and closed if it is still above this */

typedef struct luavm_pool {
    _Atomic uint32_t lock; /* a spare scheduler may share its pool with another */
    _Atomic uint32_t n;    /* written under the lock, read without it as a hint */
    uint32_t low;          /* the least n since the last trim (under the lock) */
    uint64_t trimmed;      /* states trims closed (under the lock) */
    uint32_t dirty;        /* of the n, those not reset yet (under the lock) */
    struct pooled {
        lua_State *L;
        size_t mem;
        ljx_image *image; /* its image (or NULL); a dirty state's to write back, if any */
        unsigned libs;    /* the libraries in the image (a dirty state's: to have in it) */
        lua_State *keep;  /* a dirty state's coroutine for the next body (or NULL) */
        int dirty;        /* not reset yet: the spawn that takes it resets it (reset_taken) */
    } st[POOL_STATES];
} luavm_pool;

static luavm_pool *pool_of_thread(luavm_shared *vm)
{
    sched *s = sched_current();
    if (!vm->pools || !s || s->kind == SCHED_POOL)
        return NULL;
    return &vm->pools[(unsigned)s->id % POOL_SLOTS];
}

/* The calling scheduler's pool if it has a state (take) or room (put), else the first other
 * scheduler's that has, else NULL. States of a wave end on the scheduler that fires their
 * timers or wakes, while new actors boot on another: with only its own pool, the first
 * closed states its pool had no room for while the second made fresh ones (in
 * tests/bench/timers.lua 27,000 of 100,000 boots were fresh, and their closes, boots and
 * first touches of memory a third of the run). A state taken from another thread's pool is
 * cold here, but a fresh one is colder. */
static luavm_pool *pool_for(luavm_shared *vm, smarm_runtime *rt, int take)
{
    luavm_pool *own = pool_of_thread(vm);
    if (!own)
        return NULL;
    /* the common case without a look at the other pools' lines */
    if (pool_can(atomic_load_explicit(&own->n, memory_order_relaxed), take, POOL_STATES))
        return own;
    uint32_t n[POOL_SLOTS];
    int used = rt->nsched < POOL_SLOTS ? rt->nsched : POOL_SLOTS;
    for (int i = 0; i < used; i++)
        n[i] = atomic_load_explicit(&vm->pools[i].n, memory_order_relaxed);
    int i = pool_pick(n, used, (int)(own - vm->pools), take, POOL_STATES);
    return i < 0 ? NULL : &vm->pools[i];
}

/* A pooled state allocates nothing until a spawn takes it; closing the pools at the end
 * frees it into the heap's depot. */
static void *pooled_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    return heap_realloc(ud, NULL, ptr, osize, nsize);
}

static int reset_taken(actor *a, struct pooled *e);

/* A pooled state for a, or NULL. */
static lua_State *pool_take(actor *a)
{
    luavm_shared *vm = a->rt->vm;
    /* a max_heap counts the last actor's garbage; the boot-failure test hook counts states */
    if (a->vm.max_heap || a->vm.boot_kind == BOOT_HOST ||
        atomic_load_explicit(&inject_state, memory_order_relaxed) > 0)
        return NULL;
    luavm_pool *p = pool_for(vm, a->rt, 1);
    if (!p)
        return NULL;
    struct pooled got = {NULL, 0, NULL, 0, NULL, 0};
    spin_lock(&p->lock);
    uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    if (n) {
        got = p->st[n - 1];
        p->dirty -= (uint32_t)got.dirty;
        atomic_store_explicit(&p->n, n - 1, memory_order_relaxed);
        if (p->low > n - 1)
            p->low = n - 1;
    }
    spin_unlock(&p->lock);
    if (!got.L)
        return NULL;
    /* what the boot reads first, and the image its ljx_image_load reads after a few other
     * misses */
    ljx_state_prefetch(got.L);
    if (got.image)
        ljx_image_prefetch(got.image);
    lua_setallocf(got.L, actor_alloc, a);
    a->vm.mem = got.mem;
    if (got.dirty && reset_taken(a, &got) != 0)
        return NULL;
    a->vm.recycled = 1;
    a->vm.image = got.image;
    a->vm.image_libs = got.libs;
    atomic_fetch_add_explicit(&vm->states_recycled, 1, memory_order_relaxed);
    return got.L;
}

/* Whether a's state may go back to a pool (besides what ljx_state_resettable checks). */
static int may_recycle(actor *a)
{
    lua_Alloc f = lua_getallocf(a->vm.L, NULL);
    /* a state with an arena of its own (a large heap; under max_heap it keeps
     * actor_alloc_capped) or with kept malloc blocks is closed: the next tenant's allocator
     * would free those blocks into the heap */
    return !a->vm.arena && !a->vm.nkept && !a->vm.general && a->vm.boot_kind != BOOT_HOST &&
           a->pid != a->rt->root_pid && !a->vm.heap_exceeded && !a->run.overflowed &&
           !a->vm.cret_slot && !a->vm.decoding && !a->vm.in_cont &&
           (f == actor_alloc || f == actor_alloc_capped) && ljx_state_resettable(a->vm.L);
}

/* ---- the image of a pooled state ----
 *
 * A reset that empties the state leaves the next actor's boot to make the globals' and the
 * string type's metatables, the smarm table and the exit error's metatable again, and each
 * library it uses to be opened again (the base library alone is some 20,000 instructions).
 * So right after such a reset the state is given all of that, with the standard libraries
 * its last actor opened (of those an image can hold), and ljx_image_take copies it; the
 * next resets write that copy back (ljx_state_reset) instead of emptying the state, which
 * undoes whatever an actor stored into, replaced or removed from those tables, and their
 * metatables. An actor that opened the debug or the jit library could have changed the
 * objects themselves (upvalues, environments, metatables of other types, the constants of
 * a prototype the image keeps): its state is emptied and imaged anew, as is one whose actor
 * opened a library its image lacks (so the image grows to what the pool's actors use). */

static unsigned image_eligible(void)
{
    static _Atomic unsigned cached; /* the same bits whoever computes them */
    unsigned got = atomic_load_explicit(&cached, memory_order_relaxed);
    if (got)
        return got;
    unsigned bits = LIB_BASE;
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++)
        if (lib->open == luaopen_string || lib->open == luaopen_table ||
            lib->open == luaopen_math || lib->open == luaopen_os || lib->open == luaopen_bit)
            bits |= lib_bit(lib);
    atomic_store_explicit(&cached, bits, memory_order_relaxed);
    return bits;
}

/* The libraries that reach inside the image's objects: debug (upvalues, environments,
 * metatables of every type), jit (jit.util hands out a prototype's constants, a body's
 * template tables among them). */
static unsigned lib_unsafe(void)
{
    static _Atomic unsigned cached;
    unsigned got = atomic_load_explicit(&cached, memory_order_relaxed);
    if (got)
        return got;
    unsigned bits = 0;
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++)
        if (lib->open == luaopen_debug || lib->open == luaopen_jit)
            bits |= lib_bit(lib);
    atomic_store_explicit(&cached, bits, memory_order_relaxed);
    return bits;
}

/* Whether a's state may be written back from its image: it has one, and a's body could not
 * reach inside the image's objects (nor the registry that anchors it). */
static int image_restorable(actor *a) { return a->vm.image && !(a->vm.libs_open & lib_unsafe()); }

/* Opens in L what an image holds: the boot tables, the libraries libs. */
static void build_image(lua_State *L, unsigned libs)
{
    open_state(L, 0);
    if (libs & LIB_BASE)
        open_base(L);
    for (const struct lazy_lib *lib = lazy_libs; lib->name; lib++)
        if (lib->open && (libs & lib_bit(lib)))
            open_lib(L, lib);
    /* the smarm table with the functions most actors use (its __index adds each on first
     * use, a closure and an interned name per actor otherwise) */
    static const char *const hot[] = {"self", "send",  "recv", "spawn",
                                      "now",  "sleep", "exit", NULL};
    push_library(L);
    for (const char *const *f = hot; *f; f++) {
        lua_getfield(L, -1, *f);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    body_prepare_state(L);
}

struct reset_call {
    lua_State *tmpl;
    ljx_image *restore; /* the image to write back (or NULL: empty the state, image it anew) */
    unsigned want;      /* the libraries its image is to hold */
    lua_State *keep;    /* the body's coroutine, kept for the next body (or NULL) */
    ljx_image *image;   /* out: the state's image (or NULL) */
    int restored;       /* out: written back from it */
    unsigned libs;      /* out: of these libraries */
    size_t image_bytes; /* out: the heap the image takes */
};

static void reset_protected(lua_State *L, void *ud)
{
    struct reset_call *rc = ud;
    unsigned want = rc->want;
    /* the kept coroutine stays on the stack (an image holds no thread) until the end */
    if (ljx_state_reset(L, rc->tmpl, POOL_COLLECT_AT, rc->restore, &rc->image_bytes, rc->keep)) {
        rc->image = rc->restore;
        rc->restored = 1;
        rc->libs = want;
    } else {
        build_image(L, want);
        rc->image = ljx_image_take(L, &image_key);
        if (rc->image) {
            rc->libs = want;
            rc->image_bytes = ljx_gc_total(L);
        } else { /* emptied again: the next boot makes its tables */
            ljx_state_reset(L, rc->tmpl, POOL_COLLECT_AT, NULL, &rc->image_bytes, rc->keep);
        }
    }
    if (rc->keep) { /* where the next boot finds it (ljx_thread_kept) */
        lua_settop(L, 1);
        lua_rawseti(L, LUA_REGISTRYINDEX, 1);
        if (rc->image)
            ljx_image_keep_thread(rc->image, rc->keep);
    }
}

_Static_assert(ACTOR_WARM_SITES == LJX_SITE_HINTS, "an actor's call-site hints are vm/ljx.h's");

void luavm_warm(actor *a, int next)
{
    void *L = atomic_load_explicit(&a->warm.state, memory_order_relaxed);
    void *co = atomic_load_explicit(&a->warm.co, memory_order_relaxed);
    if (L && co)
        ljx_wake_prefetch(L, co, a->warm.site, !next);
}

/* Resets e's state (its allocator counting on *mem) and fills in e's image and libraries: 0,
 * or -1 if the reset raised (out of memory) or left more than POOL_STATE_MAX past its image,
 * and the state is to be closed. */
static int reset_pooled(luavm_shared *vm, struct pooled *e, size_t *mem)
{
    struct reset_call rc = {vm->tmpl, e->image, e->libs, e->keep, 0, 0, 0, 0};
    if (ljx_cpcall(e->L, reset_protected, &rc) != 0 || *mem > rc.image_bytes + POOL_STATE_MAX)
        return -1;
    e->image = rc.image;
    e->libs = rc.libs;
    e->keep = NULL;
    e->dirty = 0;
    if (rc.restored)
        atomic_fetch_add_explicit(&vm->states_restored, 1, memory_order_relaxed);
    return 0;
}

/* A spawn took a dirty state (its allocator is a's, counting on a->vm.mem): its reset runs
 * now, before the boot, as it would have run at its last actor's end. 0, or -1 with the state
 * closed (the caller makes a new one). */
static int reset_taken(actor *a, struct pooled *e)
{
    if (reset_pooled(a->rt->vm, e, &a->vm.mem) == 0)
        return 0;
    close_lua(e->L);
    a->vm.mem = 0;
    return -1;
}

/* The state of an actor that ended goes to a pool. One that keeps little (at most
 * POOL_COLLECT_AT: no full collection due at its reset) goes dirty, and the spawn that takes
 * it resets it (reset_taken): the end of an actor is on the way of whoever waits for the
 * next run of its scheduler (a fired timer, a message), a boot is where the work of a new
 * actor starts anyway, and the state's lines are read once for the reset and the boot
 * instead of cold twice. In tests/bench/timers.lua the woken sleepers waited 1.6-2.9 ms in
 * the run queue behind one another, each wake's run taking longer than a boot, so the
 * sleepers booted between two waves woke in one burst (docs/DESIGN.md, "A dirty pool"). A
 * bigger state is reset here, where its collection frees what it holds at once. */
void luavm_release(actor *a)
{
    luavm_shared *vm = a->rt->vm;
    ljx_image *image = image_restorable(a) ? a->vm.image : NULL;
    /* the lines the checks read are asked for before their first steps reach them, and the
     * image of a state reset here (a dirty one's is asked for by the spawn that takes it) */
    if (a->vm.L) {
        ljx_state_prefetch(a->vm.L);
        if (a->vm.mem > POOL_COLLECT_AT && image)
            ljx_image_prefetch(image);
    }
    luavm_pool *p = a->vm.L ? pool_for(vm, a->rt, 0) : NULL;
    if (!p || !may_recycle(a)) {
        luavm_close(a);
        return;
    }
    lua_State *L = a->vm.L;
    a->vm.closing = 1; /* no preemption hook is armed from here on */
    /* a coroutine whose function returned runs the next body: no thread and stack to make
     * at its boot, none left behind as garbage (a pooled state collects only past
     * POOL_COLLECT_AT, and in tests/bench/timers.lua dead coroutines were most of what
     * recycled states carried) */
    lua_State *keep = a->vm.co && ljx_thread_renewable(a->vm.co) ? a->vm.co : NULL;
    /* what its image holds is written back, unless its actor could reach inside it or opened
     * a library it lacks: then the reset empties the state and images it anew */
    unsigned want = a->vm.image_libs | (a->vm.libs_open & image_eligible());
    ljx_image *restore = want == a->vm.image_libs ? image : NULL;
    struct pooled entry = {L, a->vm.mem, restore, want, keep, 1};
    if (a->vm.mem > POOL_COLLECT_AT) {
        /* protected: the reset allocates (a registry, a globals table, an image), past any
         * max_heap (its garbage is counted, not capped) */
        lua_setallocf(L, actor_alloc, a);
        if (reset_pooled(vm, &entry, &a->vm.mem) != 0) {
            close_lua(L);
            forget_state(a);
            return;
        }
        entry.mem = a->vm.mem;
    }
    lua_setallocf(L, pooled_alloc, &a->rt->heap);
    a->vm.mem = 0;
    spin_lock(&p->lock);
    uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
    int kept = n < POOL_STATES;
    if (kept) {
        p->st[n] = entry;
        p->dirty += (uint32_t)entry.dirty;
        atomic_store_explicit(&p->n, n + 1, memory_order_relaxed);
    }
    spin_unlock(&p->lock);
    if (!kept)
        close_lua(L);
    forget_state(a);
}

void luavm_pool_counts(luavm_shared *vm, uint64_t *pooled, uint64_t *dirty, uint64_t *trimmed)
{
    *pooled = *dirty = *trimmed = 0;
    for (int i = 0; vm->pools && i < POOL_SLOTS; i++) {
        luavm_pool *p = &vm->pools[i];
        spin_lock(&p->lock);
        *pooled += atomic_load_explicit(&p->n, memory_order_relaxed);
        *dirty += p->dirty;
        *trimmed += p->trimmed;
        spin_unlock(&p->lock);
    }
}

void luavm_trim(luavm_shared *vm)
{
    for (int i = 0; vm->pools && i < POOL_SLOTS; i++) {
        luavm_pool *p = &vm->pools[i];
        lua_State *idle[POOL_TRIM_MAX];
        uint32_t k = 0;
        spin_lock(&p->lock);
        uint32_t n = atomic_load_explicit(&p->n, memory_order_relaxed);
        /* st[0, low) lay in the pool the whole second: the oldest go */
        if (p->low > POOL_KEEP) {
            k = p->low - POOL_KEEP < POOL_TRIM_MAX ? p->low - POOL_KEEP : POOL_TRIM_MAX;
            for (uint32_t j = 0; j < k; j++) {
                idle[j] = p->st[j].L;
                p->dirty -= (uint32_t)p->st[j].dirty;
            }
            memmove(&p->st[0], &p->st[k], (n - k) * sizeof p->st[0]);
            n -= k;
            atomic_store_explicit(&p->n, n, memory_order_relaxed);
            p->trimmed += k;
        }
        p->low = n;
        spin_unlock(&p->lock);
        /* a pooled state frees into the heap's depot from any thread (pooled_alloc) */
        for (uint32_t j = 0; j < k; j++)
            close_lua(idle[j]);
    }
}

static void pools_free(luavm_shared *vm)
{
    for (int i = 0; vm->pools && i < POOL_SLOTS; i++) {
        luavm_pool *p = &vm->pools[i];
        for (uint32_t n = atomic_load(&p->n); n > 0; n--)
            close_lua(p->st[n - 1].L);
        atomic_store(&p->n, 0);
        p->dirty = 0;
    }
    free(vm->pools);
    vm->pools = NULL;
}

/* ---- decoding a received message ---- */

struct decode_call {
    msg *m;
    char *err;
    size_t errlen;
    int rc;
};

static void decode_protected(lua_State *L, void *ud)
{
    struct decode_call *dc = ud;
    msg *m = dc->m;
    dc->rc = m->flat == MSG_DEEP ? codec_decode_marked(L, m->data, m->len, dc->err, dc->errlen)
                                 : codec_decode(L, m->data, m->len, dc->err, dc->errlen);
}

/* A GC step inside the decoder would run pending __gc finalizers, and an error one raises
 * would leave the decoder with the message already taken: so the GC is held meanwhile
 * (it catches up at the receiver's next allocation, where a finalizer's error is the
 * receiver's own). Protected, so the caller frees the message before it raises. */
void luavm_gc_catch_up(lua_State *L) { ljx_gc_check(L); }

/* m is decoded where it lies: a decode that raises (out of memory) leaves it in
 * a->vm.decoding, freed by the next decode or when the state closes. */
static inline void decoding_begin(actor *a, msg *m)
{
    if (__builtin_expect(a->vm.decoding != NULL, 0))
        msg_free(a->vm.decoding);
    a->vm.decoding = m;
}

int luavm_decode(actor *a, lua_State *L, msg *m, char *err, size_t errlen)
{
    if (m->flat == MSG_FLAT || (!m->flat && flat_decodable(L, m->data, m->len))) {
        /* checked already: its decode raises only when out of memory, m left to the caller */
        flat_decode(L, m->data, m->len, a);
        return 0;
    }
    struct decode_call dc = {m, err, errlen, 0};
    int st = 0;
    if (a->vm.in_cont) {
        /* a continuation is protected and holds the GC already (body_entry): a memory error
         * ends the actor, and closing it frees the message */
        decoding_begin(a, m);
        decode_protected(L, &dc);
        a->vm.decoding = NULL;
    } else {
        size_t held = ljx_gc_hold(L);
        st = ljx_cpcall(L, decode_protected, &dc);
        ljx_gc_resume(L, held);
    }
    if (st)
        return 1;
    return dc.rc < 0 ? -1 : 0;
}

void luavm_take(actor *a, lua_State *L, msg *m, const char *fname)
{
    if (m->flat == MSG_FLAT || (!m->flat && flat_decodable(L, m->data, m->len))) {
        /* the decode raises only when out of memory: no protected call to free m after it
         * (nor a copy of m to free it before, 30 instructions a message) */
        decoding_begin(a, m);
        flat_decode(L, m->data, m->len, a);
        a->vm.decoding = NULL;
        msg_free(m);
        return;
    }
    char err[256];
    int rc = luavm_decode(a, L, m, err, sizeof err);
    msg_free(m);
    if (rc > 0)
        lua_error(L); /* out of memory */
    if (rc < 0)
        luaL_error(L, "%s: cannot decode a message: %s", fname, err);
}

/* ---- the runtime-wide part ---- */

/* Compiles pairs_maker_src once: the inner function, stripped, and its upvalues' places. */
static int dump_pairs_maker(luavm_shared *vm)
{
    lua_State *T = vm->tmpl;
    int ok = 0;
    lua_getglobal(T, "string");
    lua_getfield(T, -1, "dump");
    if (luaL_loadbuffer(T, pairs_maker_src, sizeof pairs_maker_src - 1, "=[C]") == 0 &&
        lua_pcall(T, 0, 1, 0) == 0) {
        ok = 1;
        for (int u = 0; u < 6; u++) {
            vm->pairs_uv[u] = 0;
            const char *name;
            for (int i = 1; (name = lua_getupvalue(T, -1, i)) != NULL; i++) {
                lua_pop(T, 1);
                if (strcmp(name, pairs_upvalues[u]) == 0)
                    vm->pairs_uv[u] = i;
            }
            ok = ok && vm->pairs_uv[u];
        }
        lua_pushboolean(T, 1);
        ok = ok && lua_pcall(T, 2, 1, 0) == 0;
    }
    if (ok) {
        size_t n;
        const char *bc = lua_tolstring(T, -1, &n);
        vm->pairs_bc = malloc(n);
        if (vm->pairs_bc) {
            memcpy(vm->pairs_bc, bc, n);
            vm->pairs_bc_len = n;
        }
    }
    lua_settop(T, 0);
    return vm->pairs_bc ? 0 : -1;
}

/* The template state's allocator: malloc. Not LuaJIT's own (luaL_newstate's), whose
 * mappings go through arena_map: the template compiles modules while some actor runs, and
 * a piece mapped then would come from that actor's arena reservation and keep it alive. */
static void *template_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

int luavm_shared_init(luavm_shared *vm, const char *app_dir)
{
    memset(vm, 0, sizeof *vm);
    pthread_mutex_init(&vm->lock, NULL);
    vm->tmpl = lua_newstate(template_alloc, NULL);
    if (!vm->tmpl)
        return SMARM_ENOMEM;
    luaL_openlibs(vm->tmpl);
    ljx_init(vm->tmpl);
    /* small machine-code areas: >100k states can compile traces before the
     * ±1 GB placement limit around LuaJIT's own code is reached */
    ljx_jit_set_sizemcode(vm->tmpl, 16);
    /* Each state compiles its own traces (machine code, mprotect calls, icache
     * footprint): a loop is compiled after 2000 iterations instead of 56, so
     * message loops of many actors stay interpreted unless they get busy, while
     * compute loops still compile at once. And a trace that would reach a C call
     * (recv, send, a socket op) within 32 IR instructions of its start is not
     * recorded: a message loop (`while true do local m = recv() ...`) would
     * otherwise compile after 2000 messages into traces stitched around each C
     * call, which in a 1,000-actor ring made a hop 70% slower (each state's
     * traces are cold when its next message comes; the interpreter is shared and
     * stays warm). The loop is blacklisted instead; the functions it calls still
     * compile on their own. An actor retuned to LuaJIT's parameters stitches. */
    (void)luaL_dostring(vm->tmpl, "jit.opt.start('hotloop=2000', 'minstitch=32')");
    if (dump_pairs_maker(vm) != 0)
        return SMARM_ENOMEM;
    vm->pools = calloc(POOL_SLOTS, sizeof *vm->pools);
    if (!vm->pools)
        return SMARM_ENOMEM;
    if (app_dir) {
        size_t n = strlen(app_dir) * 2 + 32;
        vm->package_path = malloc(n);
        if (!vm->package_path)
            return SMARM_ENOMEM;
        snprintf(vm->package_path, n, "%s/?.lua;%s/?/init.lua", app_dir, app_dir);
    }
    return 0;
}

int luavm_add_preload(luavm_shared *vm, const char *name, int (*open)(lua_State *L))
{
    luavm_preload *p = malloc(sizeof *p);
    char *n = strdup(name);
    if (!p || !n) {
        free(p);
        free(n);
        return -1;
    }
    p->name = n;
    p->open = open;
    p->next = atomic_load_explicit(&vm->host_preloads, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&vm->host_preloads, &p->next, p,
                                                  memory_order_release, memory_order_relaxed))
        ;
    return 0;
}

void luavm_shared_free(luavm_shared *vm)
{
    luavm_preload *p = atomic_load(&vm->host_preloads);
    while (p) {
        luavm_preload *next = p->next;
        free(p->name);
        free(p);
        p = next;
    }
    atomic_store(&vm->host_preloads, NULL);
    pools_free(vm);
    modcache_free(vm);
    if (vm->tmpl)
        lua_close(vm->tmpl);
    vm->tmpl = NULL;
    free(vm->package_path);
    vm->package_path = NULL;
    free(atomic_load(&vm->search_path));
    atomic_store(&vm->search_path, NULL);
    free(vm->pairs_bc);
    vm->pairs_bc = NULL;
    pthread_mutex_destroy(&vm->lock);
}

LUA_UNWOUND_END

void luavm_where(lua_State *L, char *file, size_t n, int32_t *line, const void **chunk)
{
    lua_Debug ar;
    for (int level = 0; level < 4 && lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0)
            continue;
        snprintf(file, n, "%s", ar.short_src);
        *line = ar.currentline;
        *chunk = NULL; /* the next wait formats its chunk's name again */
        return;
    }
}
