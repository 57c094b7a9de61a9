/* smarm.blocking(fn, ...): runs fn(...) in the calling actor, on a thread outside the
 * schedulers (core/blocking.c), so a call that blocks its OS thread (io.read, os.execute,
 * a blocking FFI call) holds up no other actor. fn runs in the actor's own state (upvalues
 * are fine); its results, or its error, come back as if it had been called directly. */
#include "lib/blocking_lua.h"

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "vm/body.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

int blocking_lua_call(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TFUNCTION) {
        int callable = luaL_getmetafield(L, 1, "__call");
        if (callable)
            lua_pop(L, 1);
        else
            return luaL_error(L, "smarm.blocking: a function expected (argument 1), got %s",
                              luaL_typename(L, 1));
    }
    actor *a = luavm_actor(L);
    int nargs = lua_gettop(L) - 1;
    if (!body_blocking_enter(a)) {
        /* nested inside another smarm.blocking, or where the actor cannot move */
        lua_call(L, nargs, LUA_MULTRET);
        return lua_gettop(L);
    }
    /* on a pool thread: an error is caught here, to go back to a scheduler before it is
     * raised again */
    int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
    body_blocking_leave(a);
    if (st != 0)
        return lua_error(L);
    return lua_gettop(L);
}

LUA_UNWOUND_END
