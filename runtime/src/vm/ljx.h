/* ljx: the few LuaJIT internals the runtime needs (yieldability, int64 cdata, JIT set-up).
 * The only file that includes LuaJIT's private lj_*.h headers; see ljx.c for why each is used. */
#ifndef SMARM_LJX_H
#define SMARM_LJX_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

#include "base/arena_map.h"

/* 1 if lua_yield from a C function called by the Lua code now running in coroutine L would
 * succeed (no C-call boundary such as a table.sort comparator in between), else 0. */
int ljx_can_yield(lua_State *L);

/* If the value at idx is an int64_t or uint64_t cdata (also typedefs/attributes of 8-byte
 * integers, e.g. ffi.new("long")), store its bits, set *is_unsigned and return 1; else 0. */
int ljx_cdata_int64(lua_State *L, int idx, uint64_t *bits, int *is_unsigned);

/* Push a new int64_t (or uint64_t) cdata holding bits. If L never loaded the FFI, it is loaded
 * here exactly as the parser does for a 1LL literal (no global "ffi"; ~11 KB). Needs 1 free
 * stack slot; may raise a Lua error only when out of memory. */
void ljx_push_int64(lua_State *L, uint64_t bits, int is_unsigned);

/* Turn on the JIT of a fresh state `to` (luaopen_jit never called in it) by copying the CPU
 * feature flags, optimisation flags and parameters of `from`, a state that opened the jit
 * library. Saves luaopen_jit's cpuid calls (~7 us). Opening the jit library in `to` later
 * resets its flags and parameters to the defaults. */
void ljx_jit_copy(lua_State *to, lua_State *from);

/* Set the size of each machine-code area (KB; default 64) / of all areas together (KB;
 * default 512) for traces compiled from now on in L's state. */
void ljx_jit_set_sizemcode(lua_State *L, int kb);
void ljx_jit_set_maxmcode(lua_State *L, int kb);

/* Give L's state LuaJIT's default JIT parameters (those luaopen_jit sets), flush its
 * traces and restart its hot counters from the new hotloop. From Lua code or a hook, never
 * from a trace. 0, or -1 inside a __gc finalizer or while recording (nothing changes). */
int ljx_jit_retune(lua_State *L);

/* Called as a wait parks L (from the wait's C function). A loop of the waiting function,
 * around the wait's call, whose recording L's state abandoned as "trace too short" (a
 * message loop whose first act is a C call: with the runtime's minstitch, and with LuaJIT's
 * when nothing precedes the call) gets its next recording put off for about 16,000 passes,
 * and that one will be its last: LuaJIT would try eight more times within the next 40,000
 * passes, each recording switching the dispatch table twice. Reads the penalty slots the
 * state has used (none if nothing ever aborted). Returns how many loops it put off. */
int ljx_jit_defer_wait_loop(lua_State *L);

/* A raw view of a value, read without the Lua stack or metamethods (used by the message
 * encoder: ~5x faster than the API calls). Pointers stay valid only while no Lua code runs and
 * nothing is allocated in the state. Boolean: num is 0 or 1. */
enum { LJX_TCDATA = 10, LJX_TINT64 = 11, LJX_TUINT64 = 12 }; /* beside LUA_TNIL..LUA_TTHREAD */
typedef struct ljx_val { /* small: the encoder keeps two per nesting level on the C stack */
    int type;            /* LUA_T* (LUA_TNONE for an empty stack slot), or LJX_T* above */
    size_t len;          /* LUA_TSTRING: str[0..len); LUA_TUSERDATA: payload bytes */
    union {
        double num;        /* LUA_TNUMBER, LUA_TBOOLEAN */
        const char *str;   /* LUA_TSTRING */
        uint64_t bits;     /* LJX_TINT64, LJX_TUINT64; LUA_TLIGHTUSERDATA (see ljx_lightud) */
        const void *table; /* LUA_TTABLE: for ljx_table_*, and identity (cycle checks) */
        void *ud;          /* LUA_TUSERDATA: the payload of a plain (C API) full userdata,
                              NULL for LuaJIT's own kinds (files, string buffers) */
    };
} ljx_val;

void ljx_read(lua_State *L, int idx, ljx_val *v);
/* If the value at stack index idx (> 0, or < 0 from the top) is a number, stores it in *d and
 * returns 1; else 0. lua_type and lua_tonumber take ~70 instructions between them (a pid on
 * every send). */
