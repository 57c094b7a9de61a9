/* Run queue: a bounded lock-free MPMC ring of slot indices. */
#ifndef SMARM_RUNQ_H
#define SMARM_RUNQ_H

#include <stdbool.h>
#include <stdint.h>

typedef struct runq runq;

/* capacity is rounded up to a power of two; the memory is reserved and
 * touched lazily. Push never fails while fewer than capacity entries are queued:
 * the scheduler queues a slot at most once, and capacity >= max actors (a push into a
 * truly full ring aborts: that is a double enqueue). NULL if capacity > 2^31 or no memory. */
runq *runq_new(uint32_t capacity);
void runq_free(runq *q);
void runq_push(runq *q, uint32_t v);
bool runq_pop(runq *q, uint32_t *v);
uint32_t runq_size_approx(runq *q);
uint32_t runq_capacity(const runq *q); /* the rounded capacity */

#endif
