/* The actor body: what runs on an actor's C stack, between the scheduler's switches. */
#include "vm/body.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/sanitize.h"
#include "core/actor.h"
#include "core/blocking.h"
#include "core/exit.h"
#include "core/host.h"
#include "core/runtime.h"
#include "core/scheduler.h"
#include "core/stackwatch.h"
#include "vm/codec.h"
#include "vm/collect.h"
#include "vm/dispatch_share.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* Lua errors unwind through every function of this file (see sanitize.h) */
LUA_UNWOUND_BEGIN

/* ---- smarm.exit: a marker error the body recognises ---- */

static const char exit_key = 'e', exit_mt_key = 'm';

static const char *describe_value(lua_State *L, int idx, char *buf, size_t n);

static int exit_tostring(lua_State *L)
{
    char text[256];
    lua_getfield(L, 1, "reason");
    lua_pushfstring(L, "exit: %s",
                    lua_isnil(L, -1) ? "normal" : describe_value(L, -1, text, sizeof text));
    return 1;
}

/* Pushes the metatable of the error objects smarm.exit raises (made once per state). */
static void push_exit_mt(lua_State *L)
{
    if (luavm_registry_get(L, &exit_mt_key))
        return;
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, exit_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "smarm exit");
    lua_setfield(L, -2, "__metatable");
    luavm_registry_keep(L, &exit_mt_key);
}

void body_prepare_state(lua_State *L)
{
    push_exit_mt(L);
    lua_pop(L, 1);
}

int body_raise_exit(lua_State *L, int idx)
{
    actor *a = luavm_actor(L);
    /* an earlier smarm.exit that a pcall caught is superseded */
    free(a->vm.exit_bytes);
    a->vm.exit_bytes = NULL;
    /* the reason is encoded here, once: it must be sendable (links and monitors carry it),
     * and is refused at the call as send refuses; nil and "normal" are a normal exit */
    int normal = lua_isnil(L, idx) ||
                 (lua_type(L, idx) == LUA_TSTRING && strcmp(lua_tostring(L, idx), "normal") == 0);
    if (!normal) {
        wire_buf b;
        wire_buf_init(&b);
        char err[200];
        if (codec_encode(L, idx, &b, "reason", err, sizeof err) != 0) {
            wire_buf_free(&b);
            return luaL_error(L, "smarm.exit: %s", err);
        }
        if (wire_has_refs(b.data, b.len)) {
            wire_release(b.data, b.len);
            wire_buf_free(&b);
            return luaL_error(L, "smarm.exit: a reason cannot carry channel endpoints");
        }
        a->vm.exit_bytes = b.data;
        a->vm.exit_len = b.len;
    }
    lua_pushlightuserdata(L, (void *)&exit_key);
    lua_pushvalue(L, idx);
    lua_rawset(L, LUA_REGISTRYINDEX);
    /* what a pcall catches: {reason = r} whose tostring shows the reason; raising it again
     * (error(e)) still ends the actor with that reason */
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "reason");
    push_exit_mt(L);
    lua_setmetatable(L, -2);
    return lua_error(L);
}

static int is_exit(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
        return 0;
    lua_pushlightuserdata(L, (void *)&exit_mt_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same;
}

/* Pushes the value given to smarm.exit (nil if none). */
static void push_exit_value(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&exit_key);
    lua_rawget(L, LUA_REGISTRYINDEX);
}

/* Appends a short text of the value at idx to buf[*len..n): a string as is (quoted inside a
 * table), numbers and booleans as Lua prints them, a table shallowly ({code = 7, why = "x",
 * ...}, nested tables as {...}). Reads raw: no metamethod runs. */
