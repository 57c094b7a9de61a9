/* The smarm core functions: spawn, try_spawn, spawn_opt, self, send, recv, yield, sleep,
 * now, exit, pid_tostring, blocking (the classic C API: every actor uses a few of them, so they
 * cost no FFI declarations per state). lib/init.c puts each in a state's table on first read. */
#include "lib/smarm_lua.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "core/trace.h"
#include "core/actor.h"
#include "lib/args.h"
#include "lib/dist_lua.h"
#include "lib/blocking_lua.h"
#include "lib/chan_lua.h"
#include "lib/recv_lua.h"
#include "vm/codec.h"
#include "vm/body.h"
#include "vm/ljx.h"
#include "vm/luavm.h"
#include "core/runtime.h"
#include "core/chan.h"
#include "core/exit.h"
#include "base/wire.h"
#include "core/preempt.h"
#include "core/registry.h"
#include "base/sanitize.h"
#include "core/scheduler.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

static const char dump_cache_key = 'd';

/* ---- pids ---- */

static void push_pid(lua_State *L, uint64_t pid) { lua_pushnumber(L, (lua_Number)pid); }

static int l_self(lua_State *L)
{
    push_pid(L, luavm_actor(L)->pid);
    return 1;
}

static int l_pid_tostring(lua_State *L)
{
    if (dist_lua_is_remote(L, 1, 0))
        return lib_forward(L, "smarm.dist", "pid_tostring");
    uint64_t pid = lib_check_pid(L, 1, "smarm.pid_tostring");
    lua_pushfstring(L, "<0.%d.%d>", (int)pid_index(pid), (int)pid_gen(pid));
    return 1;
}

static int l_now(lua_State *L)
{
    lua_pushnumber(L, (lua_Number)park_now_ns() / 1e9);
    return 1;
}

/* ---- spawn ---- */

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    return wire_buf_append(ud, p, sz);
}

/* Appends fn's bytecode to b, dumping each function once per state. */
static void append_bytecode(lua_State *L, int fidx, wire_buf *b)
{
    if (!luavm_registry_get(L, &dump_cache_key)) {
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        luavm_registry_keep(L, &dump_cache_key);
    }
    lua_pushvalue(L, fidx);
    lua_rawget(L, -2);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        wire_buf tmp;
        wire_buf_init(&tmp);
        lua_pushvalue(L, fidx);
        ljx_dump(L, dump_writer, &tmp);
        lua_pop(L, 1);
        lua_pushlstring(L, tmp.data, tmp.len);
        wire_buf_free(&tmp);
        lua_pushvalue(L, fidx);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
    }
    size_t len;
    const char *bc = lua_tolstring(L, -1, &len);
    uint32_t n = (uint32_t)len;
    /* the payload's one allocation, with room for a few arguments (growing it from 64
     * bytes cost a realloc or two per spawn) */
    wire_buf_reserve(b, 4 + len + 64);
    wire_buf_append(b, &n, 4);
    wire_buf_append(b, bc, len);
    lua_pop(L, 2);
}

static int spawn_at_capacity(lua_State *L, actor *a, int try_mode, const char *fname)
{
    if (try_mode) {
        lua_pushnil(L);
        lua_pushliteral(L, "at_capacity");
        return 2;
    }
    return luaL_error(L, "%s: at capacity (max_actors = %d)", fname, (int)a->rt->slots.max);
}

