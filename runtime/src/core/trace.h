/* smarm-lua --trace FILE: scheduling events in a ring per scheduler, written out as Chrome
 * trace-event JSON (Perfetto and chrome://tracing open it) at the end of the run and on
 * SIGUSR1.
 *
 * Off, each recording site costs one predictable branch on rt->trace. On, an event is a
 * clock read and five stores into the ring of the scheduler it happens on, which only that
 * scheduler's thread writes: no lock, no atomic read-modify-write. A ring keeps the last
 * TRACE_RING events of its scheduler, so memory stays bounded however long the run. */
#ifndef SMARM_TRACE_H
#define SMARM_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/park.h"
#include "core/runtime.h"
#include "core/scheduler.h"

#define TRACE_RING (1u << 16) /* events kept per scheduler (40 bytes each) */

enum trace_kind {
    TRACE_BEGIN = 1, /* an actor is switched in: pid */
    TRACE_END,       /* it left: pid, aux = enum actor_leave */
    TRACE_SPAWN,     /* pid = the new actor, arg = its parent */
    TRACE_EXIT,      /* pid, aux = enum exit_class */
    TRACE_SEND,      /* pid = sender, arg = the message (the flow's id), arg2 = receiver */
    TRACE_TAKE,      /* pid = receiver, arg = the message */
    TRACE_WAKE,      /* pid = the actor made runnable, arg = the waker (0 = none) */
};

typedef struct trace_ev {
    uint64_t ts; /* CLOCK_MONOTONIC ns */
    uint64_t pid, arg, arg2;
    uint32_t kind, aux;
} trace_ev;

typedef struct trace_ring {
    trace_ev *ev;
    _Atomic uint64_t n; /* events written so far; the last TRACE_RING are in ev */
} trace_ring;

#define TRACE_ON(rt) __builtin_expect((rt)->trace != NULL, 0)

/* Starts tracing into path for a run whose scheds are allocated (sched_start); on failure
 * says why on stderr and leaves rt->trace NULL. */
void trace_start(smarm_runtime *rt, const char *path);
/* Writes the file from what the rings hold now (SIGUSR1: racy reads, like ps). */
void trace_flush(smarm_runtime *rt);
/* Writes the file a last time and frees the rings (after the schedulers have left). */
void trace_stop(smarm_runtime *rt);
/* An actor with a name ends: its name is kept for the slices the file shows of it. */
void trace_keep_name(smarm_runtime *rt, uint64_t pid, const char *name);

static inline void trace_rec(sched *s, uint32_t kind, uint64_t pid, uint64_t arg, uint64_t arg2,
                             uint32_t aux)
{
    trace_ring *r = s ? s->trace : NULL;
    if (!r)
        return;
    uint64_t n = atomic_load_explicit(&r->n, memory_order_relaxed);
    trace_ev *e = &r->ev[n & (TRACE_RING - 1)];
    e->ts = park_now_ns();
    e->pid = pid;
    e->arg = arg;
    e->arg2 = arg2;
    e->kind = kind;
    e->aux = aux;
    atomic_store_explicit(&r->n, n + 1, memory_order_release);
}

#endif
