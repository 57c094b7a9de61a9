/* Hot code reload, the C half: publishing a version is the module cache's (vm/modcache.c);
 * patching package.loaded in place and the hooks are smarm.reload's (lua/smarm/reload.lua). */
#include "lib/reload_lua.h"

#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "vm/luavm.h"
#include "vm/modcache.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* Pushes require("smarm.reload")[field]. */
static void push_reload_field(lua_State *L, const char *field)
{
    lua_getfield(L, LUA_GLOBALSINDEX, "require");
    lua_pushliteral(L, "smarm.reload");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, field);
    lua_remove(L, -2);
}

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
    push_reload_field(L, "on_reload");
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

int reload_lua_open_raw(lua_State *L)
{
    static const luaL_Reg raw[] = {
        {"loaded", l_raw_loaded},
        {"newest", l_raw_newest},
        {"version", l_raw_version},
        {"report", l_raw_report},
        {NULL, NULL},
    };
    lua_createtable(L, 0, 4);
    luaL_register(L, NULL, raw);
    return 1;
}

int reload_lua_take(lua_State *L)
{
    /* a state that loaded no file module has nothing to take (and loads nothing) */
    if (!modcache_loaded_any(L))
        return 0;
    push_reload_field(L, "take");
    lua_call(L, 0, 0);
    return 0;
}

LUA_UNWOUND_END
