/* The module cache: each module is compiled once per runtime (in the template state) and
 * loaded into actor states from its bytecode. A module is keyed by its name (embedded
 * library modules) or resolved file path, and recompiled when the file's mtime changes; each
 * compile is a new version. */
#include "base/critical.h"
#include "vm/modcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "base/wire.h"
#include "core/runtime.h"
#include "smarm_embedded.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    wire_buf *b = ud;
    return wire_buf_append(b, p, sz);
}

static luavm_module *cache_find(luavm_shared *vm, const char *key)
{
    for (luavm_module *m = vm->modules; m; m = m->next)
        if (strcmp(m->key, key) == 0)
            return m;
    return NULL;
}

/* Compiles source (or the file at key) in the template state into m's bytecode. Lock held. */
static int cache_compile(luavm_shared *vm, luavm_module *m, const char *src, size_t len,
                         const char *chunkname, char *err, size_t errlen)
{
    lua_State *T = vm->tmpl;
    int st = src ? luaL_loadbuffer(T, src, len, chunkname) : luaL_loadfile(T, m->key);
    if (st != 0) {
        snprintf(err, errlen, "%s", lua_tostring(T, -1));
        lua_pop(T, 1);
        return -1;
    }
    wire_buf b;
    wire_buf_init(&b);
    lua_dump(T, dump_writer, &b);
    lua_pop(T, 1);
    if (m->bc) {
        /* an actor may be loading the old version right now */
        luavm_retired *r = malloc(sizeof *r);
        if (!r) {
            wire_buf_free(&b);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        r->bc = m->bc;
        r->next = vm->retired;
        vm->retired = r;
    }
    m->bc = b.data;
    m->len = b.len;
    m->version++;
    return 0;
}

static int64_t file_mtime(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -2;
    return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* Finds or compiles the module stored under key; pushes its loader on L. */
static int cache_load(lua_State *L, const char *key, const char *src, size_t srclen,
                      const char *chunkname)
{
    luavm_shared *vm = luavm_runtime(L)->vm;
    char err[512] = "";
    int64_t mtime = src ? -1 : file_mtime(key);
    mutex_lock(&vm->lock);
    luavm_module *m = cache_find(vm, key);
    if (!m || m->mtime_ns != mtime) {
        int fresh = !m;
        if (fresh) {
            m = calloc(1, sizeof *m);
            if (m)
                m->key = strdup(key);
            if (!m || !m->key) {
                free(m);
                mutex_unlock(&vm->lock);
                return luaL_error(L, "out of memory caching module %s", key);
            }
        }
        if (cache_compile(vm, m, src, srclen, chunkname, err, sizeof err) != 0) {
            if (fresh) {
                free(m->key);
                free(m);
            }
            mutex_unlock(&vm->lock);
            return luaL_error(L, "error loading module '%s':\n\t%s", key, err);
        }
        m->mtime_ns = mtime;
        if (fresh) {
            m->next = vm->modules;
            vm->modules = m;
        }
    }
    /* a version's bytes are never changed nor freed before the runtime ends (a recompile
     * retires them), so they are loaded without the lock: loading may run a GC step and
     * its finalizers, which may be preempted, and no lock is held across a switch */
    const char *bc = m->bc;
    size_t bclen = m->len;
    mutex_unlock(&vm->lock);
    int st = luaL_loadbuffer(L, bc, bclen, chunkname);
    if (st != 0)
        return lua_error(L);
    return 1;
}

int modcache_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    for (const struct smarm_embedded_module *e = smarm_embedded_modules; e->name; e++) {
        if (strcmp(e->name, name) == 0) {
            char chunk[128];
            snprintf(chunk, sizeof chunk, "=[smarm] %s", name);
            return cache_load(L, name, e->source, e->len, chunk);
        }
    }
    /* package.searchpath(name, package.path) finds the file */
    lua_getfield(L, LUA_GLOBALSINDEX, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushvalue(L, 1);
    lua_getfield(L, -3, "path");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2))
        return 1; /* the "no file" message */
    const char *path = lua_tostring(L, -2);
    lua_pushfstring(L, "@%s", path);
    cache_load(L, path, NULL, 0, lua_tostring(L, -1));
    return 1;
}

void modcache_free(luavm_shared *vm)
{
    for (luavm_module *m = vm->modules; m;) {
        luavm_module *next = m->next;
        free(m->key);
        free(m->bc);
        free(m);
        m = next;
    }
    vm->modules = NULL;
    for (luavm_retired *r = vm->retired; r;) {
        luavm_retired *next = r->next;
        free(r->bc);
        free(r);
        r = next;
    }
    vm->retired = NULL;
}

LUA_UNWOUND_END
