/* The Lua face of exits, names and groups: link, unlink, spawn_link,
 * spawn_monitor, monitor, demonitor, trap_exit, kill, shutdown,
 * terminal_reason, register, unregister, whereis and smarm.pg: one group of the smarm
 * table (lib/init.c). */
#include "lib/exit_lua.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/actor.h"
#include "core/chan.h"
#include "lib/chan_lua.h"
#include "vm/codec.h"
#include "core/exit.h"
#include "lib/args.h"
#include "lib/dist_lua.h"
#include "lib/smarm_lua.h"
#include "vm/luavm.h"
#include "core/pg.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/scheduler.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

static const char trap_key = 't';

/* ---- links ---- */

static int l_link(lua_State *L)
{
    if (dist_lua_is_remote(L, 1, 0))
        return lib_forward(L, "smarm.dist", "link");
    actor *a = luavm_actor(L);
    uint64_t pid = lib_check_pid(L, 1, "smarm.link");
    int rc = exit_link(a->rt, a, pid);
    if (rc == -2)
        return luaL_error(L, "smarm.link: out of memory");
    if (rc == -1)
        exit_noproc(a->rt, a, pid); /* a trapping caller gets a message, others stop */
    lua_pushboolean(L, 1);
    return 1;
}

static int l_unlink(lua_State *L)
{
    if (dist_lua_is_remote(L, 1, 0))
        return lib_forward(L, "smarm.dist", "unlink");
    actor *a = luavm_actor(L);
    exit_unlink(a->rt, a, lib_check_pid(L, 1, "smarm.unlink"));
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- monitors: a monitor is the rx end of a channel its down notice arrives on ---- */

/* smarm.monitor(pid, rx): the notice goes to the caller's channel rx, which several
 * monitors may share (a supervisor of many children waits on one arm); returns the ref. */
static int monitor_into(lua_State *L, actor *a, uint64_t pid)
{
    void *ref = NULL;
    void *ud = lua_touserdata(L, 2);
    int kind = ud ? chan_lua_endpoint(ud, lua_objlen(L, 2), &ref) : 0;
    if (kind != CHAN_RX || !ref)
        return luaL_error(L, "smarm.monitor: argument 2 must be a channel rx, got %s",
                          luaL_typename(L, 2));
    chan *c = ref;
    chan_retain(c, CHAN_TX);
    uint64_t id = exit_monitor_shared(a->rt, pid, c); /* takes that tx reference */
    if (!id)
        return luaL_error(L, "smarm.monitor: out of memory");
    lua_pushnumber(L, (lua_Number)id);
    return 1;
}

static int l_monitor(lua_State *L)
{
    if (dist_lua_is_remote(L, 1, 1))
        return lib_forward(L, "smarm.dist", "monitor");
    actor *a = luavm_actor(L);
    uint64_t pid = lib_check_pid(L, 1, "smarm.monitor");
    if (!lua_isnoneornil(L, 2))
        return monitor_into(L, a, pid);
    chan *c = chan_new(a->rt, a->pid);
    if (!c)
        return luaL_error(L, "smarm.monitor: out of memory");
    /* the rx object first (making it may raise out of memory), then the registration */
    chan_lua_push(L, c, CHAN_RX);
    uint64_t id = exit_monitor(a->rt, pid, c); /* takes the tx reference */
    chan_set_monitor(c, pid, id);
    chan_lua_monitor_ref(L, -1, id);
    return 1;
}

static int l_demonitor(lua_State *L)
{
    actor *a = luavm_actor(L);
    void *ref = NULL;
    void *ud = lua_touserdata(L, 1);
    uint64_t target = 0, id = 0;
    int kind = ud ? chan_lua_endpoint(ud, lua_objlen(L, 1), &ref) : 0;
    chan *c = ref;
    if (kind != CHAN_RX || !c || !chan_get_monitor(c, &target, &id))
        return luaL_error(L, "smarm.demonitor: a monitor expected, got %s", luaL_typename(L, 1));
    int removed = exit_demonitor(a->rt, target, id);
    /* closed first: a death already under way cannot deliver after this returns;
     * then a notice that already arrived is discarded */
    chan_close(c);
    chan_drain(c);
    if (removed && dist_lua_hooks_demonitor())
        dist_lua_demonitored(L, target); /* a remote monitor's proxy ends too */
    lua_pushboolean(L, removed);
    return 1;
}

/* ---- spawn_link / spawn_monitor ---- */

static int spawn_with(lua_State *L, int link, int monitor)
{
    spawn_opts o = {0};
    o.link = link;
    o.want_monitor = monitor;
    return smarm_lua_spawn(L, 1, &o, 0, link ? "smarm.spawn_link" : "smarm.spawn_monitor");
}

static int l_spawn_link(lua_State *L) { return spawn_with(L, 1, 0); }
static int l_spawn_monitor(lua_State *L) { return spawn_with(L, 0, 1); }

/* ---- trap_exit, kill, shutdown ---- */

static int l_trap_exit(lua_State *L)
{
    actor *a = luavm_actor(L);
    int on = lua_isnone(L, 1) || lua_toboolean(L, 1);
    lua_pushlightuserdata(L, (void *)&trap_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    if (!on) {
        exit_set_trap(a, NULL);
        lua_pushlightuserdata(L, (void *)&trap_key);
        lua_pushnil(L);
        lua_rawset(L, LUA_REGISTRYINDEX);
        return 1; /* the old receiver, closed now */
    }
    if (!lua_isnil(L, -1))
        return 1; /* already trapping: the same receiver */
    lua_pop(L, 1);
    chan *c = chan_new(a->rt, a->pid);
    if (!c)
        return luaL_error(L, "smarm.trap_exit: out of memory");
    chan_lua_push(L, c, CHAN_RX);
    lua_pushlightuserdata(L, (void *)&trap_key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
    exit_set_trap(a, c); /* takes the tx reference */
    return 1;
}

static int l_kill(lua_State *L)
{
    actor *a = luavm_actor(L);
    uint64_t pid = lib_check_pid(L, 1, "smarm.kill");
    sched_stop(a->rt, pid, STOP_KILL);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_shutdown(lua_State *L)
{
    actor *a = luavm_actor(L);
    exit_shutdown(a->rt, a->pid, lib_check_pid(L, 1, "smarm.shutdown"));
    lua_pushboolean(L, 1);
    return 1;
}

static int l_terminal_reason(lua_State *L)
{
    actor *a = luavm_actor(L);
    uint64_t pid = lib_check_pid(L, 1, "smarm.terminal_reason");
    char *bytes;
    size_t len;
    if (exit_terminal(a->rt, pid, &bytes, &len) != 0)
        return 0;
    char err[128];
    int rc = codec_decode(L, bytes, len, err, sizeof err);
    free(bytes);
    if (rc != 0)
        return luaL_error(L, "smarm.terminal_reason: %s", err);
    return 1;
}

/* ---- names ---- */

static int l_register(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *name = lib_check_name(L, 1, "smarm.register");
    uint64_t pid = lua_isnoneornil(L, 2) ? a->pid : lib_check_pid(L, 2, "smarm.register");
    switch (registry_register(a->rt, name, pid)) {
    case REG_OK:
        lua_pushboolean(L, 1);
        return 1;
    case REG_TAKEN:
        lua_pushnil(L);
        lua_pushliteral(L, "taken");
        return 2;
    case REG_DEAD:
        lua_pushnil(L);
        lua_pushliteral(L, "dead");
        return 2;
    case REG_NAMED:
        lua_pushnil(L);
        lua_pushliteral(L, "already_named");
        return 2;
    }
    return luaL_error(L, "smarm.register: out of memory");
}

static int l_unregister(lua_State *L)
{
    actor *a = luavm_actor(L);
    lua_pushboolean(L, registry_unregister(a->rt, lib_check_name(L, 1, "smarm.unregister")));
    return 1;
}

static int l_whereis(lua_State *L)
{
    actor *a = luavm_actor(L);
    uint64_t pid = registry_whereis(a->rt, lib_check_name(L, 1, "smarm.whereis"));
    if (!pid)
        return 0;
    lua_pushnumber(L, (lua_Number)pid);
    return 1;
}

/* ---- process groups ---- */

/* Whether group g is seen across nodes: the node is distributed and the name does not
 * start with '$' (the runtime's own groups, and any an application keeps to this node). */
static int pg_global(const char *g) { return g[0] != '$' && dist_lua_alive(); }

static int l_pg_join(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *g = lib_check_name(L, 1, "smarm.pg.join");
    uint64_t pid = lua_isnoneornil(L, 2) ? a->pid : lib_check_pid(L, 2, "smarm.pg.join");
    int rc = pg_join(a->rt, g, pid);
    if (rc == -2)
        return luaL_error(L, "smarm.pg.join: out of memory");
    if (rc == -1) {
        lua_pushnil(L);
        lua_pushliteral(L, "dead");
        return 2;
    }
    if (pg_global(g)) { /* the pg scope tells the other nodes */
        lua_pushstring(L, g);
        lua_pushnumber(L, (lua_Number)pid);
        dist_lua_pg_call(L, "joined", 2, 0);
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int l_pg_leave(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *g = lib_check_name(L, 1, "smarm.pg.leave");
    uint64_t pid = lua_isnoneornil(L, 2) ? a->pid : lib_check_pid(L, 2, "smarm.pg.leave");
    int left = pg_leave(a->rt, g, pid);
    if (left && pg_global(g)) {
        lua_pushstring(L, g);
        lua_pushnumber(L, (lua_Number)pid);
        dist_lua_pg_call(L, "left", 2, 0);
    }
    lua_pushboolean(L, left);
    return 1;
}

static int l_pg_members(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *g = lib_check_name(L, 1, "smarm.pg.members");
    uint64_t small[64], *buf = small;
    uint32_t n = pg_members(a->rt, g, buf, 64);
    if (n > 64) {
        buf = malloc(n * sizeof *buf);
        if (!buf)
            return luaL_error(L, "smarm.pg.members: out of memory");
        uint32_t m = pg_members(a->rt, g, buf, n);
        n = m < n ? m : n;
    }
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        lua_pushnumber(L, (lua_Number)buf[i]);
        lua_rawseti(L, -2, (int)i + 1);
    }
    if (buf != small)
        free(buf);
    if (pg_global(g)) { /* and the members on other nodes */
        lua_pushstring(L, g);
        lua_insert(L, -2);
        dist_lua_pg_call(L, "members", 2, 1);
    }
    return 1;
}

/* A spread of picks across nodes (xorshift, per scheduler thread; no need to be secret). */
static uint64_t pick_random(const actor *a)
{
    static __thread uint64_t rng;
    if (!rng)
        rng = (a->pid * 0x9E3779B97F4A7C15ull) ^ (uint64_t)(uintptr_t)&rng ^ 1;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Pushes a member of g (this node's or another's, each as likely), or nothing: the other
 * nodes' members come from the pg scope, one round trip as for members. */
static int pick_across(lua_State *L, actor *a, const char *g)
{
    uint32_t nl = pg_members(a->rt, g, NULL, 0);
    lua_pushstring(L, g);
    lua_newtable(L);
    dist_lua_pg_call(L, "members", 2, 1);
    uint64_t nr = lua_objlen(L, -1);
    if (nl + nr == 0)
        return 0;
    uint64_t r = pick_random(a) % (nl + nr);
    if (r < nl) {
        uint64_t pid = pg_pick(a->rt, g);
        if (pid) {
            lua_pushnumber(L, (lua_Number)pid);
            return 1;
        }
        if (!nr) /* this node's members left meanwhile */
            return 0;
        r = nl + r % nr;
    }
    lua_rawgeti(L, -1, (int)(r - nl + 1));
    return 1;
}

static int l_pg_pick(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *g = lib_check_name(L, 1, "smarm.pg.pick");
    if (pg_global(g))
        return pick_across(L, a, g);
    uint64_t pid = pg_pick(a->rt, g);
    if (!pid)
        return 0;
    lua_pushnumber(L, (lua_Number)pid);
    return 1;
}

/* dispatch of a group seen across nodes: [group, msg] on the stack */
static int dispatch_across(lua_State *L, actor *a, const char *g)
{
    for (int tries = 0; tries < 8; tries++) {
        lua_settop(L, 2);
        if (!pick_across(L, a, g))
            break;
        int pid = lua_gettop(L);
        lua_pushcfunction(L, smarm_lua_send);
        lua_pushvalue(L, pid);
        lua_pushvalue(L, 2);
        lua_call(L, 2, 1);
        if (lua_toboolean(L, -1)) {
            lua_pushvalue(L, pid);
            return 1;
        }
    }
    lua_pushnil(L);
    lua_pushliteral(L, "no_member");
    return 2;
}

static int l_pg_dispatch(lua_State *L)
{
    actor *a = luavm_actor(L);
    const char *g = lib_check_name(L, 1, "smarm.pg.dispatch");
    if (lua_gettop(L) < 2)
        return luaL_error(L, "smarm.pg.dispatch: a message expected (argument 2)");
    if (pg_global(g)) {
        lua_settop(L, 2);
        return dispatch_across(L, a, g);
    }
    /* a member that dies between the pick and the send is picked around */
    for (int tries = 0; tries < 8; tries++) {
        uint64_t pid = pg_pick(a->rt, g);
        if (!pid)
            break;
        lua_settop(L, 2);
        lua_pushnumber(L, (lua_Number)pid);
        lua_replace(L, 1);
        if (smarm_lua_send(L) == 1) {
            lua_pushnumber(L, (lua_Number)pid);
            return 1;
        }
    }
    lua_pushnil(L);
    lua_pushliteral(L, "no_member");
    return 2;
}

const luaL_Reg exit_lua_funcs[] = {
    {"link", l_link},
    {"unlink", l_unlink},
    {"spawn_link", l_spawn_link},
    {"spawn_monitor", l_spawn_monitor},
    {"monitor", l_monitor},
    {"demonitor", l_demonitor},
    {"trap_exit", l_trap_exit},
    {"kill", l_kill},
    {"shutdown", l_shutdown},
    {"terminal_reason", l_terminal_reason},
    {"register", l_register},
    {"unregister", l_unregister},
    {"whereis", l_whereis},
    {NULL, NULL},
};

static const luaL_Reg pg_funcs[] = {
    {"join", l_pg_join}, {"leave", l_pg_leave},       {"members", l_pg_members},
    {"pick", l_pg_pick}, {"dispatch", l_pg_dispatch}, {NULL, NULL},
};

void exit_lua_fields(lua_State *L, int t)
{
    lua_pushliteral(L, "pg");
    lua_createtable(L, 0, 5);
    for (const luaL_Reg *r = pg_funcs; r->name; r++) {
        lua_pushcfunction(L, r->func);
        lua_setfield(L, -2, r->name);
    }
    lua_rawset(L, t);
}

LUA_UNWOUND_END