int ljx_number_at(lua_State *L, int idx, double *d);
/* The string at stack index idx (as ljx_number_at's) and its length in *len, or NULL when the value
 * is not a string (no conversion of numbers, unlike lua_tolstring). */
const char *ljx_string_at(lua_State *L, int idx, size_t *len);
/* The block of the full userdata at stack index idx (as ljx_number_at's)
 * when its size is size, else NULL: lua_type, lua_objlen and lua_touserdata in one call (a
 * socket's methods check their object on every call). */
void *ljx_udata_at(lua_State *L, int idx, size_t size);

/* The state's allocator data, as lua_getallocf gives it (a call into LuaJIT that link-time
 * optimization cannot inline: luavm_actor's, several times a message). */
void *ljx_alloc_data(lua_State *L);
/* The pointer of a light userdata read by ljx (its bits), in L's state. */
void *ljx_lightud(lua_State *L, uint64_t bits);
size_t ljx_table_len(const void *table);                      /* raw #t (a border) */
void ljx_table_geti(const void *table, size_t i, ljx_val *v); /* raw t[i] */
/* Raw iteration over every non-nil entry: *pos = 0 to start; returns 0 at the end. */
int ljx_table_next(const void *table, size_t *pos, ljx_val *k, ljx_val *v);

/* Shrinks the string hash table of a fresh state to `slots` (a power of two) buckets;
 * it grows by itself as strings are interned. */
void ljx_str_shrink(lua_State *L, unsigned slots);
/* The globals table of a fresh state, empty, with room for LJX_GLOBALS_HBITS bits of keys
 * instead of LuaJIT's 64 nodes (1.5 KB per state): it grows as keys come. */
#define LJX_GLOBALS_HBITS 1
void ljx_globals_shrink(lua_State *L);
/* Gives the globals table a hash part of at least 2^hbits nodes at once, keeping its keys:
 * a library about to register many names makes one resize instead of a doubling per power
 * of two it passes. */
void ljx_globals_reserve(lua_State *L, unsigned hbits);
/* The part the base library needs: its 29 names, coroutine and require fit 32 nodes, where
 * LuaJIT's rehash gets after four doublings from LJX_GLOBALS_HBITS. */
#define LJX_GLOBALS_BASE_HBITS 5

/* A state that can be made to look just created again (the state pool, vm/luavm.c): 1 if
 * nothing runs on L, it never opened the FFI (its C types cannot be forgotten), never
 * compiled a trace, runs no profiler or vmevent handler, and holds no userdata with a
 * metatable (whose finalizer would run later, in the next actor). Else 0. */
int ljx_state_resettable(lua_State *L);

/* Asks the cache for the lines of L's state that a reset or a pooled state's boot reads
 * first (the main state, the collector's, hook's and JIT's fields, the hot counters): a
 * state that waited in the pool or whose actor slept is cold, and taken one after the other
 * each would be a miss of its own. L is a main state (lua_newstate's). A hint: nothing is
 * read. */
void ljx_state_prefetch(lua_State *L);

/* Where a wait returns to in its Lua caller (ljx_caller_where fills them in): the call's
 * bytecode address, its prototype's constants pointer, the calling function's bytecode
 * pointer (the closure's field the return reads) and its frame slot (kept up with the stack,
 * which may move between waits at the same call site). The return from the wait reads those
 * four lines first, cold in a woken actor of many. Then the template of the first table
 * constructor after the call (`{hop = k + 1}`), which the constructor copies, and the slot of
 * the first constant the code after the call reads (the key of `m.hop`, the template): the
 * prototype's constants lie after its bytecode, on a line of their own. Hints only (NULL:
 * none). */
enum {
    LJX_SITE_PC,
    LJX_SITE_PROTO,
    LJX_SITE_FN,
    LJX_SITE_FRAME,
    LJX_SITE_TEMPLATE,
    LJX_SITE_CONST,
    LJX_SITE_HINTS
};

/* The same for a wake of co, the body coroutine of L's state: the lines a resume reads first
 * (not the reset's registry, image and JIT fields), those of the wait's call site (site:
 * LJX_SITE_HINTS addresses) and, with dispatch, the interpreter's dispatch table. A hint:
 * nothing is read but site. */
