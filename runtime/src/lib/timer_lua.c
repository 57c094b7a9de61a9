/* send_after / cancel_timer: a message encoded when the timer is armed and delivered by
 * whichever scheduler fires it; cancelling takes the message back unless it fired. */
#include "lib/timer_lua.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/actor.h"
#include "vm/codec.h"
#include "vm/luavm.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/registry.h"
#include "core/scheduler.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* The destination as stored in the timer: a pid today. A registered name will be stored
 * here too (and resolved in timer_fire_send), so that it is looked up when the timer fires. */
static uint64_t check_dest(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) == LUA_TSTRING)
        return 0; /* a name: it travels after the message (see timer_fire_send) */
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
int timer_lua_send_after(lua_State *L)
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
    wire_buf *b = &sched_current()->enc;
    b->len = 0;
    char err[256];
    if (codec_encode(L, 3, b, "msg", err, sizeof err) != 0)
        return luaL_error(L, "smarm.send_after: %s", err);
    size_t namelen = dest ? 0 : lua_objlen(L, 2) + 1;
    msg *m = namelen ? malloc(sizeof(msg) + b->len + namelen) : msg_new(b->data, b->len);
    if (!m) {
        wire_release(b->data, b->len);
        return luaL_error(L, "smarm.send_after: out of memory");
    }
    if (namelen) {
        m->next = NULL;
        m->len = (uint32_t)b->len;
        m->extra = (uint32_t)namelen;
        memcpy(m->data, b->data, b->len);
        memcpy(m->data + b->len, lua_tostring(L, 2), namelen);
    }
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
int timer_lua_cancel(lua_State *L)
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

LUA_UNWOUND_END

void timer_fire_send(smarm_runtime *rt, timer_entry *e)
{
    /* resolved now, not when armed: a name follows whoever holds it at the fire */
    msg *m = e->msg;
    uint64_t pid = e->pid;
    if (m->extra) {
        pid = registry_whereis(rt, m->data + m->len);
        m->extra = 0;
        if (!pid) {
            msg_free(m); /* nobody holds the name: dropped */
            return;
        }
    }
    sched_send(rt, pid, m); /* a dead pid frees the message: dropped */
}
