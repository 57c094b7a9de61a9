/* The runtime-wide bytecode cache of modules (see modcache.c). */
#ifndef SMARM_VM_MODCACHE_H
#define SMARM_VM_MODCACHE_H

#include <stdint.h>

#include "vm/luavm.h"

/* The package searcher in front of the file searchers: loads module `name` into L through
 * the cache (embedded library modules first, then package.path). */
int modcache_searcher(lua_State *L);
/* For a state that has not opened its package library: pushes the chunk of module name,
 * one of the library's (smarm.*) or the first file for it on path (package.path's form:
 * templates separated by ';', each '?' standing for the name with its dots as slashes), as
 * modcache_searcher would, and returns 1; 0 (nothing pushed) when neither has it or path is
 * NULL. Raises as the searcher does (a file that does not compile). */
int modcache_load_unopened(lua_State *L, const char *name, const char *path);
/* Frees every cached module (the runtime is being freed). */
void modcache_free(luavm_shared *vm);
/* Compiles module name's file again (name as it was required; any thread) and publishes the
 * result as its new version, bumping the reload epoch. The version number, or -1 with err
 * set ("file:line: message" for a syntax error; nothing changed). */
int64_t modcache_reload(luavm_shared *vm, const char *name, char *err, size_t errlen);
/* The current version number of module name, -1 if no state loaded it. */
int64_t modcache_version(luavm_shared *vm, const char *name);
/* Pushes the chunk of module name's current version and sets *number: 0; or -1 with an error
 * message pushed. */
int modcache_push_newest(lua_State *L, const char *name, uint32_t *number);
/* Pushes the state's table of the file modules it loaded: name -> version number. */
void modcache_push_loaded(lua_State *L);
/* Whether the state loaded any file module (makes nothing). */
int modcache_loaded_any(lua_State *L);
/* Calls each(key, name, ud) for every file module, under the cache lock (each must not
 * call back into the cache), until one returns nonzero; returns that value or 0. */
int modcache_list_files(luavm_shared *vm, int (*each)(const char *key, const char *name, void *ud),
                        void *ud);

#endif
