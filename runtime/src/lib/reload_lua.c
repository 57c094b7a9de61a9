/* Hot code reload, the C half: publishing a version is the module cache's (vm/modcache.c);
 * patching package.loaded in place and the hooks are smarm.reload's (lua/smarm/reload.lua). */
#include "lib/reload_lua.h"

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "lib/args.h"
#include "vm/luavm.h"
#include "vm/modcache.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/**
 * smarm.reload(module) -> version | nil, err
 * Compiles the module's file again and publishes it as a new version: every actor that has
 * it loaded takes it at its next safe point (the caller at once). A syntax error returns
 * nil and "file:line: message", and nothing changes.
 */
static int l_reload(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    actor *a = luavm_actor(L);
    char err[512];
    int64_t v = modcache_reload(a->rt->vm, name, err, sizeof err);
    if (v < 0) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_settop(L, 0);
    luavm_safe_point(a, L);
    lua_pushnumber(L, (lua_Number)v);
    return 1;
}

/* smarm.code_version(module) -> the module's current version (0 before any reload). */
static int l_code_version(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    int64_t v = modcache_version(luavm_runtime(L)->vm, name);
    lua_pushnumber(L, v < 0 ? 0 : (lua_Number)v);
    return 1;
}

/* smarm.on_reload(fn): fn(module, version) runs in this actor after it took a version. */
static int l_on_reload(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lib_require_field(L, "smarm.reload", "on_reload");
    lua_insert(L, 1);
    lua_call(L, 1, 0);
    return 0;
}

const luaL_Reg reload_lua_funcs[] = {
    {"reload", l_reload},
    {"code_version", l_code_version},
    {"on_reload", l_on_reload},
    {NULL, NULL},
};

/* raw.loaded() -> the state's table of file modules it loaded: name -> version */
static int l_raw_loaded(lua_State *L)
{
    modcache_push_loaded(L);
    return 1;
}

/* raw.newest(name) -> chunk, version | nil, err */
static int l_raw_newest(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    uint32_t number;
    if (modcache_push_newest(L, name, &number) != 0) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushnumber(L, number);
    return 2;
}

/* raw.version(name) -> the current version, or nil if no state loaded it */
static int l_raw_version(lua_State *L)
{
    int64_t v = modcache_version(luavm_runtime(L)->vm, luaL_checkstring(L, 1));
    if (v < 0)
        lua_pushnil(L);
    else
        lua_pushnumber(L, (lua_Number)v);
    return 1;
}

/* raw.report(what, detail): one line on stderr about this actor */
static int l_raw_report(lua_State *L)
{
    luavm_report(luavm_actor(L), luaL_checkstring(L, 1), luaL_checkstring(L, 2));
    return 0;
}

/* Points every upvalue of the function at f (and of the functions it holds as upvalues)
 * that is the table at nw to the table at old: the new chunk's functions then read and
 * write the kept module table as their `M`. seen (a table) stops cycles. */
static void redirect(lua_State *L, int f, int nw, int old, int seen)
{
    lua_pushvalue(L, f);
    lua_rawget(L, seen);
    int done = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (done)
        return;
    lua_pushvalue(L, f);
    lua_pushboolean(L, 1);
    lua_rawset(L, seen);
    luaL_checkstack(L, 4, "reload: functions nested too deep");
    for (int i = 1; lua_getupvalue(L, f, i); i++) {
        if (lua_rawequal(L, -1, nw)) {
            lua_pop(L, 1);
            lua_pushvalue(L, old);
            lua_setupvalue(L, f, i);
        } else {
            if (lua_isfunction(L, -1))
                redirect(L, lua_gettop(L), nw, old, seen);
            lua_pop(L, 1);
        }
    }
}

/* Merges the table at nw into the one at t: functions replaced, missing fields added,
 * other values kept. With undo (a table index, or 0), the first previous value of each key
 * it changes is recorded there as {value}. */
static void patch(lua_State *L, int t, int nw, int undo)
{
    lua_newtable(L);
    int seen = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, nw)) {
        int v = lua_gettop(L), k = v - 1;
        lua_pushvalue(L, k);
        lua_rawget(L, t);
        int cur = lua_gettop(L);
        int fn = lua_isfunction(L, v);
        if (fn)
            redirect(L, v, nw, t, seen);
        if ((fn && !lua_rawequal(L, cur, v)) || (!fn && lua_isnil(L, cur))) {
            if (undo) {
                lua_pushvalue(L, k);
                lua_rawget(L, undo);
                int recorded = !lua_isnil(L, -1);
                lua_pop(L, 1);
                if (!recorded) {
                    lua_pushvalue(L, k);
                    lua_createtable(L, 1, 0);
                    lua_pushvalue(L, cur);
                    lua_rawseti(L, -2, 1);
                    lua_rawset(L, undo);
                }
            }
            lua_pushvalue(L, k);
            lua_pushvalue(L, v);
            lua_rawset(L, t);
        }
        lua_settop(L, k);
    }
    lua_pop(L, 1);
}

