/* send_after / cancel_timer: a message encoded when the timer is armed and delivered by
 * whichever scheduler fires it; cancelling takes the message back unless it fired. */
#include "lib/timer_lua.h"

#include <math.h>
#include <pthread.h>
#include <sys/random.h>
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

/* The destination: a pid (checked as every pid argument is), or 0 for a registered name,
 * which travels after the message and is resolved when the timer fires (the scheduler's
 * fire_send). */
static uint64_t check_dest(lua_State *L, int idx, const char *fname)
{
    return lua_type(L, idx) == LUA_TSTRING ? 0 : lib_check_pid(L, idx, fname);
}

/* A timer handle is the timer's id with a tag folded in below it: a keyed hash of the id
 * and the pid (index and generation) of the actor that armed it. Only that actor can
 * cancel it; another actor's handle, a guessed number or a stale handle finds no timer. */
#define TAG_BITS 20

static uint64_t tag_key;
static pthread_once_t tag_once = PTHREAD_ONCE_INIT;

static void tag_key_init(void)
{
    if (getrandom(&tag_key, sizeof tag_key, 0) != (ssize_t)sizeof tag_key)
        tag_key = park_now_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)&tag_key;
    tag_key |= 1;
}

static uint64_t handle_tag(uint64_t id, uint64_t owner)
{
    uint64_t x = (id * 0x9E3779B97F4A7C15ull) ^ (owner * 0xC2B2AE3D27D4EB4Full) ^ tag_key;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return x & (((uint64_t)1 << TAG_BITS) - 1);
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
    uint64_t deadline = lib_check_seconds(L, 1, "smarm.send_after");
    uint64_t dest = check_dest(L, 2, "smarm.send_after");
    if (lua_gettop(L) < 3)
        return luaL_error(L, "smarm.send_after: a message expected (argument 3)");
    size_t namelen = dest ? 0 : lua_objlen(L, 2) + 1;
    msg *m = lib_encode_msg(L, 3, lib_scratch(a), "smarm.send_after",
                            namelen ? lua_tostring(L, 2) : NULL, namelen);
    uint64_t id;
    int r = timers_arm_send(&a->rt->tm, deadline, dest, m, &id);
    if (r < 0) {
        msg_free(m);
        return luaL_error(L, "smarm.send_after: out of memory");
    }
    if (r == 1)
        sched_nudge_timekeeper(a->rt);
    pthread_once(&tag_once, tag_key_init);
    lua_pushnumber(L, (lua_Number)((id << TAG_BITS) | handle_tag(id, a->pid)));
    return 1;
}

/**
 * smarm.cancel_timer(timer) -> boolean
 * true if the timer was cancelled before it fired (its message will never arrive); false
 * if it had fired already, was cancelled before, or is not a timer this actor armed.
 */
static int l_cancel_timer(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, 1) != LUA_TNUMBER)
        return luaL_error(L, "smarm.cancel_timer: a timer expected, got %s", luaL_typename(L, 1));
    double d = lua_tonumber(L, 1);
    if (!(d >= 1 && d < 9007199254740992.0) || d != floor(d))
        return luaL_error(L, "smarm.cancel_timer: %f is not a timer", d);
    uint64_t h = (uint64_t)d, id = h >> TAG_BITS;
    pthread_once(&tag_once, tag_key_init);
    msg *m = NULL;
    if (id && (h & (((uint64_t)1 << TAG_BITS) - 1)) == handle_tag(id, a->pid))
        m = timers_cancel(&a->rt->tm, id);
    if (m)
        msg_free(m);
    lua_pushboolean(L, m != NULL);
    return 1;
}

/**
 * smarm.read_timer(timer) -> seconds | false
 * The seconds left before the timer fires (0 when due but not delivered yet); false once it
 * fired or was cancelled, or for a timer this actor did not arm (Erlang's read_timer).
 */
static int l_read_timer(lua_State *L)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, 1) != LUA_TNUMBER)
        return luaL_error(L, "smarm.read_timer: a timer expected, got %s", luaL_typename(L, 1));
    double d = lua_tonumber(L, 1);
    if (!(d >= 1 && d < 9007199254740992.0) || d != floor(d))
        return luaL_error(L, "smarm.read_timer: %f is not a timer", d);
    uint64_t h = (uint64_t)d, id = h >> TAG_BITS, deadline = 0;
    pthread_once(&tag_once, tag_key_init);
    if (id && (h & (((uint64_t)1 << TAG_BITS) - 1)) == handle_tag(id, a->pid))
        deadline = timers_deadline(&a->rt->tm, id);
    if (!deadline) {
        lua_pushboolean(L, 0);
        return 1;
    }
    uint64_t now = park_now_ns();
    lua_pushnumber(L, deadline > now ? (double)(deadline - now) / 1e9 : 0.0);
    return 1;
}

const luaL_Reg timer_lua_funcs[] = {
    {"read_timer", l_read_timer},
    {"send_after", l_send_after},
    {"cancel_timer", l_cancel_timer},
    {NULL, NULL},
};

LUA_UNWOUND_END
