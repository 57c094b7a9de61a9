/* Per-actor LuaJIT states: counting allocator, lazily opened libraries, a
 * runtime-wide bytecode cache of modules (versioned per module), crash reports. */
#ifndef SMARM_LUAVM_H
#define SMARM_LUAVM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lua_State lua_State;
struct actor;
struct smarm_runtime;

/* One compiled version of a module. Its bytes are copied into a state by luaL_loadbuffer
 * (outside the cache lock): refs counts the loads under way, and a version that is no
 * longer the module's current one is freed when the last of them ends. */
typedef struct luavm_version {
    char *bc; /* bytecode */
    size_t len;
    uint32_t number; /* 0 for the first compile, +1 per reload */
    int refs;
} luavm_version;

typedef struct luavm_module {
    struct luavm_module *next;
    char *key;  /* module name (embedded) or resolved file path */
    char *name; /* the name it was required by */
    int embedded;
    luavm_version *cur; /* the newest accepted version (a failed compile never replaces it) */
} luavm_module;

/* A C function the host program offers every state as a module (smarm_preload). */
typedef struct luavm_preload {
    struct luavm_preload *next;
    char *name;
    int (*open)(lua_State *L);
} luavm_preload;

typedef struct luavm_shared {
    pthread_mutex_t lock; /* guards the cache and tmpl */
    lua_State *tmpl;      /* compiles modules; its JIT setup is copied into new states */
    luavm_module *modules;
    /* bumped (after the cache lock) by every published reload: an actor whose own copy
     * differs looks for new versions at its next safe point (luavm_safe_point) */
    _Atomic uint32_t reload_epoch;
    /* the library's reload step (lib/reload_lua.c), run at a safe point on the actor's main
     * state when the epoch moved and the state has file modules loaded */
    int (*take_reload)(lua_State *L);
    char *package_path; /* app_dir's entries, prepended to LUA_PATH */
    /* the package.path a state's package library starts with, as the first state to open
     * one made it (NULL until then): the require of a state that has not opened its own
     * searches there (luavm.c's require_unopened) */
    _Atomic(char *) search_path;
    void (*push_library)(lua_State *L); /* pushes the state's smarm table (require "smarm") */
    /* modules of the library above that are C functions (package.preload entries, e.g. the
     * primitives under smarm.net); {NULL, NULL}-terminated, or NULL */
    const struct luaL_Reg *preloads;
    /* the host's modules (smarm_preload): pushed on the front, never removed until the end,
     * so a state opening its package library reads the list without a lock */
    _Atomic(luavm_preload *) host_preloads;
    /* bytecode of a state's `pairs` until its libraries are all open, and where each of its
     * upvalues goes (luavm.c) */
    char *pairs_bc;
    size_t pairs_bc_len;
    int pairs_uv[6];
    /* states of ended actors, reset and kept for new ones (luavm.c), one pool per scheduler */
    struct luavm_pool *pools;
    _Atomic uint64_t states_recycled;    /* spawns that took a pooled state */
    _Atomic uint64_t states_restored;    /* resets that wrote a state's image back */
    _Atomic uint64_t resume_collections; /* cycles run at a resume (vm/collect.h) */
} luavm_shared;

/* Adds a host module: every state that opens its package library from now on can require
 * it (a later one of the same name wins). 0, or -1 out of memory. */
int luavm_add_preload(luavm_shared *vm, const char *name, int (*open)(lua_State *L));

int luavm_shared_init(luavm_shared *vm, const char *app_dir);
void luavm_shared_free(luavm_shared *vm);
/* Creates the actor's state and pushes its body and arguments on its coroutine.
 * Returns the argument count, or -1 after reporting why it could not boot (and setting its
 * reason: "memory" if the booted state alone is over max_heap, else "error"). From then on
 * the state allocates under max_heap: the first allocation past it stops the actor. */
int luavm_boot(struct actor *a);
/* Frees a boot payload that was never booted (the actor was stopped before its first run),
 * releasing the channel and socket references its spawn arguments hold. */
void luavm_drop_boot(struct actor *a);
/* Test hook, for Lua code through the FFI: from now until it closes, the calling actor's
 * state is refused, as if malloc failed, every allocation that grows its heap (if grow) and
 * every reallocation that shrinks a block (if shrink). */
