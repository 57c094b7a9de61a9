/* Timers: deadlines of sleeps and receive timeouts (wakes) and send_after deliveries, in a
 * min-heap and a run of entries armed in deadline order, under one lock; send timers are
 * cancellable by id, exactly once. */
#ifndef SMARM_TIMER_H
#define SMARM_TIMER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct timer_entry {
    uint64_t deadline; /* CLOCK_MONOTONIC ns */
    uint64_t pid;      /* actor to wake, or the destination of a send */
    uint64_t id;       /* 0: a wake; else a send timer's id */
    void *msg;         /* timers_due only: the message (struct msg) of a send that fired */
} timer_entry;

typedef struct timers {
    _Alignas(64) _Atomic uint32_t lock;
    timer_entry *heap;
    uint32_t len, cap;
    /* entries armed at or after the last one here, oldest first (a ring of rcap, a power of
     * two): actors that all wait the same time arm in deadline order, and the run takes
     * and gives each in O(1) where the heap took a sift through its depth */
    timer_entry *run;
    uint32_t rhead, rlen, rcap;
    /* armed send timers: id -> message, open addressing (key 0 = empty); an id leaves
     * it exactly once, by firing or by cancelling, under the lock */
    uint64_t *keys;
    void **vals;
    uint64_t *dls; /* the deadline of each armed send */
    uint32_t mcap, mlen;
    uint32_t cancelled; /* heap entries of sends cancelled before their deadline */
    uint64_t next_id;
    /* earliest armed deadline (UINT64_MAX when none): one relaxed load tells a
     * busy scheduler whether a clock read is worth it. On a line of its own: every
     * scheduler reads it before each run, and the fields above change at every arm */
    _Alignas(64) _Atomic uint64_t earliest;
} timers;
_Static_assert(offsetof(timers, earliest) / 64 != offsetof(timers, next_id) / 64,
               "the earliest deadline shares no line with what an arm writes");

void timers_init(timers *t);
/* Frees the heap and the messages of send timers that never fired. */
void timers_destroy(timers *t);
/* Arms a wake of pid at deadline; returns 1 if it became the earliest deadline. -1 on OOM. */
int timers_arm(timers *t, uint64_t deadline, uint64_t pid);
/* Send timer ids are in 1..TIMER_ID_LIMIT and wrap, skipping ids still armed (so a caller
 * may fold them into a wider handle that stays an exact Lua number). */
#define TIMER_ID_LIMIT (((uint64_t)1 << 33) - 1)

/* Arms the delivery of msg (taken over) to dest at deadline; *id gets the timer's id (never
 * 0). Returns 1 if it became the earliest deadline, 0, or -1 on OOM (msg untouched). */
int timers_arm_send(timers *t, uint64_t deadline, uint64_t dest, void *msg, uint64_t *id);
/* Disarms send timer id: its message (for the caller to free) if it had not fired, else NULL. */
void *timers_cancel(timers *t, uint64_t id);
/* The deadline of send timer id while it is armed (neither fired nor cancelled), else 0. */
uint64_t timers_deadline(timers *t, uint64_t id);
/* Pops every entry due at now into out (up to max); returns how many. Cancelled sends are
 * skipped; a fired send's entry carries its message. */
uint32_t timers_due(timers *t, uint64_t now, timer_entry *out, uint32_t max);
/* Entries armed (wakes, armed sends, cancelled sends not yet dropped). */
uint32_t timers_pending(timers *t);
static inline uint64_t timers_earliest(timers *t)
{
    return atomic_load_explicit(&t->earliest, memory_order_relaxed);
}

#endif
