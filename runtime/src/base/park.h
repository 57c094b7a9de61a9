/* Scheduler parking: a futex permit per scheduler, an idle mask, wake-one. */
#ifndef SMARM_PARK_H
#define SMARM_PARK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/netpoll.h"

#define PARK_MAX 64

/* A permit like std::thread::park: unpark before park makes the park return at once. */
typedef struct parker {
    _Atomic uint32_t state;
} parker;

void parker_init(parker *p);
/* Sleeps until unparked or until deadline_ns (CLOCK_MONOTONIC; 0 = none) passes;
 * consumes the permit. May return spuriously. */
void parker_park(parker *p, uint64_t deadline_ns);
void parker_unpark(parker *p);

typedef struct park_set {
    _Atomic uint64_t idle; /* bit i: scheduler i is parked or about to */
    int n;
    netpoll *np; /* NULL, or the set one idle scheduler sleeps in instead of its futex */
    parker parkers[PARK_MAX];
} park_set;

/* np may be NULL (no network polling). */
void park_set_init(park_set *ps, int n, netpoll *np);
/* Idle protocol for scheduler i: park_set_idle_begin, re-check for work,
 * then park_set_wait (or park_set_idle_cancel if work turned up). */
void park_set_idle_begin(park_set *ps, int i);
void park_set_idle_cancel(park_set *ps, int i);
void park_set_wait(park_set *ps, int i, uint64_t deadline_ns);
/* park_set_wait, but if the poller's set exists and no other scheduler sleeps in it, i
 * sleeps in it instead (netpoll_wait): a wake (park_set_wake*) interrupts it as it would
 * unpark it. Returns how many pids of ready fds it put in pids (up to max). */
int park_set_wait_poll(park_set *ps, int i, uint64_t deadline_ns, uint64_t *pids, int max);
/* Wakes exactly one idle scheduler if any (clears its bit first, so two calls
 * never wake the same one). Cheap when nobody is idle. Returns whether it woke one. */
bool park_set_wake_one(park_set *ps);
bool park_set_wake(park_set *ps, int i); /* wakes scheduler i if idle */
void park_set_wake_all(park_set *ps);
uint64_t park_now_ns(void); /* CLOCK_MONOTONIC in ns */

#endif