void luavm_test_heap_refuses(int grow, int shrink);
/* Test hook: the state-th state luavm_boot makes from now on (1: the next) fails its k-th
 * allocation (k >= 1) as if malloc had failed. */
void luavm_inject_newstate_failure(int state, int k);
/* Prints one line about actor a on stderr: "smarm: actor <0.I.G> what: detail". */
void luavm_report(struct actor *a, const char *what, const char *detail);
/* Takes a received message m: pushes its value and frees it. Flat bytes (vm/flat.h) are
 * built straight from a copy, m freed first; otherwise no __gc finalizer runs while it
 * decodes (the GC is held), so none can raise with the message half taken. Raises
 * "fname: cannot decode a message: ..." for malformed bytes, or a memory error; m is freed
 * either way. */
struct msg;
void luavm_take(struct actor *a, lua_State *L, struct msg *m, const char *fname);
/* Decodes m onto L (a's state) and keeps it (selective receive caches what it decoded): 0
 * with the value pushed; -1 for malformed bytes (why in err); 1 for a memory error (its
 * object pushed). Flat bytes are built unprotected: a memory error there raises, m kept. */
int luavm_decode(struct actor *a, lua_State *L, struct msg *m, char *err, size_t errlen);
/* Called by a receive before it takes anything: runs the GC step the decodes (whose
 * allocations happen with the GC held) may have left due. Without it an actor whose only
 * allocations are the messages it decodes never collects. A finalizer's error raised here
 * leaves every message where it is. */
void luavm_gc_catch_up(lua_State *L);
/* Closes the state (its finalizers run) without max_heap. */
void luavm_close(struct actor *a);
/* The end of an actor whose body returned or raised: its state is reset and kept for a
 * later spawn on this scheduler if nothing of it can outlive the reset (see luavm.c), else
 * closed as luavm_close does. */
void luavm_release(struct actor *a);

/* The actor_hooks warm hook: asks the cache for the lines of a's state and coroutine that a
 * resume reads first (from another thread; reads only actor_vm's warm fields); not the
 * dispatch table's when next (it runs right after its waker). */
void luavm_warm(struct actor *a, int next);
/* States waiting in the pools now, of those the ones not reset yet (dirty: the spawn that
 * takes one resets it), and the pooled states luavm_trim has closed so far (read together: a
 * trim moves states from one count to the other at once). */
void luavm_pool_counts(luavm_shared *vm, uint64_t *pooled, uint64_t *dirty, uint64_t *trimmed);
/* Closes the pooled states no spawn took since the last call, beyond a few per pool (the
 * watchdog's trim hook: at most once a second, while every scheduler sleeps; any thread may
 * call it). */
void luavm_trim(luavm_shared *vm);
/* Lets go of the state of an actor whose C stack overflowed without closing it: the fault
 * may have come in the middle of any LuaJIT operation, so nothing of the state is read
 * again. Its memory stays allocated, and what its objects held (channel ends, monitors'
 * channels) is never released: the receiver of such a channel is simply gone. */
void luavm_abandon(struct actor *a);
/* Writes the chunk and line of the innermost Lua function running in L (introspection's
 * `current`; from a hook: costs a lua_getinfo); leaves them alone if no Lua function runs. */
void luavm_where(lua_State *L, char *file, size_t n, int32_t *line, const void **chunk);
struct smarm_runtime *luavm_runtime(lua_State *L);
/* A per-state value kept in the registry under a light userdata key (a metatable, a cache
 * table). luavm_registry_get pushes it and returns 1, or pushes nothing and returns 0, when
 * the caller makes it and hands it to luavm_registry_keep, which keeps the value on top of
 * the stack under key and leaves it there. */
int luavm_registry_get(lua_State *L, const void *key);
void luavm_registry_keep(lua_State *L, const void *key);
/* registry[key] = the value at idx (0: nil); the stack is unchanged. */
void luavm_registry_set(lua_State *L, const void *key, int idx);
/* A safe point between messages (a wait returned, or recv found a message at once): if a
 * module was reloaded since this actor last looked, its new versions are taken (the
 * library's take_reload). Values on L's stack are kept. Errors are reported, not raised. */
void luavm_safe_point(struct actor *a, lua_State *L);

/* The reservation of the running actor's arena (base/arena_map.h's hook), or NULL. */
struct arena_map *luavm_running_arena_map(void);
struct actor *luavm_actor(lua_State *L);

#endif
