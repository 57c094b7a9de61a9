/* A spinlocked ring: every operation is a few instructions under the lock, and the owner is
 * the only frequent user (a thief comes only when its own queues are empty). */
#include "base/spawnstack.h"

#include "base/spin.h"

#define MASK (SPAWNSTACK_CAP - 1)

void spawnstack_init(spawnstack *s)
{
    atomic_init(&s->lock, 0);
    atomic_init(&s->n, 0);
    s->oldest = 0;
}

int spawnstack_push(spawnstack *s, uint32_t v, uint32_t *spilled)
{
    int spill = 0;
    spin_lock(&s->lock);
    uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
    if (n == SPAWNSTACK_CAP) {
        *spilled = s->v[s->oldest];
        s->oldest = (s->oldest + 1) & MASK;
        n--;
        spill = 1;
    }
    s->v[(s->oldest + n) & MASK] = v;
    atomic_store_explicit(&s->n, n + 1, memory_order_relaxed);
    spin_unlock(&s->lock);
    return spill;
}

/* Takes the newest entry (the owner) or the oldest (a thief, a spill). */
static int pop_end(spawnstack *s, uint32_t *v, int newest)
{
    if (spawnstack_size(s) == 0)
        return 0;
    int got = 0;
    spin_lock(&s->lock);
    uint32_t n = atomic_load_explicit(&s->n, memory_order_relaxed);
    if (n) {
        if (newest) {
            *v = s->v[(s->oldest + n - 1) & MASK];
        } else {
            *v = s->v[s->oldest];
            s->oldest = (s->oldest + 1) & MASK;
        }
        atomic_store_explicit(&s->n, n - 1, memory_order_relaxed);
        got = 1;
    }
    spin_unlock(&s->lock);
    return got;
}

int spawnstack_pop_newest(spawnstack *s, uint32_t *v) { return pop_end(s, v, 1); }

int spawnstack_pop_oldest(spawnstack *s, uint32_t *v) { return pop_end(s, v, 0); }
