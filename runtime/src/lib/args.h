/* What the Lua faces share: argument checks that raise an error naming the function, the
 * tail of every blocking wait, and encoding a Lua value into a message. */
#ifndef SMARM_LIB_ARGS_H
#define SMARM_LIB_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "base/mailbox.h"
#include "base/wire.h"
#include "core/actor.h"
#include "core/host.h"
#include "core/scheduler.h"

/* The pid at idx, or a Lua error naming fname: a number this runtime could have handed out
 * (an integer with a nonzero generation and a slot index inside the slab). */
uint64_t lib_check_pid(lua_State *L, int idx, const char *fname);
/* The same when the caller has the runtime at hand. */
struct smarm_runtime;
uint64_t lib_check_pid_in(lua_State *L, int idx, const char *fname, const struct smarm_runtime *rt);
/* The pid a number read from the stack is, if it is one of a runtime with max slots
 * (what lib_check_pid_in accepts); else 0, and the caller takes lib_check_pid_in for the
 * error. */
static inline int lib_pid_whole(double d)
{
    /* in [1, 2^53) the conversion is exact for whole numbers (no floor call); signed, which
     * x86-64 converts in one instruction each way (unsigned takes a dozen) */
    return d >= 1 && d < 9007199254740992.0 && d == (double)(int64_t)d;
}
static inline uint64_t lib_pid_of(double d, uint32_t max)
{
    if (!lib_pid_whole(d))
        return 0;
    uint64_t pid = (uint64_t)(int64_t)d;
    return pid_index(pid) < max && pid_gen(pid) != 0 ? pid : 0;
}
/* The deadline (CLOCK_MONOTONIC ns) of a timeout argument at idx (> 0): 0 = forever (nil or more
 * than 1e9 s); *poll is set for a zero timeout. Raises on a bad or negative timeout. An absent
 * argument is told by the stack's top, inline (every plain recv()); lua_type would read the
 * state's nil node for it, a line of its own that is cold in a woken actor. */
uint64_t lib_check_timeout_given(lua_State *L, int idx, const char *fname, int *poll);
static inline uint64_t lib_check_timeout(lua_State *L, int idx, const char *fname, int *poll)
{
    *poll = 0;
    if (idx > lua_gettop(L))
        return 0;
    return lib_check_timeout_given(L, idx, fname, poll);
}
/* A required seconds argument at idx (sleep, send_after), by the timeout rule: its
 * deadline; 0 seconds is now, more than 1e9 s is as good as never. */
uint64_t lib_check_seconds(lua_State *L, int idx, const char *fname);
/* A name (registry, pg) at idx: a non-empty string without zero bytes, or a Lua error. */
const char *lib_check_name(lua_State *L, int idx, const char *fname);

/* The tail of every blocking receive: nil, "timeout" for a poll, else arm the deadline
 * (0 = none) and wait with cont (see body_wait). */
int lib_wait(lua_State *L, actor *a, uint64_t deadline, int poll, actor_cont cont);
/* In a wait's continuation, after it looked for what it waits for (that comes first: a
 * deadline that raced a send loses to the message): pushes nil, "timeout" and returns 1
 * if the wait's deadline has passed, else 0. */
int lib_timed_out(actor *a, lua_State *L);
/* Pushes require(module): the state's own require, as Lua code calling it would. */
void lib_require(lua_State *L, const char *module);
/* Pushes require(module)[field]. */
void lib_require_field(lua_State *L, const char *module, const char *field);
/* Calls module.fn (require'd) with the arguments on L's stack; returns its results. For
 * a C function that hands a case over to the Lua half of the library. */
int lib_forward(lua_State *L, const char *module, const char *fn);
/* Finishes the metatable of an object kind: with the __index table on top of L and the
 * metatable below it, sets __index, __gc, __tostring and __metatable (name), and keeps the
 * metatable in the registry under the light userdata key. Leaves the metatable on top. */
void lib_object_mt(lua_State *L, lua_CFunction gc, lua_CFunction tostring, const char *name,
                   const void *key);

/* Encodes the value at idx (rooted "msg" in errors) into scratch and makes a message of it,
 * with extralen bytes of extra after it (a send_after's name; NULL, 0 for none). Raises an
 * error naming fname for an unsendable value or when out of memory; the channel references
 * the encoding took are released on every failure, so a raise leaks nothing. */
msg *lib_encode_msg(lua_State *L, int idx, wire_buf *scratch, const char *fname, const char *extra,
                    size_t extralen);
/* The scratch buffer of the calling thread: its scheduler's, or a host thread's own. */
static inline wire_buf *lib_scratch(actor *a)
{
    sched *s = sched_current();
    return s ? &s->enc : &atomic_load_explicit(&a->run.host, memory_order_relaxed)->enc;
}
/* The same into the scratch buffer of s, the calling thread's scheduler (sched_current(),
 * looked up once by the send), or a host thread's (s NULL). */
struct actor *luavm_actor(lua_State *L);
static inline msg *lib_encode(lua_State *L, int idx, const char *fname, sched *s)
{
    wire_buf *scratch = __builtin_expect(s != NULL, 1) ? &s->enc : lib_scratch(luavm_actor(L));
    return lib_encode_msg(L, idx, scratch, fname, NULL, 0);
}
/* After a host actor took a message from its inbox: its fd follows (core/host.h). */
static inline void lib_took(actor *a)
{
    host *h = atomic_load_explicit(&a->run.host, memory_order_relaxed);
    if (__builtin_expect(h != NULL, 0))
        host_after_take(h);
}
/* Before a message goes out: an actor past its max_heap (stopped at the allocation that
 * crossed it, and maybe still running because a pcall caught the error that followed) ends
 * here, so nothing is sent after the overflow: as on BEAM, where a process over its
 * max_heap_size is killed where it stands. (Other stops, a kill or the runtime's end, take
 * effect at the next safe point as before: signals are asynchronous.) A stopped actor's
 * switch does not return. */
static inline void lib_stop_point(actor *a)
{
    if (__builtin_expect(a->vm.heap_exceeded, 0) &&
        atomic_load_explicit(&a->run.stop, memory_order_acquire) && !a->run.blocking &&
        !atomic_load_explicit(&a->run.host, memory_order_relaxed))
        sched_yield_actor(a);
}
/* A message went out: the sender's count and its scheduler's s (metrics; NULL on a host). */
static inline void lib_count_send(actor *a, sched *s)
{
    a->stats.msgs_out++;
    if (s)
        s->msgs_sent++;
}

#endif
