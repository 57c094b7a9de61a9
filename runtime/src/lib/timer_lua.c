/* send_after / cancel_timer: a message encoded when the timer is armed and delivered by
 * whichever scheduler fires it; cancelling takes the message back unless it fired. */
#include "lib/timer_lua.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/actor.h"
#include "lib/args.h"
#include "vm/codec.h"
#include "vm/luavm.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/registry.h"
#include "core/scheduler.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* The destination: a pid, or 0 for a registered name, which travels after the message and
 * is resolved when the timer fires (the scheduler's fire_send). */
static uint64_t check_dest(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) == LUA_TSTRING)
        return 0;
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: bad destination (a pid expected, got %s)", fname, luaL_typename(L, idx));
    double d = lua_tonumber(L, idx);
    if (!(d >= 1 && d < 9007199254740992.0) || d != floor(d))
        luaL_error(L, "%s: bad destination (%f is not a pid)", fname, d);
    return (uint64_t)d;
}

/**
 * smarm.send_after(seconds, dest, msg) -> timer
 * Sends a copy of msg (encoded now: an unsendable value raises here) to dest after
 * seconds. dest is resolved when the timer fires; a dead destination drops the message
 * silently (Erlang's erlang:send_after). The timer is a number for smarm.cancel_timer.
 */
static int l_send_after(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, 1) != LUA_TNUMBER)
        return luaL_error(L, "smarm.send_after: seconds must be a number, got %s",
                          luaL_typename(L, 1));
    double s = lua_tonumber(L, 1);
    if (!(s >= 0))
        return luaL_error(L, "smarm.send_after: seconds must not be negative");
    if (s > 1e9)
        s = 1e9;
    uint64_t dest = check_dest(L, 2, "smarm.send_after");
    luaL_checkany(L, 3);
    size_t namelen = dest ? 0 : lua_objlen(L, 2) + 1;
    msg *m = lib_encode_msg(L, 3, &sched_current()->enc, "smarm.send_after",
                            namelen ? lua_tostring(L, 2) : NULL, namelen);
    uint64_t id, deadline = park_now_ns() + (uint64_t)(s * 1e9);
    int r = timers_arm_send(&a->rt->tm, deadline, dest, m, &id);
    if (r < 0) {
        msg_free(m);
        return luaL_error(L, "smarm.send_after: out of memory");
    }
    if (r == 1)
        sched_nudge_timekeeper(a->rt);
    lua_pushnumber(L, (lua_Number)id);
    return 1;
}

/**
 * smarm.cancel_timer(timer) -> boolean
 * true if the timer was cancelled before it fired (its message will never arrive); false
 * if it had fired already (or was cancelled before). Any actor may cancel any timer.
 */
static int l_cancel_timer(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, 1) != LUA_TNUMBER)
        return luaL_error(L, "smarm.cancel_timer: a timer expected, got %s", luaL_typename(L, 1));
    double d = lua_tonumber(L, 1);
    if (!(d >= 1 && d < 9007199254740992.0) || d != floor(d))
        return luaL_error(L, "smarm.cancel_timer: %f is not a timer", d);
    msg *m = timers_cancel(&a->rt->tm, (uint64_t)d);
    if (m)
        msg_free(m);
    lua_pushboolean(L, m != NULL);
    return 1;
}

const luaL_Reg timer_lua_funcs[] = {
    {"send_after", l_send_after},
    {"cancel_timer", l_cancel_timer},
    {NULL, NULL},
};

LUA_UNWOUND_END
