/* The runtime-wide bytecode cache of modules (see modcache.c). */
#ifndef SMARM_VM_MODCACHE_H
#define SMARM_VM_MODCACHE_H

#include "vm/luavm.h"

/* The package searcher in front of the file searchers: loads module `name` into L through
 * the cache (embedded library modules first, then package.path). */
int modcache_searcher(lua_State *L);
/* Frees every cached module and retired version (the runtime is being freed). */
void modcache_free(luavm_shared *vm);

#endif
