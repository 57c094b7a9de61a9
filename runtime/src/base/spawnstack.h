/* Spawn stack: a scheduler's small deque of new actors (slot indices). Its owner pushes and
 * pops the newest; an idle sibling takes the oldest. Full, a push moves the oldest out. */
#ifndef SMARM_SPAWNSTACK_H
#define SMARM_SPAWNSTACK_H

#include <stdatomic.h>
#include <stdint.h>

/* Entries a stack holds; a power of two (the ring's mask). */
#define SPAWNSTACK_CAP 256

typedef struct spawnstack {
    _Atomic uint32_t lock;
    _Atomic uint32_t n; /* entries, read racily by whoever looks for work */
    uint32_t oldest;    /* ring position of the oldest entry */
    uint32_t v[SPAWNSTACK_CAP];
} spawnstack;

/* A zero-filled spawnstack is empty; so is one after spawnstack_init. */
void spawnstack_init(spawnstack *s);
/* Pushes v as the newest. If the stack was full its oldest entry leaves it: returns 1 and
 * that entry in *spilled; else 0. */
int spawnstack_push(spawnstack *s, uint32_t v, uint32_t *spilled);
/* Pops the newest (the owner's pick) or the oldest (a thief's, or the owner's fairness
 * turn) entry into *v; 0 if empty. */
int spawnstack_pop_newest(spawnstack *s, uint32_t *v);
int spawnstack_pop_oldest(spawnstack *s, uint32_t *v);

static inline uint32_t spawnstack_size(spawnstack *s)
{
    return atomic_load_explicit(&s->n, memory_order_relaxed);
}

#endif
