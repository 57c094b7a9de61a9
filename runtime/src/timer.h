/* Timers: deadlines of sleeps and receive timeouts, in a min-heap under one lock. */
#ifndef SMARM_TIMER_H
#define SMARM_TIMER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct timer_entry {
    uint64_t deadline; /* CLOCK_MONOTONIC ns */
    uint64_t pid;      /* actor to wake */
} timer_entry;

typedef struct timers {
    _Atomic uint32_t lock;
    timer_entry *heap;
    uint32_t len, cap;
    /* earliest armed deadline (UINT64_MAX when none): one relaxed load tells a
     * busy scheduler whether a clock read is worth it */
    _Atomic uint64_t earliest;
} timers;

void timers_init(timers *t);
void timers_destroy(timers *t);
/* Arms a wake of pid at deadline; returns 1 if it became the earliest deadline. -1 on OOM. */
int timers_arm(timers *t, uint64_t deadline, uint64_t pid);
/* Pops every entry due at now into out (up to max); returns how many. */
uint32_t timers_due(timers *t, uint64_t now, timer_entry *out, uint32_t max);
static inline uint64_t timers_earliest(timers *t)
{
    return atomic_load_explicit(&t->earliest, memory_order_relaxed);
}

#endif