static int do_spawn(lua_State *L, int fidx, spawn_opts *o, int try_mode, const char *fname)
{
    actor *a = luavm_actor(L);
    if (lua_type(L, fidx) != LUA_TFUNCTION)
        return luaL_error(L, "%s: a function expected, got %s", fname, luaL_typename(L, fidx));
    if (lua_iscfunction(L, fidx))
        return luaL_error(L, "%s: cannot spawn a C function", fname);
    const char *up = lua_getupvalue(L, fidx, 1);
    if (up) {
        return luaL_error(L,
                          "%s: the function has upvalues (%s); an actor shares nothing, so "
                          "pass values as arguments and require modules inside it",
                          fname, up);
    }
    int nargs = lua_gettop(L) - fidx;
    spawn_opts none = {0};
    if (!o)
        o = &none;
    /* the payload is a block of the actor heap (the child frees it on its own thread) */
    wire_buf b;
    wire_buf_init_heap(&b, &a->rt->heap, a->run.heap_cache);
    append_bytecode(L, fidx, &b);
    chan *mc = NULL;
    if (o->want_monitor) {
        /* the monitor object before the spawn: making it is what may raise */
        mc = chan_new(a->rt, a->pid);
        if (!mc) {
            wire_buf_free(&b);
            return luaL_error(L, "%s: out of memory", fname);
        }
        chan_lua_push(L, mc, CHAN_RX);
        o->monitor = mc;
    }
    /* a slot before the arguments: at capacity they (sockets, an rx: encoding moves them
     * out of their objects) are still the caller's, so a server can answer the client it
     * could not spawn for */
    int64_t idx = sched_reserve_slot(a->rt);
    if (idx < 0) {
        wire_buf_free(&b);
        if (mc)
            chan_release(mc, CHAN_TX);
        return spawn_at_capacity(L, a, try_mode, fname);
    }
    char err[256];
    if (codec_encode_args(L, fidx + 1, nargs, &b, err, sizeof err) != 0) {
        wire_buf_free(&b);
        sched_unreserve_slot(a->rt, idx);
        if (mc)
            chan_release(mc, CHAN_TX);
        return luaL_error(L, "%s: %s", fname, err);
    }
    uint64_t pid;
    /* the payload buffer is handed over, as a block of exactly its length: what the child
     * frees it as (sched_drop_payload) */
    int rc;
    if (wire_buf_fit(&b) == 0) {
        rc = sched_spawn_reserved(a->rt, idx, BOOT_FUNC, b.data, b.len, o, a->pid, &pid);
    } else {
        sched_unreserve_slot(a->rt, idx);
        rc = SMARM_ENOMEM;
    }
    if (rc != 0) {
        /* the arguments may hold channel references: they go with the payload */
        size_t args_at = 4 + *(uint32_t *)b.data;
        wire_release(b.data + args_at, b.len - args_at);
        wire_buf_free(&b);
        if (mc)
            chan_release(mc, CHAN_TX);
        if (rc == SMARM_ETAKEN) {
            lua_pushnil(L);
            lua_pushliteral(L, "taken");
            return 2;
        }
        if (rc == SMARM_ENOMEM)
            return luaL_error(L, "%s: out of memory", fname);
        if (rc == SMARM_ESTOPPED)
            return luaL_error(L, "%s: the runtime is stopping", fname);
        return spawn_at_capacity(L, a, try_mode, fname);
    }
    if (mc) {
        chan_set_monitor(mc, pid, o->monitor_id);
        chan_lua_monitor_ref(L, -1, o->monitor_id);
    }
    push_pid(L, pid);
    if (mc) {
        lua_pushvalue(L, -2);
        return 2;
    }
    return 1;
}

int smarm_lua_spawn(lua_State *L, int fidx, spawn_opts *o, int try_mode, const char *fname)
{
    return do_spawn(L, fidx, o, try_mode, fname);
}

static int l_spawn(lua_State *L) { return do_spawn(L, 1, NULL, 0, "smarm.spawn"); }
static int l_try_spawn(lua_State *L) { return do_spawn(L, 1, NULL, 1, "smarm.try_spawn"); }

/* spawn_opt's byte-count option field: nil gives 0 (the default), anything else must be an
 * integral number in [min, max], or the call raises an error naming the option. */
static size_t opt_size(lua_State *L, const char *field, lua_Number min, lua_Number max)
{
    lua_getfield(L, 1, field);
    size_t v = 0;
    if (!lua_isnil(L, -1)) {
        lua_Number n = lua_tonumber(L, -1);
        /* written so that NaN fails too */
        if (lua_type(L, -1) != LUA_TNUMBER || !(n >= min && n <= max) || n != floor(n)) {
            const char *got =
                lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1);
            char want[160];
            /* lua_pushfstring has no %.0f */
            snprintf(want, sizeof want, "%s must be a whole number of bytes from %.0f to %.0f",
                     field, (double)min, (double)max);
            luaL_error(L, "smarm.spawn_opt: %s (got %s)", want, got);
        }
        v = (size_t)n;
    }
    lua_pop(L, 1);
    return v;
}

static const char *const spawn_opt_keys[] = {"link",  "monitor",  "name",  "stack",
                                             "guard", "max_heap", "owned", NULL};