void ljx_wake_prefetch(lua_State *L, lua_State *co, _Atomic(const void *) *site, int dispatch);

/* A state's image: the copy ljx_state_reset writes back. */
typedef struct ljx_image ljx_image;

/* Copies what L's registry, globals and base-type metatables reach (tables, C functions, plain
 * userdata) into an image anchored in its registry under key, for ljx_state_reset to write
 * back, and returns it: the caller keeps the pointer beside the state (it is valid while the
 * registry holds the anchor, which no Lua code reaches without the debug library). NULL (and
 * no image) if they reach a Lua function, a thread, cdata, other userdata, or more objects
 * than an image takes. Raises on memory errors. */
ljx_image *ljx_image_take(lua_State *L, const void *key);

/* Asks the cache for the lines of im that a write-back reads first (a hint: nothing is read
 * through im). */
void ljx_image_prefetch(const ljx_image *im);

/* Notes where co, the kept coroutine (ljx_thread_kept), and its stack are, for
 * ljx_image_boot_prefetch. */
void ljx_image_keep_thread(ljx_image *im, lua_State *co);

/* At the boot of a pooled state with its image im: asks for the lines the boot reads next
 * (the registry's array, the kept coroutine and its stack, the last body's bytecode string
 * and function), after a read of im itself (ljx_image_prefetch asked for it earlier). */
void ljx_image_boot_prefetch(lua_State *L, ljx_image *im);

/* With L's image im: pushes the function ljx_image_keep_load kept, with L's globals as its
 * environment again, if bc (len bytes) is the bytecode it was loaded from, and returns 1;
 * else 0. */
int ljx_image_load(lua_State *L, ljx_image *im, const char *bc, size_t len);

/* Keeps a function of the prototype of the Lua function on top of L, loaded from bc, beside
 * L's image im: the body of later spawns of bc (ljx_image_load). */
void ljx_image_keep_load(lua_State *L, ljx_image *im, const char *bc, size_t len);

/* Makes everything Lua code could reach in L unreachable, or as it was: with its image im
 * (not NULL), the tables of the image are written back as they were when it was
 * taken (returns 1); else (returns 0) an empty registry and globals table, no base-type
 * metatables or default files. Both ways: no hook, the GC's parameters and threshold as
 * in a new state, the JIT's flags and parameters as from's (ljx_jit_copy) with fresh hot
 * counters. A GC cycle under way, or a heap above collect_at bytes past the image's (the heap
 * right after it was taken, stored in *image_bytes; 0 without one), is
 * then collected in full (which may free what the reset let go of). For a state
 * ljx_state_resettable took; an image only for one whose last tenant could not change the
 * image's objects otherwise than through their tables (no debug library). keep (NULL or a
 * thread of L's state) survives the reset and is the one value on L's stack after it, for
 * the caller to anchor (vm/luavm.c puts it at the registry's index 1 for ljx_thread_kept). */
int ljx_state_reset(lua_State *L, lua_State *from, size_t collect_at, ljx_image *im,
                    size_t *image_bytes, lua_State *keep);

/* Whether co, a coroutine of L's state whose function returned (or that never ran), can run
 * another function as if new (ljx_thread_kept): not suspended or dead of an error, no
 * C frame or open upvalue on it, and its stack grown to no more than eight times a new
 * thread's (a body's first call of a C function doubles it; a deep recursion's is let go). */
int ljx_thread_renewable(lua_State *co);

/* The thread at L's registry index 1, where a pooled state keeps the last body's coroutine,
 * made to look just created by lua_newthread(L) (an empty stack cleared to nil, L's globals
 * as its environment); NULL if there is none. */
lua_State *ljx_thread_kept(lua_State *L);

/* Whether pc lies in one of L's machine-code areas (JIT-compiled traces).
 * Async-signal-safe on the thread running L. */
int ljx_pc_in_mcode(lua_State *L, uintptr_t pc);

/* Learns, once per process, where LuaJIT's interpreter resumes after calling a C function
 * (calls a probe in L). Before ljx_c_return_slot. */
void ljx_init(lua_State *L);

/* If the state of L runs a C function called from Lua code (by a JIT-compiled trace, or by
 * the interpreter, as a stitched trace does), the stack slot holding that call's return
 * address, when it lies in [lo, hi); else NULL. For the preemption signal handler on the
 * thread running L (async-signal-safe); pc is the interrupted one. */