static void describe(lua_State *L, int idx, char *buf, size_t n, size_t *len, int nested)
{
#define PUT(...)                                                               \
    do {                                                                       \
        if (*len < n) {                                                        \
            int w_ = snprintf(buf + *len, n - *len, __VA_ARGS__);              \
            *len = w_ < 0 ? n : *len + (size_t)w_ > n ? n : *len + (size_t)w_; \
        }                                                                      \
    } while (0)
    idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        PUT("nil");
        break;
    case LUA_TBOOLEAN:
        PUT("%s", lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TNUMBER:
        PUT("%.14g", lua_tonumber(L, idx));
        break;
    case LUA_TSTRING:
        if (nested)
            PUT("\"%.60s\"", lua_tostring(L, idx));
        else
            PUT("%s", lua_tostring(L, idx));
        break;
    case LUA_TTABLE: {
        if (nested || !lua_checkstack(L, 4)) {
            PUT("{...}");
            break;
        }
        PUT("{");
        int shown = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            if (shown == 8) {
                PUT(", ...");
                lua_pop(L, 2);
                break;
            }
            PUT("%s", shown++ ? ", " : "");
            if (lua_type(L, -2) == LUA_TSTRING) {
                PUT("%s = ", lua_tostring(L, -2));
            } else {
                PUT("[");
                describe(L, -2, buf, n, len, 1);
                PUT("] = ");
            }
            describe(L, -1, buf, n, len, 1);
            lua_pop(L, 1);
        }
        PUT("}");
        break;
    }
    default:
        PUT("%s", luaL_typename(L, idx));
        break;
    }
#undef PUT
}

/* The value at idx as text, into buf. */
static const char *describe_value(lua_State *L, int idx, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    describe(L, idx, buf, n, &len, 0);
    return buf;
}

/* ---- ending ---- */