/* raw.patch(t, new [, undo]) */
static int l_raw_patch(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    int undo = lua_istable(L, 3) ? 3 : 0;
    lua_settop(L, 3);
    patch(L, 1, 2, undo);
    return 0;
}

/* The registry key of the mark raw.behaviour() sets. */
static const char behaviour_key = 'b';

/* raw.behaviour(): a behaviour (gen_server, gen_statem) runs in this state and converts its
 * state when its callback module is reloaded, so reloads are taken through smarm.reload,
 * which records them in raw.changes and keeps what a failed code_change puts back. The
 * behaviour loads smarm.reload only then: it was 5 KB of every server's heap, for a
 * reload that may never come. */
static int l_raw_behaviour(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&behaviour_key);
    lua_pushboolean(L, 1);
    lua_rawset(L, LUA_REGISTRYINDEX);
    return 0;
}

static int behaviour_runs(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&behaviour_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    int runs = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return runs;
}

int reload_lua_open_raw(lua_State *L)
{
    static const luaL_Reg raw[] = {
        {"patch", l_raw_patch},
        {"loaded", l_raw_loaded},
        {"newest", l_raw_newest},
        {"version", l_raw_version},
        {"report", l_raw_report},
        {"behaviour", l_raw_behaviour},
        {NULL, NULL},
    };
    lua_createtable(L, 0, 7);
    luaL_register(L, NULL, raw);
    /* module name -> the version the state ran before its reload, until a behaviour has
     * converted its state (smarm.reload fills it, the behaviours read it per message) */
    lua_newtable(L);
    lua_setfield(L, -2, "changes");
    return 1;
}

/* Reports "name version v: what: detail" about the calling actor. */
static void report(lua_State *L, const char *name, uint32_t v, const char *what, int detail)
{
    const char *d = detail ? lua_tostring(L, detail) : NULL;
    lua_pushfstring(L, "%s version %d: %s%s", name, (int)v, what, d ? d : "");
    luavm_report(luavm_actor(L), "reload", lua_tostring(L, -1));
    lua_pop(L, 1);
}

/* The take of a state without smarm.reload loaded (no behaviour, no on_reload hook): the
 * same merge as smarm.reload.take, in C, with nothing else to do (no hooks to run, no state
 * to convert), so that a plain actor does not load the Lua half to take a version. */
static void take_plain(lua_State *L)
{
    modcache_push_loaded(L);
    int loaded = lua_gettop(L);
    luavm_shared *vm = luavm_runtime(L)->vm;
    /* names whose version moved, collected first: the loaded table changes below */
    lua_newtable(L);
    int todo = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, loaded)) {
        int64_t now = modcache_version(vm, lua_tostring(L, -2));
        if (now > (int64_t)lua_tonumber(L, -1)) {
            lua_pushvalue(L, -2);
            lua_rawseti(L, todo, ++n);
        }
        lua_pop(L, 1);
    }
    for (int i = 1; i <= n; i++) {
        lua_settop(L, todo);
        lua_rawgeti(L, todo, i);
        const char *name = lua_tostring(L, -1);
        int name_idx = lua_gettop(L);
        uint32_t v = 0;
        if (modcache_push_newest(L, name, &v) != 0) {
            report(L, name, v, "", lua_gettop(L));
            continue;
        }
        int chunk = lua_gettop(L);
        lua_pushvalue(L, name_idx);
        lua_pushnumber(L, v);
        lua_rawset(L, loaded);
        lua_getfield(L, LUA_GLOBALSINDEX, "package");
        lua_getfield(L, -1, "loaded");
        lua_pushvalue(L, name_idx);
        lua_rawget(L, -2);
        int t = lua_gettop(L);
        if (!lua_istable(L, t))
            continue; /* nothing to patch: its next require loads the newest */
        lua_pushvalue(L, chunk);
        lua_pushvalue(L, name_idx);
        if (lua_pcall(L, 1, 1, 0) != 0) {
            report(L, name, v, "failed to load (kept the old code): ", lua_gettop(L));
            continue;
        }
        if (!lua_istable(L, -1)) {
            report(L, name, v, "did not return a table (kept the old code)", 0);
            continue;
        }
        patch(L, t, lua_gettop(L), 0);
    }
}

int reload_lua_take(lua_State *L)
{
    /* a state that loaded no file module has nothing to take (and loads nothing) */
    if (!modcache_loaded_any(L))
        return 0;
    lua_getfield(L, LUA_GLOBALSINDEX, "package");
    lua_getfield(L, -1, "loaded");
    lua_getfield(L, -1, "smarm.reload");
    int lua_half = !lua_isnil(L, -1) || behaviour_runs(L);
    lua_settop(L, 0);
    if (!lua_half) {
        take_plain(L);
        return 0;
    }
    lib_require_field(L, "smarm.reload", "take");
    lua_call(L, 0, 0);
    return 0;
}

LUA_UNWOUND_END