uintptr_t *ljx_c_return_slot(lua_State *L, uintptr_t pc, uintptr_t lo, uintptr_t hi);

/* Whether L's state runs Lua code called from a debug hook or a JIT event handler: LuaJIT's
 * C code below it keeps the thread's errno address, so a switch there must resume on the
 * same OS thread. Async-signal-safe. */
int ljx_in_hook(lua_State *L);

/* Bytes currently allocated by L's state (all its coroutines). */
size_t ljx_gc_total(lua_State *L);

/* Whether L's state is in lua_close's last phase (lj_gc_freeall and after), where LuaJIT
 * frees every object that is left: its finalizers have run, and nothing is allocated from
 * then on. */
int ljx_freeing_all(lua_State *L);

/* Holds L's garbage collector: until ljx_gc_resume, no GC step runs (so no __gc finalizer
 * runs or raises), whatever is allocated. Resuming gives back the exact threshold held, so a
 * hold costs no extra collection work; holds nest. Returns what ljx_gc_resume needs. */
size_t ljx_gc_hold(lua_State *L);
void ljx_gc_resume(lua_State *L, size_t held);
/* The VM's own "run a GC step if one is due" (what every allocation site does). */
void ljx_gc_check(lua_State *L);
/* Brings L's next cycle (at a pause) within room more bytes of allocation if it is further. */
void ljx_gc_room(lua_State *L, size_t room);
/* Puts L's next cycle at least room bytes of allocation away if its collector is in its
 * pause (1), else does nothing (0: a cycle is under way, its finalizers perhaps). */
int ljx_gc_room_min(lua_State *L, size_t room);
/* Whether L's collector is between cycles and would start one within max(min_room,
 * threshold / div) more bytes of allocation. */
int ljx_gc_cycle_due(lua_State *L, size_t min_room, unsigned div);
/* Runs a collection cycle of L, begun at a pause, through its sweep now, in a protected call;
 * the __gc finalizers it found due are left to the steps of the code that runs next (where
 * an error one raises surfaces as before). Out of memory there (the sweep's end may shrink
 * the string table) leaves the cycle to later steps. *strings is the state's string count
 * at the end of its last cycle here (0 at first, then updated): when no string has been
 * made since (the count is the same), the cycle does not sweep the strings, which only puts
 * off the freeing of those that died (see ljx.c). */
void ljx_gc_cycle(lua_State *L, uint32_t *strings);

/* Calls fn(L, ud) in protected mode, like lua_cpcall but allocating nothing. Returns 0, or
 * the LUA_ERR* status of an error fn raised, with the error value pushed on L. */
int ljx_cpcall(lua_State *L, void (*fn)(lua_State *L, void *ud), void *ud);

/* Inside a C function called from Lua: writes its Lua caller's line to *line and, if the
 * chunk is not *chunk (then updated), the chunk's name to file (n bytes). Leaves all alone
 * when no Lua function called it, or when the call's bytecode address is *at (the last
 * one written; then updated). Whoever else writes line or file clears *at. With a new *at,
 * site (LJX_SITE_HINTS entries) gets the call site's addresses for a waker. */
void ljx_caller_where(lua_State *L, const void **chunk, char *file, size_t n, int32_t *line,
                      const void **at, _Atomic(const void *) *site);

/* The state's roots (see ljx.c): an array table no Lua code reaches, or NULL when not made;
 * ljx_roots_made makes it on first use (it may raise out of memory). flat.c keeps its
 * templates in slots [0, LJX_ROOTS_FLAT); the rest cache ljx_registry_get's keys. */
#define LJX_ROOTS_FLAT 26
void *ljx_roots(lua_State *L);
void *ljx_roots_made(lua_State *L);

/* lua_pushlstring for the decoder: a string of up to LJX_SHORT_STRING bytes that is one of
 * the last few the state made here (by length and first and last bytes, two to a slot) is pushed
 * from the roots, without hashing it and probing the string table, whose bucket is a line of its
 * own (a gen_server request has six such strings: its tag, keys, and the protocol's own). A string
 * kept there stays alive until another takes its place. */
#define LJX_SHORT_STRING 32
void ljx_push_short_string(lua_State *L, const char *s, size_t n);
/* The same string (a GCstr *), not pushed, and without the GC step lua_pushlstring may
 * take first: for decoders that make their objects with the GC held. */