/* The reason smarm.exit was given: its bytes, encoded at the call, are handed over. */
static void exit_value_reason(actor *a)
{
    if (!a->vm.exit_bytes) {
        exit_set_reason(a, "normal", 0);
        return;
    }
    exit_set_reason_bytes(a, a->vm.exit_bytes, a->vm.exit_len, 1);
    a->vm.exit_bytes = NULL;
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
            exit_set_reason(a,
                            how == STOP_SHUTDOWN || how == STOP_SWEEP ? "shutdown"
                            : how == STOP_NO_STACK                    ? "no_stack"
                                                                      : "killed",
                            1);
        }
        /* the root never ends silently: a run that ends with status 1 says why */
        /* (no_stack was reported by the scheduler) */
        if (a->pid == rt->root_pid && how != STOP_SWEEP && how != STOP_NO_STACK)
            luavm_report(a, "stopped",
                         how == STOP_LINKED     ? "a linked actor exited abnormally"
                         : how == STOP_SHUTDOWN ? "shutdown"
                                                : "killed");
    } else {
        /* a continuation's error is on the coroutine too, but has no traceback of its own */
        lua_State *src = a->vm.co;
        if (is_exit(src, -1)) {
            exit_value_reason(a);
            if (a->ex.reason_abnormal && a->pid == rt->root_pid) {
                char text[256];
                push_exit_value(src);
                luavm_report(a, "exited", describe_value(src, -1, text, sizeof text));
                lua_pop(src, 1);
            }
        } else {
            /* formatted in a protected call: out of memory there would panic the process */
            int t = lua_type(src, -1);
            const char *kind = t == LUA_TNIL ? "nil" : lua_typename(src, t);
            /* a table or a boolean by value (a table shallowly; no allocation) */
            char text[256];
            const char *shown = t == LUA_TSTRING ? lua_tostring(src, -1)
                                : t == LUA_TTABLE || t == LUA_TBOOLEAN
                                    ? describe_value(src, -1, text, sizeof text)
                                    : NULL;
            struct crash c = {src, status == BODY_ERROR_IN_CONT ? NULL : a->vm.co, kind, shown,
                              NULL};
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
 * frames, on a fresh context. The stop cannot be caught because nothing of the
 * actor runs again. A state at rest, its body's coroutine suspended in a wait
 * (a coroutine park: no C frames of its own), goes as a returned actor's does
 * (luavm_release): back to the pool unless something in it must be finalized
 * or cannot be reset (a supervisor's killed children used to make a new state
 * for each restart). One stopped in the middle of its code (parked on its C
 * stack, or never started) is closed. */
void body_stop_entry(actor *a)
{
    if (a->run.overflowed) {
        /* its C stack overflowed in the middle of whatever its state was doing (the fault
         * handler reported it): the state is left as it is, never closed */
        exit_set_reason(a, "stack_overflow", 1);
        if (a->pid == a->rt->root_pid)
            a->rt->root_status = 1;
        luavm_abandon(a);
        sched_leave(a, LEAVE_DONE);
    }
    /* stopped before its first run: the channels its spawn arguments carry are let go */
    luavm_drop_boot(a);
    body_finish(a, BODY_KILLED);
    if (a->vm.co && lua_status(a->vm.co) == LUA_YIELD)
        luavm_release(a);
    else
        luavm_close(a);
    sched_leave(a, LEAVE_DONE);
}

/* Runs a parked actor's continuation in protected mode on the body's coroutine itself, which
 * is suspended in the wait's lua_yield: the results it pushes are the ones lua_resume takes
 * (the top nres values; anything below them is dropped by the return from the waiting C
 * function), so a wake touches neither the main state nor its stack, and moves nothing
 * between the two (decoding may raise out of memory). A C protected call: no closure,
 * registry slot or light userdata to look up per wake. */
struct cont_call {
    actor *a;
    int nres;
};

static void cont_protected(lua_State *co, void *ud)
{
    struct cont_call *cc = ud;
    actor *a = cc->a;
    int base = lua_gettop(co);
    cc->nres = a->vm.cont(a, co);
    if (cc->nres < 0)
        lua_settop(co, base);
}

/* body_wait for a host actor (embedding): a thread of the host is its body, and sleeps on its
 * parker, by the deadline, until the wait is satisfied. Out of line, as the rare case: inlined,
 * it made body_wait too large for its callers (recv, sleep) to take whole. */
static __attribute__((noinline)) int wait_host(lua_State *L, actor *a, actor_cont cont, host *h)
{
    for (;;) {
        uint32_t seq = host_seq(h);
        int n = cont(a, L);
        if (n >= 0) {
            luavm_safe_point(a, L);
            return n;
        }
        if (atomic_load_explicit(&a->run.stop, memory_order_acquire))
            return luaL_error(L, "smarm: the host actor was stopped (the runtime is stopping, "
                                 "or it was killed or linked to an actor that died)");
        host_park(h, seq, a->run.deadline);
    }
}

int body_wait(lua_State *L, actor *a, actor_cont cont)
{
    if (a->vm.closing)
        return luaL_error(L, "smarm: cannot wait while the actor is ending");
    /* a pool thread runs one actor's call and has nothing else to switch to: recv, sleep,
     * select and rx:recv belong outside the blocking function */
    if (a->run.blocking)
        return luaL_error(L, "smarm: cannot wait inside smarm.blocking");
    uint64_t parks = ++a->stats.parks;
    if (__builtin_expect((parks & (DSHARE_CHECK_EVERY - 1)) == 0, 0)) {
        /* at the same pace: each recording a waiting loop would try again writes the table
         * the check shares, twice */
        ljx_jit_defer_wait_loop(L);
        dshare_check(a);
    }
    stackwatch_sample(a, __builtin_frame_address(0));
    ljx_caller_where(L, &a->stats.where_chunk, a->stats.where, sizeof a->stats.where,
                     &a->stats.where_line, &a->stats.where_pc, a->warm.site);
    host *h = atomic_load_explicit(&a->run.host, memory_order_relaxed);
    if (__builtin_expect(h != NULL, 0))
        return wait_host(L, a, cont, h);
    int yield = L == a->vm.co && ljx_can_yield(L);
    /* in place: always when it cannot yield (a stack park), while the scheduler grants it when
     * it could (a hot park, core/scheduler.c, which also takes the collector's turn a coroutine
     * park's wake takes); else it yields its coroutine */
    while (!yield || a->run.hot_ok) {
        sched_leave(a, yield ? LEAVE_PARK_HOT : LEAVE_PARK_STACK);
        /* a stopped actor is switched back in here only from a hot park (the scheduler's
         * run_actor drops a stack park's frames): it yields its coroutine, as a coroutine
         * park would have, and its stop ends it from there */
        if (yield) {
            if (__builtin_expect(atomic_load_explicit(&a->run.stop, memory_order_acquire), 0))
                break;
            collect_between_waits(a);
        }
        int n = cont(a, L);
        if (n >= 0) {
            luavm_safe_point(a, L);
            return n;
        }
        sched_rearm_wake(a);
    }
    a->vm.cont = cont;
    a->run.yield_leave = LEAVE_PARK_CO;
    return lua_yield(L, 0);
}

/* When the root's body returns, the registry's "smarm.at_return" function (the supervisors
 * it started put it there) runs first, as the body's continuation on a coroutine of its
 * own: it may wait (stopping a supervision tree in order takes the children's graces)
 * before the root ends and the root-exit sweep takes whatever is left. 1 if it is set up
 * to run (a->vm.co is its coroutine now). */
static int at_return_setup(lua_State *L)
{
    actor *a = lua_touserdata(L, 1);
    lua_getfield(L, LUA_REGISTRYINDEX, "smarm.at_return");
    if (lua_type(L, -1) != LUA_TFUNCTION)
        return 0;
    lua_State *co = lua_newthread(L);
    /* anchored for the actor's life, as the body's coroutine is */
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "smarm.at_return_co");
    lua_pop(L, 1);
    lua_xmove(L, co, 1);
    a->vm.co = co;
    return 0;
}

static int at_return(actor *a)
{
    lua_State *L = a->vm.L;
    if (a->pid != a->rt->root_pid || !L)
        return 0;
    lua_State *before = a->vm.co;
    int top = lua_gettop(L);
    /* protected: out of memory here ends the root as a normal return would */
    lua_cpcall(L, at_return_setup, a);
    lua_settop(L, top);
    /* once: the function is gone from the registry before it runs */
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "smarm.at_return");
    return a->vm.co != before;
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
        a->vm.body_at = park_now_ns();
    } else {
        /* a cycle its collector would start soon runs now, before the continuation takes
         * anything (vm/collect.h) */
        collect_between_waits(a);
        struct cont_call cc = {a, 0};
        /* no __gc finalizer runs in the continuation: an error one raised there would end
         * the actor (no pcall of its own is around) and lose what the wait took */
        size_t held = ljx_gc_hold(a->vm.co);
        a->vm.in_cont = 1;
        int st = ljx_cpcall(a->vm.co, cont_protected, &cc);
        a->vm.in_cont = 0;
        ljx_gc_resume(a->vm.co, held);
        if (st != 0) {
            body_finish(a, BODY_ERROR_IN_CONT);
            luavm_close(a);
            sched_leave(a, LEAVE_DONE);
        }
        if (cc.nres < 0) {
            sched_rearm_wake(a);
            sched_leave(a, LEAVE_PARK_CO);
        }
        nargs = cc.nres;
        /* a wait returns (not a preemption): a safe point, taken on the main state while the
         * coroutine holds the wait's results */
        if (a->run.yield_leave == LEAVE_PARK_CO)
            luavm_safe_point(a, a->vm.L);
    }
    a->vm.cont = NULL;
    int st;
    for (;;) {
        st = lua_resume(a->vm.co, nargs);
        if (st == LUA_YIELD) {
            if (a->vm.cont)
                sched_leave(a, a->run.yield_leave);
            /* a bare coroutine.yield() at the body's top level */
            lua_settop(a->vm.co, 0);
            lua_pushstring(a->vm.co, "attempt to yield from outside a coroutine");
            st = LUA_ERRRUN;
        }
        if (st != 0 || !at_return(a))
            break;
        nargs = 0;
    }
    body_finish(a, st);
    luavm_release(a);
    sched_leave(a, LEAVE_DONE);
}

