/* The actor body: what runs on an actor's C stack, between the scheduler's switches. */
#include "vm/body.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "core/exit.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "vm/codec.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* ---- smarm.exit: a marker error the body recognises ---- */

static const char exit_key = 'e';

int body_raise_exit(lua_State *L, int idx)
{
    lua_pushlightuserdata(L, (void *)&exit_key);
    lua_pushvalue(L, idx);
    lua_rawset(L, LUA_REGISTRYINDEX);
    lua_pushlightuserdata(L, (void *)&exit_key);
    return lua_error(L);
}

static int is_exit(lua_State *L, int idx) { return lua_touserdata(L, idx) == (void *)&exit_key; }

/* Pushes the value given to smarm.exit (nil if none). */
static void push_exit_value(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&exit_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
}

/* The reason given to smarm.exit as a string, or NULL for "normal". */
static const char *exit_reason(lua_State *L)
{
    push_exit_value(L);
    const char *r = NULL;
    if (lua_type(L, -1) == LUA_TSTRING) {
        r = lua_tostring(L, -1);
        if (strcmp(r, "normal") == 0)
            r = NULL;
    } else if (!lua_isnil(L, -1)) {
        r = luaL_typename(L, -1);
    }
    /* the string stays anchored in the registry */
    lua_pop(L, 1);
    return r;
}

/* ---- ending ---- */

/* The reason smarm.exit was given, as codec bytes (a string if it cannot be sent). */
static void exit_value_reason(actor *a, lua_State *src)
{
    push_exit_value(src);
    if (lua_isnil(src, -1) ||
        (lua_type(src, -1) == LUA_TSTRING && strcmp(lua_tostring(src, -1), "normal") == 0)) {
        lua_pop(src, 1);
        exit_set_reason(a, "normal", 0);
        return;
    }
    wire_buf b;
    wire_buf_init(&b);
    char err[128];
    if (codec_encode(src, -1, &b, "reason", err, sizeof err) == 0 &&
        !wire_has_refs(b.data, b.len)) {
        exit_set_reason_bytes(a, b.data, b.len, 1);
    } else {
        if (b.len)
            wire_release(b.data, b.len);
        wire_buf_free(&b);
        exit_set_reason(a, luaL_typename(src, -1), 1);
    }
    lua_pop(src, 1);
}

struct crash {
    lua_State *src;   /* holds the error value on top */
    lua_State *co;    /* the coroutine to trace back, or NULL */
    const char *kind; /* what to call an error value that is no string or number */
    const char *msg, *tb;
};

/* The error value as a message and, for the body's coroutine, a traceback, then both
 * together, on top of L (the strings stay on the stacks until the caller pops them). */
static void format_crash(lua_State *L, void *ud)
{
    struct crash *c = ud;
    if (!c->msg)
        c->msg = lua_tostring(c->src, -1); /* a number becomes a string here */
    if (!c->msg)
        c->msg = c->kind;
    if (!c->co)
        return;
    luaL_traceback(L, c->co, NULL, 0);
    lua_pushfstring(L, "%s\n%s", c->msg, lua_tostring(L, -1));
    c->tb = lua_tostring(L, -2);
}

void body_finish(actor *a, int status)
{
    smarm_runtime *rt = a->rt;
    /* The report below allocates on the main state outside any protected call: a GC step
     * there would run __gc finalizers, and one that raised would panic the process. The
     * state is only closed after this (lua_close runs the finalizers itself). */
    if (a->vm.L)
        ljx_gc_hold(a->vm.L);
    if (a->vm.heap_exceeded) {
        /* past max_heap: whatever the body did after (returned, exited, or was stopped) */
        char detail[96];
        snprintf(detail, sizeof detail, "its Lua heap went past max_heap (%zu bytes)",
                 a->vm.max_heap);
        luavm_report(a, "stopped (memory)", detail);
        exit_set_reason(a, "memory", 1);
    } else if (status == 0) {
        exit_set_reason(a, "normal", 0);
    } else if (status == BODY_KILLED) {
        int how = atomic_load_explicit(&a->run.stop, memory_order_acquire);
        if (how == STOP_LINKED && a->ex.exit_override) {
            /* a linked actor died: this one dies with the same reason */
            char *copy = malloc(a->ex.exit_override_len);
            if (copy)
                memcpy(copy, a->ex.exit_override, a->ex.exit_override_len);
            exit_set_reason_bytes(a, copy, copy ? a->ex.exit_override_len : 0, 1);
        } else {
            exit_set_reason(a, how == STOP_SHUTDOWN || how == STOP_SWEEP ? "shutdown" : "killed",
                            1);
        }
        /* the root never ends silently: a run that ends with status 1 says why */
        if (a->pid == rt->root_pid && how != STOP_SWEEP)
            luavm_report(a, "stopped",
                         how == STOP_LINKED     ? "a linked actor exited abnormally"
                         : how == STOP_SHUTDOWN ? "shutdown"
                                                : "killed");
    } else {
        lua_State *src = status == BODY_ERROR_ON_MAIN ? a->vm.L : a->vm.co;
        if (is_exit(src, -1)) {
            exit_value_reason(a, src);
            if (a->ex.reason_abnormal && a->pid == rt->root_pid) {
                const char *r = exit_reason(src);
                luavm_report(a, "exited", r ? r : "abnormal");
            }
        } else {
            /* formatted in a protected call: out of memory there would panic the process */
            int t = lua_type(src, -1);
            const char *kind = t == LUA_TNIL ? "nil" : lua_typename(src, t);
            struct crash c = {src, status == BODY_ERROR_ON_MAIN ? NULL : a->vm.co, kind,
                              t == LUA_TSTRING ? lua_tostring(src, -1) : NULL, NULL};
            int top = lua_gettop(a->vm.L);
            if (ljx_cpcall(a->vm.L, format_crash, &c) != 0)
                c.tb = NULL; /* out of memory: the message alone */
            if (!c.msg)
                c.msg = kind;
            luavm_report(a, "crashed", c.tb ? lua_tostring(a->vm.L, -1) : c.msg);
            exit_set_error(a, c.msg, c.tb);
            lua_settop(a->vm.L, top);
        }
    }
    if (a->pid == rt->root_pid)
        rt->root_status = a->ex.reason_abnormal;
}

