/* Timers: a binary min-heap of (deadline, pid) wakes. A wake that finds its
 * actor no longer waiting is harmless: every wait re-checks its own condition. */
#include "timer.h"

#include <sched.h>
#include <stdlib.h>

static void t_lock(timers *t)
{
    int spins = 0;
    while (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&t->lock, memory_order_relaxed)) {
            if (++spins > 100)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
}

static void t_unlock(timers *t) { atomic_store_explicit(&t->lock, 0, memory_order_release); }

void timers_init(timers *t)
{
    atomic_store(&t->lock, 0);
    t->heap = NULL;
    t->len = t->cap = 0;
    atomic_store(&t->earliest, UINT64_MAX);
}

void timers_destroy(timers *t)
{
    free(t->heap);
    t->heap = NULL;
    t->len = t->cap = 0;
}

static void publish_earliest(timers *t)
{
    atomic_store_explicit(&t->earliest, t->len ? t->heap[0].deadline : UINT64_MAX,
                          memory_order_relaxed);
}

int timers_arm(timers *t, uint64_t deadline, uint64_t pid)
{
    t_lock(t);
    if (t->len == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        timer_entry *h = realloc(t->heap, cap * sizeof *h);
        if (!h) {
            t_unlock(t);
            return -1;
        }
        t->heap = h;
        t->cap = cap;
    }
    uint32_t i = t->len++;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (t->heap[p].deadline <= deadline)
            break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = (timer_entry){deadline, pid};
    publish_earliest(t);
    t_unlock(t);
    return i == 0;
}

static void sift_down(timers *t)
{
    timer_entry x = t->heap[t->len];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= t->len)
            break;
        if (c + 1 < t->len && t->heap[c + 1].deadline < t->heap[c].deadline)
            c++;
        if (x.deadline <= t->heap[c].deadline)
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    t->heap[i] = x;
}

uint32_t timers_due(timers *t, uint64_t now, timer_entry *out, uint32_t max)
{
    if (timers_earliest(t) > now)
        return 0;
    uint32_t n = 0;
    t_lock(t);
    while (n < max && t->len && t->heap[0].deadline <= now) {
        out[n++] = t->heap[0];
        t->len--;
        if (t->len)
            sift_down(t);
    }
    publish_earliest(t);
    t_unlock(t);
    return n;
}