void *ljx_short_string(lua_State *L, const char *s, size_t n);
/* The number of strings interned in L's state (alive or not yet swept): for tests. */
uint32_t ljx_string_count(lua_State *L);
/* Whether the cache holds the string of those n bytes now (nothing is made): for tests. */
int ljx_short_string_cached(lua_State *L, const char *s, size_t n);

/* A slot of the roots for what a parked wait scans on each wake (an rx, select's arms): the
 * value at stack index idx (0: nil) is kept there, anchored, until the next call; and
 * pushed back (1), or nothing (0) when the slot is empty. A store and a load where the
 * registry took a hinted hash lookup each (about 230 instructions per rx:recv that parks). */
void ljx_wait_anchor(lua_State *L, int idx);
int ljx_wait_anchored(lua_State *L);

/* Pushes registry[key] (a light userdata key) and returns 1, or pushes nothing and returns 0
 * when it is nil: lua_pushlightuserdata, lua_rawget and lua_type in one call, by a hint of
 * where the key was last found (a channel's metatable is looked up so for every endpoint
 * made, and a wait's anchor at each wake: seven lookups in a gen_server call). */
int ljx_registry_get(lua_State *L, const void *key);
/* registry[key] = the value at idx (0: nil), by the same hints; the stack is unchanged. */
void ljx_registry_set(lua_State *L, const void *key, int idx);

/* For the decoder, with the GC held and room on the stack: pushes a new table with room for
 * narr array and nhash hash values (lua_createtable), sets t[top-2] = top-1 and pops both
 * (lua_rawset; the key is neither nil nor NaN), sets t[i] = top-1 and pops it (lua_rawseti).
 * t is the table ljx_new_table returned. */
void *ljx_new_table(lua_State *L, uint32_t narr, uint32_t nhash);
void ljx_set_pair(lua_State *L, void *t);
void ljx_set_index(lua_State *L, void *t, uint32_t i);

/* A table at registry[key] (an integer key) used as an array of slots that hold values
 * across a wait (a socket wait's anchor), found and written without a C API call per slot.
 * ljx_anchor_store: makes the table on first use (room for nslots in its array part; past it
 * slots go through the hash part), then t[1] = head, t[2..n+1] = the values at stack indexes
 * from..from+n-1, and every later slot of the array part nil (a store that leaves slots of an
 * earlier one would keep their values alive). ljx_anchor_take: reads t[1] as a number (0 if
 * none: no table, or taken) as head, pushes t[2..n+1] with n = count(head), sets t[1..n+1]
 * to nil and returns head (one lookup of the table for both). */
void ljx_anchor_store(lua_State *L, int32_t key, int nslots, double head, int from, int n);
double ljx_anchor_take(lua_State *L, int32_t key, int (*count)(double head));

/* lua_dump of the function on top of L, keeping the keys of its table constructors'
 * templates that have no constant value (see ljx.c): the state that loads the dump builds
 * those tables without a rehash. */
int ljx_dump(lua_State *L, lua_Writer writer, void *ud);

/* A private arena of LuaJIT's own allocator (its dlmalloc: freed neighbours coalesce and
 * new blocks are carved in order, so objects allocated together lie together), or NULL.
 * Its blocks are allocated, resized and freed with LuaJIT's own allocation function, given
 * the arena's allocator state (ljx_arena_msp); ljx_arena_free returns all of its memory at
 * once. */
void *ljx_arena_new(void);
void *ljx_arena_msp(void *arena);
/* The reservation its pieces come from (base/arena_map.h), or NULL. */
arena_map *ljx_arena_map(void *arena);
extern void *lj_alloc_f(void *msp, void *ptr, size_t osize, size_t nsize);
/* lj_alloc_f's two common cases without its dispatch: LuaJIT's static lj_alloc_malloc and
 * lj_alloc_free, which the build makes global under these names (configure.py,
 * luajit_redirect). A block of n > 0 bytes (NULL when the system has no memory), and p's
 * block back (p not NULL; returns NULL). */
extern void *smarm_lj_alloc_malloc(void *msp, size_t n);
extern void *smarm_lj_alloc_free(void *msp, void *p);
void ljx_arena_free(void *arena);

#endif
