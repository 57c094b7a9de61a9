/* The module cache: each module is compiled once per runtime (in the template state) and
 * loaded into actor states from its bytecode. A module is keyed by its name (embedded
 * library modules) or resolved file path. A reload compiles the file again into a new
 * version, published only if it compiled: states load the newest accepted version, and
 * running actors take it at their next safe point (lib/reload_lua.c). */
#include "base/critical.h"
#include "vm/modcache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "base/wire.h"
#include "core/runtime.h"
#include "smarm_embedded.h"
#include "vm/ljx.h"
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

static luavm_module *cache_find_name(luavm_shared *vm, const char *name)
{
    for (luavm_module *m = vm->modules; m; m = m->next)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

static void version_free(luavm_version *v)
{
    free(v->bc);
    free(v);
}

/* Compiles source (or the file at key) in the template state into a new version, numbered
 * after m's current one. Lock held. NULL with err set on a syntax or memory error. */
static luavm_version *cache_compile(luavm_shared *vm, luavm_module *m, const char *src, size_t len,
                                    const char *chunkname, char *err, size_t errlen)
{
    lua_State *T = vm->tmpl;
    int st = src ? luaL_loadbuffer(T, src, len, chunkname) : luaL_loadfile(T, m->key);
    if (st != 0) {
        snprintf(err, errlen, "%s", lua_tostring(T, -1));
        lua_pop(T, 1);
        return NULL;
    }
    wire_buf b;
    wire_buf_init(&b);
    ljx_dump(T, dump_writer, &b);
    lua_pop(T, 1);
    luavm_version *v = calloc(1, sizeof *v);
    if (!v || !b.data) {
        free(v);
        wire_buf_free(&b);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    v->bc = b.data;
    v->len = b.len;
    v->number = m->cur ? m->cur->number + 1 : 0;
    return v;
}

/* Makes v m's current version. Lock held. The old one goes now unless a load holds it. */
static void cache_publish(luavm_module *m, luavm_version *v)
{
    luavm_version *old = m->cur;
    m->cur = v;
    if (old && old->refs == 0)
        version_free(old);
}

/* Ends a load of v begun under the lock (refs taken). Lock not held. */
static void version_unref(luavm_shared *vm, luavm_module *m, luavm_version *v)
{
    mutex_lock(&vm->lock);
    if (--v->refs == 0 && m->cur != v)
        version_free(v);
    mutex_unlock(&vm->lock);
}

/* Loads m's current version into L (pushes the chunk, or the error message). The bytes are
 * loaded without the lock: loading may run a GC step and its finalizers, which may be
 * preempted, and no lock is held across a switch; the reference keeps a concurrent reload
 * from freeing them. Lock held on entry, released on return. */
static int cache_load_version(lua_State *L, luavm_shared *vm, luavm_module *m,
                              const char *chunkname, uint32_t *number)
{
    luavm_version *v = m->cur;
    v->refs++;
    *number = v->number;
    mutex_unlock(&vm->lock);
    /* The module's code (its prototypes and their constants) lives as long as the state,
     * yet LuaJIT counts it as allocation toward the next cycle: a new state that loads a
     * behaviour's 40 KB of modules ran cycles that freed nothing. Its bytes are taken off
     * that count (the threshold moves up by them); 379,700 -> 362,900 instructions per
     * gen_server start (callgrind, 1,000 minus 500 starts). */
    size_t held = ljx_gc_hold(L), before = ljx_gc_total(L);
    int st = luaL_loadbuffer(L, v->bc, v->len, chunkname);
    size_t after = ljx_gc_total(L);
    /* a failed load may have given back more than it took */
    ljx_gc_resume(L, held + (after > before ? after - before : 0));
    version_unref(vm, m, v);
    return st;
}

static const char loaded_key = 'v';

void modcache_push_loaded(lua_State *L)
{
    if (luavm_registry_get(L, &loaded_key))
        return;
    lua_newtable(L);
    luavm_registry_keep(L, &loaded_key);
}

int modcache_loaded_any(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&loaded_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    int any = 0;
    if (lua_istable(L, -1)) {
        lua_pushnil(L);
        any = lua_next(L, -2) != 0;
        if (any)
            lua_pop(L, 2);
    }
    lua_pop(L, 1);
    return any;
}

/* Finds or compiles the module stored under key; pushes its loader on L. A file module's
 * version is noted in the state's loaded table (name -> version), where the reload step
 * finds it. */
static int cache_load(lua_State *L, const char *key, const char *name, const char *src,
                      size_t srclen, const char *chunkname)
{
    luavm_shared *vm = luavm_runtime(L)->vm;
    char err[512] = "";
    mutex_lock(&vm->lock);
    luavm_module *m = cache_find(vm, key);
    if (!m) {
        m = calloc(1, sizeof *m);
        if (m) {
            m->key = strdup(key);
            m->name = strdup(name);
        }
        if (!m || !m->key || !m->name) {
            if (m) {
                free(m->key);
                free(m->name);
            }
            free(m);
            mutex_unlock(&vm->lock);
            return luaL_error(L, "out of memory caching module %s", key);
        }
        m->embedded = src != NULL;
        luavm_version *v = cache_compile(vm, m, src, srclen, chunkname, err, sizeof err);
        if (!v) {
            free(m->key);
            free(m->name);
            free(m);
            mutex_unlock(&vm->lock);
            return luaL_error(L, "error loading module '%s':\n\t%s", key, err);
        }
        cache_publish(m, v);
        m->next = vm->modules;
        vm->modules = m;
    }
    /* a file changed on disk is not recompiled here: new versions come from reloads, so
     * every actor (new ones included) runs the newest accepted version */
    uint32_t number;
    int embedded = m->embedded;
    if (cache_load_version(L, vm, m, chunkname, &number) != 0)
        return lua_error(L);
    if (!embedded) {
        modcache_push_loaded(L);
        lua_pushstring(L, name);
        lua_pushnumber(L, number);
        lua_rawset(L, -3);
        lua_pop(L, 1);
    }
    return 1;
}

int64_t modcache_reload(luavm_shared *vm, const char *name, char *err, size_t errlen)
{
    mutex_lock(&vm->lock);
    luavm_module *m = cache_find_name(vm, name);
    int64_t r = -1;
    if (!m)
        snprintf(err, errlen, "module %s is not loaded", name);
    else if (m->embedded)
        snprintf(err, errlen, "module %s is part of smarm and cannot be reloaded", name);
    else {
        luavm_version *v = cache_compile(vm, m, NULL, 0, NULL, err, errlen);
        if (v) {
            cache_publish(m, v);
            r = v->number;
        }
    }
    mutex_unlock(&vm->lock);
    if (r >= 0)
        atomic_fetch_add_explicit(&vm->reload_epoch, 1, memory_order_release);
    return r;
}

int64_t modcache_version(luavm_shared *vm, const char *name)
{
    mutex_lock(&vm->lock);
    luavm_module *m = cache_find_name(vm, name);
    int64_t r = m ? (int64_t)m->cur->number : -1;
    mutex_unlock(&vm->lock);
    return r;
}

int modcache_push_newest(lua_State *L, const char *name, uint32_t *number)
{
    luavm_shared *vm = luavm_runtime(L)->vm;
    mutex_lock(&vm->lock);
    luavm_module *m = cache_find_name(vm, name);
    if (!m) {
        mutex_unlock(&vm->lock);
        lua_pushfstring(L, "module %s is not loaded", name);
        return -1;
    }
    char chunk[4096];
    snprintf(chunk, sizeof chunk, "@%s", m->key);
    return cache_load_version(L, vm, m, chunk, number) == 0 ? 0 : -1;
}

int modcache_list_files(luavm_shared *vm, int (*each)(const char *key, const char *name, void *ud),
                        void *ud)
{
    int r = 0;
    mutex_lock(&vm->lock);
    for (luavm_module *m = vm->modules; m && r == 0; m = m->next)
        if (!m->embedded)
            r = each(m->key, m->name, ud);
    mutex_unlock(&vm->lock);
    return r;
}

/* Pushes the loader of the library's module name and returns 1; 0 (nothing pushed) if the
 * library has no module of that name. */
static int load_embedded(lua_State *L, const char *name)
{
    for (const struct smarm_embedded_module *e = smarm_embedded_modules; e->name; e++) {
        if (strcmp(e->name, name) == 0) {
            char chunk[128];
            snprintf(chunk, sizeof chunk, "=[smarm] %s", name);
            return cache_load(L, name, name, e->source, e->len, chunk);
        }
    }
    return 0;
}

int modcache_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (load_embedded(L, name))
        return 1;
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
    cache_load(L, path, name, NULL, 0, lua_tostring(L, -1));
    return 1;
}

/* The first template of path whose file, with name in place of each '?', opens for
 * reading (package.searchpath's rule), written into out; 0 if none does or a name would not
 * fit. */
static int search_file(const char *name, const char *path, char *out, size_t cap)
{
    size_t nlen = strlen(name);
    for (const char *t = path; *t;) {
        const char *end = strchr(t, ';');
        if (!end)
            end = t + strlen(t);
        size_t n = 0;
        int fits = 1;
        for (const char *c = t; c < end && fits; c++) {
            if (*c == '?') {
                fits = n + nlen < cap;
                for (size_t i = 0; fits && i < nlen; i++)
                    out[n++] = name[i] == '.' ? '/' : name[i];
            } else {
                fits = n + 1 < cap;
                if (fits)
                    out[n++] = *c;
            }
        }
        if (fits && n > 0) {
            out[n] = 0;
            FILE *f = fopen(out, "r");
            if (f) {
                fclose(f);
                return 1;
            }
        }
        t = *end ? end + 1 : end;
    }
    return 0;
}

int modcache_load_unopened(lua_State *L, const char *name, const char *path)
{
    if (load_embedded(L, name))
        return 1;
    char file[1024]; /* a longer name goes the package library's way */
    if (!path || !search_file(name, path, file, sizeof file))
        return 0;
    char chunk[sizeof file + 1];
    snprintf(chunk, sizeof chunk, "@%s", file);
    return cache_load(L, file, name, NULL, 0, chunk);
}

void modcache_free(luavm_shared *vm)
{
    for (luavm_module *m = vm->modules; m;) {
        luavm_module *next = m->next;
        free(m->key);
        free(m->name);
        version_free(m->cur);
        free(m);
        m = next;
    }
    vm->modules = NULL;
}

LUA_UNWOUND_END
