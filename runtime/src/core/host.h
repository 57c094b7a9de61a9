/* Host actors (embedding): a thread of the host program holds an actor slot and is its body.
 * The slot is never queued and its word stays RUNNING, so a wake of it (a message, a monitor
 * notice, a timer, a stop) finds it RUNNING and lands here: the host's futex word is bumped
 * and woken, and its eventfd is made readable while its inbox holds messages. */
#ifndef SMARM_CORE_HOST_H
#define SMARM_CORE_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/heap.h"
#include "base/wire.h"

struct actor;

typedef struct host {
    pthread_mutex_t lock;      /* orders the eventfd's writes and drains, and its close */
    _Atomic uint32_t seq;      /* futex word: bumped by every wake */
    _Atomic int sleeping;      /* the host thread is in (or entering) its futex wait */
    int efd;                   /* eventfd: readable while the inbox is non-empty */
    _Atomic int efd_armed;     /* efd was written and not drained (changed under lock) */
    int closed;                /* under lock: the eventfd is closed */
    _Atomic(struct actor *) a; /* the slot's actor (set once the slot is claimed) */
    wire_buf enc;              /* scratch for encoding its sends (it has no scheduler) */
    heap_cache cache;          /* its state's free blocks (it allocates on its thread only) */
} host;

/* A new host parker (its eventfd made), or NULL (errno). */
host *host_new(void);
/* Closes the eventfd; wakes from now on do nothing. The memory stays (see host_free). */
void host_close(host *h);
/* Frees a closed host (the runtime does it at its end: a stale waker may still hold it). */
void host_free(host *h);
/* The wake path (sched_wake found the slot RUNNING and it is a host's). */
void host_wake(host *h);
/* The current wake count: read before checking the condition, passed to host_park. */
static inline uint32_t host_seq(host *h) { return atomic_load(&h->seq); }
/* Sleeps until a wake after seq was read, or deadline (CLOCK_MONOTONIC ns, 0 = none). */
void host_park(host *h, uint32_t seq, uint64_t deadline);
/* After the host took a message: drains the eventfd when the inbox is empty now. */
void host_after_take(host *h);

struct smarm_runtime;
/* The runtime of the host handle this thread opened last and has not closed (NULL if none):
 * what the FFI's introspection, which has no Lua state to ask, looks at on a host thread. */
struct smarm_runtime *host_thread_runtime(void);
/* Set when this thread opens a handle of rt; on close, cleared if it is rt. */
void host_thread_enter(struct smarm_runtime *rt);
void host_thread_leave(struct smarm_runtime *rt);

#endif
