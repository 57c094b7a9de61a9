/* The start of a supervisor's child (see sup_child_lua.h). The child's body (smarm.supervisor's
 * child_main) runs require(mod)[fname](...), and before that checks what it found and reports
 * the start. Those checks, written in Lua, called type, rawget and tostring, and the first of
 * them opened the child's base library: some 40 closures and their interned names, 24,600 of
 * the 165,000 instructions a simple_one_for_one child took from start_child to its report and
 * 5.6 KB of its 20 KB heap, in a child whose own code may use no base function at all (a
 * worker that sends and receives). Here they use the C API, which needs no library. */
#include "lib/sup_child_lua.h"

#include <lauxlib.h>

#include "base/sanitize.h"
#include "lib/args.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* tostring(v) for an error message, without the base library: a string or number as it
 * is, a boolean or nil as its word, anything else by its type. */
static const char *shown(lua_State *L, int i)
{
    switch (lua_type(L, i)) {
    case LUA_TSTRING:
    case LUA_TNUMBER:
        return lua_tostring(L, i);
    case LUA_TBOOLEAN:
        return lua_toboolean(L, i) ? "true" : "false";
    default:
        return lua_typename(L, lua_type(L, i));
    }
}

/* start(ack, sup, init_ack, mod, fname) -> f: f = require(mod)[fname], which must be a
 * function. If init_ack is true or mod's init_ack table lists fname, f reports its start
 * itself (smarm.proc.started: ack_to and parent are set for it); else the start is reported
 * here, {ok = true} on ack, and ack is released. */
static int child_start(lua_State *L)
{
    enum { ACK = 1, SUP, INIT_ACK, MOD, FNAME, M, F };
    lua_settop(L, FNAME);
    /* the spec's check made mod a string */
    lib_require(L, luaL_checkstring(L, MOD));
    if (lua_type(L, M) == LUA_TTABLE) {
        lua_pushvalue(L, FNAME);
        lua_gettable(L, M);
    } else {
        lua_pushnil(L);
    }
    if (lua_type(L, F) != LUA_TFUNCTION) {
        lua_pushvalue(L, FNAME);
        const char *fname = shown(L, -1);
        lua_pushfstring(L, "supervisor child: %s.%s is not a function", shown(L, MOD), fname);
        return lua_error(L);
    }
    int reports_itself = lua_toboolean(L, INIT_ACK);
    if (!reports_itself && lua_type(L, M) == LUA_TTABLE) {
        /* raw: a module's __index (the smarm table has one) is not asked */
        lua_pushliteral(L, "init_ack");
        lua_rawget(L, M);
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_pushvalue(L, FNAME);
            lua_gettable(L, -2);
            reports_itself = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    if (reports_itself) {
        lib_require(L, "smarm.proc");
        lua_pushvalue(L, ACK);
        lua_setfield(L, -2, "ack_to");
        lua_pushvalue(L, SUP);
        lua_setfield(L, -2, "parent");
        lua_pop(L, 1);
    } else {
        /* what smarm.proc.started sends, without loading it into every plain child */
        lua_getfield(L, ACK, "send");
        lua_pushvalue(L, ACK);
        lua_createtable(L, 0, 1);
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "ok");
        lua_call(L, 2, 0);
        lua_getfield(L, ACK, "release");
        lua_pushvalue(L, ACK);
        lua_call(L, 1, 0);
    }
    lua_pushvalue(L, F);
    return 1;
}

int sup_child_lua_open(lua_State *L)
{
    lua_pushcfunction(L, child_start);
    return 1;
}

LUA_UNWOUND_END
