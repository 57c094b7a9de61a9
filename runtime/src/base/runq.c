/* Vyukov's bounded MPMC ring of uint32 with a sequence number per cell; cells are stored
 * relative to their index so the zero-filled mapping is already initialised. */
#include "base/runq.h"

#include "base/spin.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* seq is stored as (sequence - cell index): zero-filled memory means sequence == index,
 * the empty ring, so a million-cell ring costs nothing until cells are used. */
typedef struct runq_cell {
    _Atomic uint32_t seq;
    uint32_t val;
} runq_cell;

struct runq {
    alignas(64) _Atomic uint32_t head; /* next push position */
    alignas(64) _Atomic uint32_t tail; /* next pop position */
    alignas(64) uint32_t mask;
    runq_cell *cells;
};

/* Positions are free-running uint32: every comparison is a signed 32-bit difference,
 * exact while capacity <= 2^31. */
static inline int32_t runq_diff(uint32_t a, uint32_t b) { return (int32_t)(a - b); }

runq *runq_new(uint32_t capacity)
{
    if (capacity > (1u << 31))
        return NULL;
    uint32_t cap = 1;
    while (cap < capacity)
        cap <<= 1;
    runq *q = aligned_alloc(64, sizeof *q);
    if (!q)
        return NULL;
    void *m = mmap(NULL, (size_t)cap * sizeof(runq_cell), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        free(q);
        return NULL;
    }
    atomic_init(&q->head, 0);
    atomic_init(&q->tail, 0);
    q->mask = cap - 1;
    q->cells = m;
    return q;
}

void runq_free(runq *q)
{
    if (!q)
        return;
    munmap(q->cells, ((size_t)q->mask + 1) * sizeof(runq_cell));
    free(q);
}

uint32_t runq_capacity(const runq *q) { return q->mask + 1; }

void runq_push(runq *q, uint32_t v)
{
    /* pushed from actors' stacks (a wake): a fault between the claim and the publish would
     * leave the cell claimed forever */
    crit_enter();
    uint32_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
    runq_cell *c;
    for (;;) {
        uint32_t i = pos & q->mask;
        c = &q->cells[i];
        /* acquire: the popper of the previous lap has finished reading the cell */
        uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire) + i;
        int32_t d = runq_diff(seq, pos);
        if (d == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (d < 0) {
            /* The cell still holds lap pos - capacity. With fewer than capacity entries
             * queued (the scheduler queues a slot at most once) its popper has claimed it
             * and is between its CAS and its release store: wait for that. If it was never
             * claimed the ring is full, which means a slot was queued twice. */
            uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
            if (runq_diff(pos, tail) > (int32_t)q->mask) {
                fprintf(stderr, "smarm: runq_push: ring full (capacity %u): double enqueue\n",
                        q->mask + 1);
                abort();
            }
            cpu_relax();
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        } else {
            pos = atomic_load_explicit(&q->head, memory_order_relaxed);
        }
    }
    c->val = v;
    /* release: publishes val to the popper that acquires this sequence */
    atomic_store_explicit(&c->seq, pos + 1 - (pos & q->mask), memory_order_release);
    crit_exit();
}

bool runq_pop(runq *q, uint32_t *v)
{
    uint32_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    runq_cell *c;
    for (;;) {
        uint32_t i = pos & q->mask;
        c = &q->cells[i];
        /* acquire: pairs with the pusher's release, so val is written */
        uint32_t seq = atomic_load_explicit(&c->seq, memory_order_acquire) + i;
        int32_t d = runq_diff(seq, pos + 1);
        if (d == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (d < 0) {
            return false; /* empty, or its pusher has not published yet */
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
    *v = c->val;
    /* release: our read of val happens-before the next lap's write */
    atomic_store_explicit(&c->seq, pos + q->mask + 1 - (pos & q->mask), memory_order_release);
    return true;
}

uint32_t runq_size_approx(runq *q)
{
    uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
    int32_t n = runq_diff(head, tail);
    return n < 0 ? 0 : (uint32_t)n;
}
