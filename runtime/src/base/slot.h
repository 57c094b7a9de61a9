/* Fixed slab of actor slots: pid = (index, generation), one packed atomic state word per slot. */
#ifndef SMARM_SLOT_H
#define SMARM_SLOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A pid is an exact integer below 2^53 so Lua holds it as a plain number:
 * generation (29 bits, never 0) above a 24-bit slot index. */
#define PID_INDEX_BITS 24
#define PID_MAX_INDEX ((1u << PID_INDEX_BITS) - 1)
#define PID_GEN_MASK ((1u << 29) - 1)
static inline uint64_t pid_make(uint32_t index, uint32_t gen)
{
    return ((uint64_t)gen << PID_INDEX_BITS) | index;
}
static inline uint32_t pid_index(uint64_t pid) { return (uint32_t)(pid & PID_MAX_INDEX); }
static inline uint32_t pid_gen(uint64_t pid)
{
    return (uint32_t)(pid >> PID_INDEX_BITS) & PID_GEN_MASK;
}

enum slot_state {
    SLOT_VACANT = 0,
    SLOT_QUEUED,
    SLOT_RUNNING,
    SLOT_NOTIFIED, /* running, and woken since it last looked: its next park returns at once */
    SLOT_PARKED,
    SLOT_DONE,
};

/* word = generation << 32 | state. Every transition is a CAS on the whole word,
 * so the generation check is atomic with it: a stale pid never moves a reused slot. */
typedef struct slot {
    _Atomic uint64_t word;
    void *actor;        /* owned by sched.c */
    uint32_t free_next; /* free-list link (index + 1; 0 ends the list) */
    uint32_t pad;
} slot;

static inline uint32_t slot_word_gen(uint64_t w) { return (uint32_t)(w >> 32); }
static inline enum slot_state slot_word_state(uint64_t w) { return (enum slot_state)(w & 0xff); }

/* A scheduler's cache of free slots: it claims the slots its own actors' deaths released, so
 * a slot's record stays in one core's cache, and the table's lock is taken about once per
 * SLOT_CACHE_CAP / 2 releases instead of at every spawn and death. Its lock is its owner's
 * (uncontended) but for a claim that found the table empty (see slot_claim). */
#define SLOT_CACHE_CAP 32
typedef struct slot_cache {
    _Atomic uint32_t lock;
    _Atomic uint32_t n; /* written under the lock; read without it to skip an empty cache */
    uint32_t idx[SLOT_CACHE_CAP];
} slot_cache;

/* The fields every send and wake reads (slots) apart from those spawns and deaths write on
 * any thread (used, the free list): sharing a line, each death on one core made the next
 * lookup on the other miss. */
typedef struct slot_table {
    slot *slots; /* reserved for max slots, touched lazily */
    uint32_t max;
    int ncaches;
    slot_cache *caches;                 /* slot_caches_init: one per scheduler, or NULL */
    _Alignas(64) _Atomic uint32_t used; /* claimed slots */
    /* free list and high-water mark, under lock */
    _Atomic uint32_t lock;
    uint32_t free_head; /* index + 1 */
    uint32_t hwm;
} slot_table;
_Static_assert(offsetof(slot_table, used) / 64 != offsetof(slot_table, slots) / 64,
               "the slot count shares no line with the slot array's address");

int slot_table_init(slot_table *t, uint32_t max); /* 0 or -errno */
void slot_table_destroy(slot_table *t);
/* Gives the table n caches (zeroed, empty); 0 or -ENOMEM. Freed by slot_table_destroy. */
int slot_caches_init(slot_table *t, int n);
static inline slot_cache *slot_cache_at(slot_table *t, int i)
{
    return i >= 0 && i < t->ncaches ? &t->caches[i] : NULL;
}
/* Claims a vacant slot (one lock, one pop: claim-or-report, no check-then-act).
 * Returns its index, with the word at (gen, VACANT), or -1 when the slab is full. With
 * caches, a claim that finds the table's list empty takes a slot from a cache, and fails
 * only when every slot is claimed (a slot on its way back is waited for). */
int64_t slot_claim(slot_table *t);
/* The same, from cache c first (NULL: the table). */
int64_t slot_claim_cached(slot_table *t, slot_cache *c);
/* Ends a tenancy: the generation advances (wrapping within 29 bits, skipping 0),
 * the state returns to VACANT and the index goes back on the free list. */
void slot_release(slot_table *t, uint32_t index);
/* The same into cache c (NULL: the table's list); a full cache gives its older half back to
 * the table's list under one lock. */
void slot_release_cached(slot_table *t, slot_cache *c, uint32_t index);
/* Gives every slot of cache c back to the table's list (a scheduler about to sleep: the
 * slots it freed are the next spawns' anywhere, as they were before caches). */
void slot_cache_flush(slot_table *t, slot_cache *c);
static inline slot *slot_at(slot_table *t, uint32_t index) { return &t->slots[index]; }
/* The slot a pid names, or NULL if the index is out of range. */
slot *slot_of(slot_table *t, uint64_t pid);
uint64_t slot_pid(slot_table *t, uint32_t index); /* current tenancy's pid */

/* Transitions (gen must match the word's generation or nothing happens). */
bool slot_publish(slot *s, uint32_t gen);   /* VACANT -> QUEUED (spawn) */
bool slot_begin_run(slot *s, uint32_t gen); /* QUEUED -> RUNNING (the popping scheduler) */
/* Wake: PARKED -> QUEUED returns true (the caller must enqueue it);
 * RUNNING -> NOTIFIED, and QUEUED/NOTIFIED/DONE/stale return false. */
bool slot_unpark(slot *s, uint32_t gen);
/* Park: RUNNING -> PARKED returns true; NOTIFIED -> RUNNING returns false (a wake
 * landed since the actor last looked: it must look again instead of sleeping). */
bool slot_park(slot *s, uint32_t gen);
void slot_requeue(slot *s, uint32_t gen);  /* RUNNING|NOTIFIED -> QUEUED (yield) */
void slot_set_done(slot *s, uint32_t gen); /* RUNNING|NOTIFIED -> DONE */
bool slot_is_live(slot *s, uint32_t gen);  /* gen matches and state is not VACANT/DONE */

#endif