static int l_spawn_opt(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return luaL_error(L, "smarm.spawn_opt: options must be a table, got %s",
                          luaL_typename(L, 1));
    /* an option it does not know is a mistake (a typo), not something to ignore */
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int known = 0;
        for (int i = 0; k && spawn_opt_keys[i]; i++)
            known |= strcmp(k, spawn_opt_keys[i]) == 0;
        if (!known)
            return luaL_error(L,
                              "smarm.spawn_opt: unknown option %s (known: link, monitor, name, "
                              "stack, guard, max_heap, owned)",
                              k ? k : luaL_typename(L, -1));
    }
    spawn_opts o = {0};
    o.stack_size = opt_size(L, "stack", STACK_MIN_SIZE, (lua_Number)STACK_MAX_SIZE);
    o.stack_guard = opt_size(L, "guard", STACK_MIN_GUARD, (lua_Number)STACK_MAX_GUARD);
    /* 0 = unlimited; 2^53: the largest count a Lua number holds exactly */
    o.max_heap = opt_size(L, "max_heap", 0, 9007199254740992.0);
    lua_getfield(L, 1, "link");
    o.link = lua_toboolean(L, -1);
    lua_getfield(L, 1, "owned");
    o.owned = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (o.owned && !o.link)
        return luaL_error(L, "smarm.spawn_opt: owned needs link = true");
    lua_getfield(L, 1, "monitor");
    o.want_monitor = lua_toboolean(L, -1);
    lua_getfield(L, 1, "name");
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING || lua_objlen(L, -1) == 0)
            return luaL_error(L, "smarm.spawn_opt: name must be a non-empty string");
        /* the options table keeps the string alive */
        o.name = lua_tostring(L, -1);
    }
    lua_pop(L, 3);
    return do_spawn(L, 2, &o, 0, "smarm.spawn_opt");
}

/* ---- send and receive ---- */

int smarm_lua_send(lua_State *L)
{
    double d = 0; /* 0 is no pid: anything but a number takes lib_check_pid_in's error */
    /* a number needs no lua_type */
    int t = ljx_number_at(L, 1, &d) ? LUA_TNUMBER : lua_type(L, 1);
    /* a pid of this runtime is a number: anything else may be another node's pid, or a
     * {name, node} pair */
    if (t != LUA_TNUMBER && t != LUA_TSTRING && dist_lua_is_remote(L, 1, 1))
        return lib_forward(L, "smarm.dist", "send");
    actor *a = luavm_actor(L);
    uint64_t pid;
    if (t == LUA_TSTRING) {
        /* a registered name resolves at the send */
        pid = registry_whereis(a->rt, lua_tostring(L, 1));
        if (!pid) {
            lua_pushnil(L);
            lua_pushliteral(L, "unresolved");
            return 2;
        }
    } else {
        /* d was read above; a bad pid takes the check that names the problem */
        pid = lib_pid_of(d, a->rt->slots.max);
        if (!pid)
            pid = lib_check_pid_in(L, 1, "smarm.send", a->rt);
    }
    if (lua_gettop(L) < 2)
        return luaL_error(L, "smarm.send: a message expected (argument 2)");
    lib_stop_point(a);
    /* nothing below switches the actor to another thread */
    sched *s = sched_current();
    msg *m = lib_encode(L, 2, "smarm.send", s);
    /* before the push: once pushed, the message may be taken and freed, and its address,
     * the flow's id, reused */
    if (TRACE_ON(a->rt))
        trace_rec(s, TRACE_SEND, a->pid, (uintptr_t)m, pid, 0);
    if (sched_send(a->rt, pid, m) != 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "dead");
        return 2;
    }
    lib_count_send(a, s);
    preempt_safe_point(a);
    lua_pushboolean(L, 1);
    return 1;
}

/* Pops one message onto L; 1 if there was one. Inlined into recv and its continuation:
 * as a call of its own it cost a message ~40 instructions. */
static inline __attribute__((always_inline)) int take_msg(actor *a, lua_State *L)
{
    msg *m = mailbox_pop(&a->inbox);
    if (!m)
        return 0;
    recv_lua_take(a, L, m, "smarm.recv");
    return 1;
}

static int recv_cont(actor *a, lua_State *L)
{
    if (take_msg(a, L))
        return 1;
    return lib_timed_out(a, L) ? 2 : -1;
}

