/* Per-actor LuaJIT states: counting allocator, lazily opened libraries, a
 * runtime-wide bytecode cache of modules (versioned per module), crash reports. */
#ifndef SMARM_LUAVM_H
#define SMARM_LUAVM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lua_State lua_State;
struct actor;
struct smarm_runtime;

typedef struct luavm_module {
    struct luavm_module *next;
    char *key; /* module name (embedded) or resolved file path */
    char *bc;  /* bytecode */
    size_t len;
    uint32_t version; /* bumped whenever the source changes (hot reload swaps versions) */
    int64_t mtime_ns; /* of the file it was compiled from; -1 for embedded modules */
} luavm_module;

typedef struct luavm_shared {
    pthread_mutex_t lock; /* guards the cache and tmpl */
    lua_State *tmpl;      /* compiles modules; its JIT setup is copied into new states */
    luavm_module *modules;
    char *package_path; /* app_dir's entries, prepended to LUA_PATH */
} luavm_shared;

/* status values for luavm_finish beyond lua_resume's */
#define LUAVM_KILLED 100
#define LUAVM_ERROR_ON_MAIN 101

int luavm_shared_init(luavm_shared *vm, const char *app_dir);
void luavm_shared_free(luavm_shared *vm);
/* Creates the actor's state and pushes its body and arguments on its coroutine.
 * Returns the argument count, or -1 after reporting why it could not boot. */
int luavm_boot(struct actor *a);
/* Records how the actor ended (lua_resume status or LUAVM_*); an uncaught
 * error is printed with the pid and a traceback. */
void luavm_finish(struct actor *a, int status);
void luavm_close(struct actor *a);
/* Loads module `name` into L through the cache (the package searcher). */
int luavm_searcher(lua_State *L);
struct smarm_runtime *luavm_runtime(lua_State *L);
struct actor *luavm_actor(lua_State *L);

#endif