/* ---- running ---- */

/* A stopped actor is never resumed: whatever it was doing (a parked wait, a
 * preempted trace, a pcall that would catch an error) is dropped with its
 * frames, and its state is closed on a fresh context. The stop cannot be
 * caught because nothing of the actor runs again. */
void body_stop_entry(actor *a)
{
    body_finish(a, BODY_KILLED);
    luavm_close(a);
    sched_leave(a, LEAVE_DONE);
}

/* Runs a continuation in protected mode on the actor's main state and moves its
 * results to the coroutine about to be resumed (decoding may raise out of memory). */
struct cont_call {
    actor *a;
    int nres;
};

int body_cont_trampoline(lua_State *L)
{
    struct cont_call *cc = lua_touserdata(L, 1);
    lua_pop(L, 1);
    int base = lua_gettop(L);
    cc->nres = cc->a->vm.cont(cc->a, L);
    if (cc->nres > 0)
        lua_xmove(L, cc->a->vm.co, cc->nres);
    lua_settop(L, base);
    return 0;
}

int body_wait(lua_State *L, actor *a, actor_cont cont)
{
    if (a->vm.closing)
        return luaL_error(L, "smarm: cannot wait while the actor is ending");
    a->stats.parks++;
    if (L == a->vm.co && ljx_can_yield(L)) {
        a->vm.cont = cont;
        a->run.yield_leave = LEAVE_PARK_CO;
        return lua_yield(L, 0);
    }
    for (;;) {
        /* a stopped actor is never switched back in here: see the scheduler's run_actor */
        sched_leave(a, LEAVE_PARK_STACK);
        int n = cont(a, L);
        if (n >= 0)
            return n;
        sched_rearm_wake(a);
    }
}

void body_entry(actor *a)
{
    int nargs;
    if (!a->vm.L) {
        nargs = luavm_boot(a);
        if (nargs < 0) {
            luavm_close(a);
            sched_leave(a, LEAVE_DONE);
        }
    } else {
        struct cont_call cc = {a, 0};
        /* the trampoline is made once per state (lua_cpcall would allocate a
         * closure on every resume) */
        lua_rawgeti(a->vm.L, LUA_REGISTRYINDEX, a->vm.cont_ref);
        lua_pushlightuserdata(a->vm.L, &cc);
        /* no __gc finalizer runs in the continuation: an error one raised there would end
         * the actor (no pcall of its own is around) and lose what the wait took */
        size_t held = ljx_gc_hold(a->vm.L);
        int st = lua_pcall(a->vm.L, 1, 0, 0);
        ljx_gc_resume(a->vm.L, held);
        if (st != 0) {
            body_finish(a, BODY_ERROR_ON_MAIN);
            luavm_close(a);
            sched_leave(a, LEAVE_DONE);
        }
        if (cc.nres < 0) {
            sched_rearm_wake(a);
            sched_leave(a, LEAVE_PARK_CO);
        }
        nargs = cc.nres;
    }
    a->vm.cont = NULL;
    int st = lua_resume(a->vm.co, nargs);
    if (st == LUA_YIELD) {
        if (a->vm.cont)
            sched_leave(a, a->run.yield_leave);
        /* a bare coroutine.yield() at the body's top level */
        lua_settop(a->vm.co, 0);
        lua_pushstring(a->vm.co, "attempt to yield from outside a coroutine");
        st = LUA_ERRRUN;
    }
    body_finish(a, st);
    luavm_close(a);
    sched_leave(a, LEAVE_DONE);
}

/* ---- preemption: the Lua half ---- */

static int cont_nothing(actor *a, lua_State *L) { return 0; }

/* The count hook armed by the signal handler: runs at the next interpreted bytecode. */
static void hook_yield(lua_State *L, lua_Debug *ar)
{
    actor *a = luavm_actor(L);
    lua_sethook(L, NULL, 0, 0);
    if (!a->run.preempt_pending || a->vm.closing)
        return;
    a->run.preempt_pending = 0;
    a->stats.preempt_hook++;
    if (L == a->vm.co && ljx_can_yield(L)) {
        /* a yield from a hook unwinds the hook dispatcher's C frames: the
         * actor then holds no stack and may resume on any thread */
        a->vm.cont = cont_nothing;
        a->run.yield_leave = LEAVE_YIELD_CO;
        lua_yield(L, 0);
        return;
    }
    /* LuaJIT's hook dispatcher keeps errno's address across the hook: resume on this thread */
    a->run.pinned = 1;
    sched_leave(a, LEAVE_YIELD);
}

int body_preempt(actor *a, uintptr_t pc, int may_switch)
{
    if (may_switch && ljx_pc_in_mcode(a->vm.L, pc))
        return 1;
    /* lua_sethook is async-signal-safe in LuaJIT (its own Ctrl-C handler uses it) */
    lua_sethook(a->vm.L, hook_yield, LUA_MASKCOUNT, 1);
    return 0;
}

LUA_UNWOUND_END
