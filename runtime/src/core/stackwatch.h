/* Watching an actor's C stack: how deep it went (sampled), and giving back the pages a
 * spike left dirty once the actor has parked a while without going that deep again.
 *
 * The depth is sampled where it costs a compare: at every wait that parks, at every switch
 * out holding the stack, at safe points and in the preemption signal handler. A deep C
 * recursion that returns between two samples is not seen: the high-water mark is a lower
 * bound. */
#ifndef SMARM_STACKWATCH_H
#define SMARM_STACKWATCH_H

#include "core/actor.h"

/* Parks without a new deepest point before the pages below are released. */
#define STACKWATCH_COOLDOWN 8
/* Only spikes this far below what stays in use are worth a system call. */
#define STACKWATCH_MIN_SPIKE (32 * 1024)
/* Kept above the live frames of a parked actor (a signal frame takes about 1.6 KB) and
 * warm in an idle stack for its next holder. */
#define STACKWATCH_KEEP (8 * 1024)

/* sp: a stack address the actor is using now. Plain stores: only the actor's own thread
 * (or a signal handler on it) writes these. */
static inline void stackwatch_sample(actor *a, const void *sp)
{
    stack *s = a->run.stk;
    if (!s || !stack_contains(s, sp))
        return;
    size_t d = (size_t)((const char *)stack_top(s) - (const char *)sp);
    if (d > a->stats.stack_recent) {
        a->stats.stack_recent = d;
        a->stats.parks_since_shrink = 0;
        if (d > a->stats.stack_hw)
            a->stats.stack_hw = d;
    }
}

/* The actor parked and is off its stack; live: the bytes of it still in use below the top
 * (0 for a stack it gives back). Releases the pages of an old spike. */
static inline void stackwatch_parked(actor *a, size_t live)
{
    stack *s = a->run.stk;
    if (!s || ++a->stats.parks_since_shrink < STACKWATCH_COOLDOWN)
        return;
    size_t keep = live + STACKWATCH_KEEP;
    if (a->stats.stack_recent < keep + STACKWATCH_MIN_SPIKE)
        return;
    size_t n = stack_release(s, a->stats.stack_recent, keep);
    a->stats.stack_recent = live;
    a->stats.parks_since_shrink = 0;
    if (n) {
        a->stats.stack_shrinks++;
        a->stats.stack_released += n;
    }
}

#endif