static int l_recv(lua_State *L)
{
    actor *a = luavm_actor(L);
    /* recv(match [, timeout]): selective (no lua_type of an absent argument: see
     * lib_check_timeout) */
    if (lua_gettop(L) >= 1 && lua_type(L, 1) == LUA_TFUNCTION)
        return lib_forward(L, "smarm.selective", "recv");
    luavm_gc_catch_up(L);
    if (take_msg(a, L)) {
        luavm_safe_point(a, L);
        preempt_safe_point(a);
        return 1;
    }
    int poll;
    uint64_t deadline = lib_check_timeout(L, 1, "smarm.recv", &poll);
    return lib_wait(L, a, deadline, poll, recv_cont);
}

static int sleep_cont(actor *a, lua_State *L) { return park_now_ns() >= a->run.deadline ? 0 : -1; }

static int l_sleep(lua_State *L)
{
    actor *a = luavm_actor(L);
    uint64_t deadline = lib_check_seconds(L, 1, "smarm.sleep");
    if (deadline <= park_now_ns()) {
        luavm_safe_point(a, L);
        return 0;
    }
    a->run.deadline = deadline;
    sched_arm_wake(a, a->run.deadline);
    return body_wait(L, a, sleep_cont);
}

static int l_yield(lua_State *L)
{
    actor *a = luavm_actor(L);
    sched_yield_actor(a);
    luavm_safe_point(a, L);
    return 0;
}

/* ---- exit ---- */

/* smarm.exit(pid, reason): Erlang's exit/2, a signal to pid (core/exit.h: exit_signal). */
static int exit_to(lua_State *L)
{
    actor *a = luavm_actor(L);
    uint64_t pid = lib_check_pid_in(L, 1, "smarm.exit", a->rt);
    const char *r = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    enum exit_kind kind = r && strcmp(r, "kill") == 0                          ? EXIT_KILL
                          : lua_isnil(L, 2) || (r && strcmp(r, "normal") == 0) ? EXIT_NORMAL
                                                                               : EXIT_OTHER;
    int self = pid == a->pid;
    /* exit(self(), "normal") of an actor that does not trap ends it, as in Erlang */
    if (self && kind == EXIT_NORMAL && !a->ex.trap &&
        !atomic_load_explicit(&a->run.host, memory_order_relaxed)) {
        lua_settop(L, 2);
        return body_raise_exit(L, 2);
    }
    wire_buf b;
    wire_buf_init(&b);
    char err[200];
    if (lua_isnil(L, 2) ? wire_put_string(&b, "normal", 6) != 0
                        : codec_encode(L, 2, &b, "reason", err, sizeof err) != 0) {
        wire_buf_free(&b);
        return luaL_error(L, "smarm.exit: %s", lua_isnil(L, 2) ? "out of memory" : err);
    }
    if (wire_has_refs(b.data, b.len)) {
        wire_release(b.data, b.len);
        wire_buf_free(&b);
        return luaL_error(L, "smarm.exit: a reason cannot carry channel endpoints");
    }
    int rc = exit_signal(a->rt, a->pid, pid, b.data, b.len, kind);
    wire_buf_free(&b);
    /* a signal that stops the caller itself takes effect now */
    if (self && atomic_load_explicit(&a->run.stop, memory_order_acquire) &&
        !atomic_load_explicit(&a->run.host, memory_order_relaxed))
        sched_yield_actor(a);
    lua_pushboolean(L, rc == 0);
    return 1;
}

static int l_exit(lua_State *L)
{
    if (lua_gettop(L) >= 2)
        return exit_to(L);
    if (atomic_load_explicit(&luavm_actor(L)->run.host, memory_order_relaxed))
        return luaL_error(L, "smarm.exit: a host thread ends its actor with smarm_host_close");
    lua_settop(L, 1);
    return body_raise_exit(L, 1);
}

/* ---- the table ---- */

const luaL_Reg smarm_lua_funcs[] = {
    {"spawn", l_spawn},
    {"try_spawn", l_try_spawn},
    {"spawn_opt", l_spawn_opt},
    {"self", l_self},
    {"send", smarm_lua_send},
    {"recv", l_recv},
    {"yield", l_yield},
    {"sleep", l_sleep},
    {"now", l_now},
    {"exit", l_exit},
    {"pid_tostring", l_pid_tostring},
    {"blocking", blocking_lua_call},
    {NULL, NULL},
};

LUA_UNWOUND_END