/* ---- preemption: the Lua half ---- */

static int cont_nothing(actor *a, lua_State *L) { return 0; }

/* An actor that ran a whole timeslice computes: its state leaves the runtime's JIT
 * parameters (loops compile after 2000 iterations, in small machine-code areas: vm/luavm.c)
 * for LuaJIT's own, and flushes the traces compiled so far, so its loops are recompiled
 * into the traces plain LuaJIT would make (nbody compiled late ran 10% more instructions
 * per step). In the interpreter, never inside a trace; once per actor. */
static void retune(actor *a, lua_State *L)
{
    if (!atomic_load_explicit(&a->vm.retune_due, memory_order_relaxed) || a->vm.jit_retuned)
        return;
    if (ljx_jit_retune(L) != 0)
        return; /* inside a finalizer: the next whole slice asks again */
    a->vm.jit_retuned = 1;
    atomic_store_explicit(&a->vm.retune_due, 0, memory_order_relaxed);
}

/* The count hook body_retune armed. */
static void hook_retune(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    actor *a = luavm_actor(L);
    if (!a->vm.closing)
        retune(a, L);
}

void body_retune(actor *a)
{
    /* a hook already armed (a preemption's) does the retune itself */
    if (!a->vm.jit_retuned && !lua_gethook(a->vm.L))
        lua_sethook(a->vm.L, hook_retune, LUA_MASKCOUNT, 1);
}

/* The count hook armed by the signal handler: runs at the next interpreted bytecode. */
static void hook_yield(lua_State *L, lua_Debug *ar)
{
    actor *a = luavm_actor(L);
    lua_sethook(L, NULL, 0, 0);
    if (!a->vm.closing)
        retune(a, L);
    if (!a->run.preempt_pending || a->vm.closing)
        return;
    a->run.preempt_pending = 0;
    a->stats.preempt_hook++;
    luavm_where(L, a->stats.where, sizeof a->stats.where, &a->stats.where_line,
                &a->stats.where_chunk);
    a->stats.where_pc = NULL;
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

/* ---- smarm.blocking: the actor moves to a pool thread for a call (core/blocking.c) ---- */

int body_blocking_enter(actor *a)
{
    /* nested: already on a pool thread. Ending: finalizers run where they are. Under a
     * LuaJIT hook dispatcher, which keeps errno's address across the hook (see hook_yield),
     * the actor must stay on this OS thread */
    if (a->run.blocking || a->vm.closing || ljx_in_hook(a->vm.L) || blocking_enter(a) != 0)
        return 0;
    /* on the pool thread. A preemption signal that came before the move may have set the
     * flag and armed the count hook: nothing preempts here (no signal reaches this thread) */
    a->run.preempt_pending = 0;
    if (lua_gethook(a->vm.L) == hook_yield)
        lua_sethook(a->vm.L, NULL, 0, 0);
    /* a stop that came before the move: the call is not made (this never returns) */
    if (atomic_load_explicit(&a->run.stop, memory_order_acquire))
        blocking_leave(a);
    return 1;
}

void body_blocking_leave(actor *a) { blocking_leave(a); }

/* A C function called from Lua (a system call, an FFI call or a LuaJIT helper from a trace,
 * a Lua C API function from the interpreter or a stitched trace) mostly runs where neither
 * the handler may switch nor a hook fires: a stitched trace goes from its exit into the C
 * function's header and from its return straight into the next trace, never through the
 * hooked bytecode dispatch. So the handler replaces that call's return address with
 * body_cret_tramp (cret_x86_64.S), and the actor switches out as the C function returns,
 * back in Lua code again. One replaced address at a time: a C call nested under another
 * (through an FFI callback) leaves the outer one armed. */
void body_cret_tramp(void);
void body_cret_switch(uintptr_t *slot);

static void arm_c_return(actor *a, uintptr_t pc, uintptr_t sp)
{
    if (!a->run.stk)
        return;
    uintptr_t lo = sp, hi = (uintptr_t)stack_top(a->run.stk);
    uintptr_t *old = a->vm.cret_slot;
    /* one still to be returned through stays: its slot is in the live part of this stack
     * and still holds the trampoline (an error that unwound past it left it below the stack
     * pointer, or new frames overwrote it); the others are forgotten */
    if (old && (uintptr_t)old >= lo && (uintptr_t)old < hi && *old == (uintptr_t)body_cret_tramp)
        return;
    uintptr_t *slot = ljx_c_return_slot(a->vm.L, pc, lo, hi);
    if (!slot)
        return;
    /* in this order: a nested signal or the trampoline sees a consistent pair */
    a->vm.cret_orig = *slot;
    atomic_signal_fence(memory_order_seq_cst);
    a->vm.cret_slot = slot;
    atomic_signal_fence(memory_order_seq_cst);
    *(volatile uintptr_t *)slot = (uintptr_t)body_cret_tramp;
}

/* errno's address is per thread and __errno_location is a const function: after a switch
 * that may have moved the actor to another thread, it must be looked up again */
__attribute__((noinline)) static void errno_set(int e)
{
    __asm__ volatile("" ::: "memory");
    errno = e;
}

/* Called by body_cret_tramp, as the C function returned: puts the return address back
 * and switches out unless something else has since (a safe point, a wait). Holds the
 * stack like the compiled-code tier, and may resume on any thread: nothing between the
 * Lua code and here caches a thread-local address (but LuaJIT's hook dispatchers, when
 * the Lua code runs under one: then it stays on this thread); errno is carried over. */
void body_cret_switch(uintptr_t *slot)
{
    sched *s = sched_current();
    actor *a = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    if (!a || a->vm.cret_slot != slot) {
        fprintf(stderr,
                "smarm: internal error: a preempted C call returned through an unknown slot\n");
        abort();
    }
    uintptr_t orig = a->vm.cret_orig;
    /* in this order: a signal in between finds no slot (it reads the trampoline's address
     * there), or the restored one, which it may replace again */
    a->vm.cret_slot = NULL;
    atomic_signal_fence(memory_order_seq_cst);
    *(volatile uintptr_t *)slot = orig;
    atomic_signal_fence(memory_order_seq_cst);
    if (!a->run.preempt_pending || a->vm.closing)
        return;
    /* a coroutine park returns lua_yield's -1 from its C function: it leaves anyway */
    if (a->vm.co && lua_status(a->vm.co) == LUA_YIELD)
        return;
    int saved_errno = errno;
    a->run.preempt_pending = 0;
    a->stats.preempt_cret++;
    if (ljx_in_hook(a->vm.L))
        a->run.pinned = 1;
    sched_leave(a, LEAVE_YIELD);
    errno_set(saved_errno);
}

int body_preempt(actor *a, uintptr_t pc, uintptr_t sp, int may_switch)
{
    stackwatch_sample(a, (const void *)sp);
    if (may_switch && ljx_pc_in_mcode(a->vm.L, pc)) {
        /* compiled code called from a hook: the hook dispatcher below keeps errno's address */
        if (ljx_in_hook(a->vm.L))
            a->run.pinned = 1;
        else if (atomic_load_explicit(&a->vm.retune_due, memory_order_relaxed))
            body_retune(a); /* runs once it is back in the interpreter */
        return 1;
    }
    /* an untrusted context (TSan runs the handler late, at an interceptor, so in C code):
     * the handler's own frame bounds the live stack */
    if (!may_switch)
        sp = (uintptr_t)__builtin_frame_address(0);
    arm_c_return(a, pc, sp);
    /* lua_sethook is async-signal-safe in LuaJIT (its own Ctrl-C handler uses it) */
    lua_sethook(a->vm.L, hook_yield, LUA_MASKCOUNT, 1);
    return 0;
}

LUA_UNWOUND_END
