/* The actor slab: lazily touched slots, a locked free list + high-water mark, and the
 * generation-checked CAS transitions of each slot's packed (generation, state) word. */
#include "base/slot.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/futex.h"
#include "base/spin.h"

#if defined(SMARM_DEBUG) || !defined(NDEBUG)
#define slot_assert(x) assert(x)
#else
#define slot_assert(x) ((void)0)
#endif

static inline uint64_t slot_word(uint32_t gen, enum slot_state st)
{
    return (uint64_t)gen << 32 | st;
}

/* The free-list lock: 0 free, 1 held, 2 held with sleepers. The critical section is a few
 * loads and stores, so spin briefly; sleep on the futex only if the holder was descheduled. */
static void slot_lock(_Atomic uint32_t *l)
{
    crit_enter();
    for (int i = 0; i < 100; i++) {
        uint32_t z = 0;
        if (atomic_compare_exchange_weak_explicit(l, &z, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        cpu_relax();
    }
    while (atomic_exchange_explicit(l, 2, memory_order_acquire) != 0)
        futex_wait(l, 2, NULL);
}

static void slot_unlock(_Atomic uint32_t *l)
{
    if (atomic_exchange_explicit(l, 0, memory_order_release) == 2)
        futex_wake(l, 1);
    crit_exit();
}

int slot_table_init(slot_table *t, uint32_t max)
{
    if (max == 0 || max > PID_MAX_INDEX + 1u)
        return -EINVAL;
    /* Zero-filled pages: every slot starts VACANT with generation 0 (see slot_claim). */
    void *m = mmap(NULL, (size_t)max * sizeof(slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -errno;
    t->slots = m;
    t->max = max;
    atomic_init(&t->used, 0);
    atomic_init(&t->lock, 0);
    t->free_head = 0;
    t->hwm = 0;
    t->caches = NULL;
    t->ncaches = 0;
    return 0;
}

int slot_caches_init(slot_table *t, int n)
{
    slot_cache *c = calloc((size_t)n, sizeof *c);
    if (!c)
        return -ENOMEM;
    t->caches = c;
    t->ncaches = n;
    return 0;
}

void slot_table_destroy(slot_table *t)
{
    if (t->slots)
        munmap(t->slots, (size_t)t->max * sizeof(slot));
    t->slots = NULL;
    free(t->caches);
    t->caches = NULL;
    t->ncaches = 0;
}

/* A slot just taken from the list, the high-water mark or a cache: made ready for its tenancy. */
static int64_t claimed(slot_table *t, uint32_t idx)
{
    slot *s = &t->slots[idx];
    s->free_next = 0;
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    slot_assert(slot_word_state(w) == SLOT_VACANT);
    /* A never-used slot reads generation 0, which no pid carries: its first tenancy is 1.
     * No one else writes a VACANT word (every transition needs a live generation). */
    if (slot_word_gen(w) == 0)
        atomic_store_explicit(&s->word, slot_word(1, SLOT_VACANT), memory_order_relaxed);
    /* relaxed: a population count; whoever relies on it for termination orders it itself */
    atomic_fetch_add_explicit(&t->used, 1, memory_order_relaxed);
    return idx;
}

static int cache_pop(slot_cache *c, uint32_t *idx)
{
    if (atomic_load_explicit(&c->n, memory_order_relaxed) == 0)
        return 0;
    slot_lock(&c->lock);
    uint32_t n = atomic_load_explicit(&c->n, memory_order_relaxed);
    if (n) {
        *idx = c->idx[n - 1];
        atomic_store_explicit(&c->n, n - 1, memory_order_relaxed);
    }
    slot_unlock(&c->lock);
    return n > 0;
}

int64_t slot_claim(slot_table *t)
{
    for (;;) {
        uint32_t idx;
        int got = 1;
        slot_lock(&t->lock);
        if (t->free_head) {
            idx = t->free_head - 1;
            t->free_head = t->slots[idx].free_next;
        } else if (t->hwm < t->max) {
            idx = t->hwm++;
        } else {
            got = 0;
        }
        slot_unlock(&t->lock);
        if (got)
            return claimed(t, idx);
        for (int i = 0; i < t->ncaches; i++)
            if (cache_pop(&t->caches[i], &idx))
                return claimed(t, idx);
        /* used counts claimed slots, and a release lowers it only once the slot is on the
         * list or in a cache: below max, a free slot is there or another claim has taken it
         * and is about to count it */
        if (atomic_load_explicit(&t->used, memory_order_relaxed) >= t->max || !t->ncaches)
            return -1;
        cpu_relax();
    }
}

int64_t slot_claim_cached(slot_table *t, slot_cache *c)
{
    uint32_t idx;
    if (c && cache_pop(c, &idx))
        return claimed(t, idx);
    return slot_claim(t);
}

/* The tenancy ends: the generation advances and the word is VACANT again. */
static void vacate(slot_table *t, uint32_t index)
{
    slot_assert(index < t->max);
    slot *s = &t->slots[index];
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        enum slot_state st = slot_word_state(w);
        slot_assert(st == SLOT_DONE || st == SLOT_VACANT);
        (void)st;
        uint32_t gen = (slot_word_gen(w) + 1) & PID_GEN_MASK;
        if (gen == 0)
            gen = 1;
        /* release: the old tenant's teardown happens-before anyone who sees the new gen */
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, slot_word(gen, SLOT_VACANT),
                                                  memory_order_release, memory_order_relaxed))
            break;
    }
}

/* Puts the n slots of idx on the table's list, the last on top. */
static void push_free(slot_table *t, const uint32_t *idx, uint32_t n)
{
    slot_lock(&t->lock);
    for (uint32_t i = 0; i < n; i++) {
        t->slots[idx[i]].free_next = t->free_head;
        t->free_head = idx[i] + 1;
    }
    slot_unlock(&t->lock);
}

void slot_release(slot_table *t, uint32_t index)
{
    vacate(t, index);
    push_free(t, &index, 1);
    atomic_fetch_sub_explicit(&t->used, 1, memory_order_relaxed);
}

/* Under c's lock: its oldest n slots go on the table's list, the newest of them on top. */
static void give_back(slot_table *t, slot_cache *c, uint32_t n)
{
    push_free(t, c->idx, n);
    uint32_t left = atomic_load_explicit(&c->n, memory_order_relaxed) - n;
    memmove(c->idx, c->idx + n, left * sizeof c->idx[0]);
    atomic_store_explicit(&c->n, left, memory_order_relaxed);
}

void slot_cache_flush(slot_table *t, slot_cache *c)
{
    if (!c)
        return;
    if (atomic_load_explicit(&c->n, memory_order_relaxed) == 0)
        return;
    slot_lock(&c->lock);
    uint32_t n = atomic_load_explicit(&c->n, memory_order_relaxed);
    if (n)
        give_back(t, c, n);
    slot_unlock(&c->lock);
}

void slot_release_cached(slot_table *t, slot_cache *c, uint32_t index)
{
    if (!c) {
        slot_release(t, index);
        return;
    }
    vacate(t, index);
    slot_lock(&c->lock);
    /* full: the older half goes back to the list (lock order: a cache, then the table) */
    if (atomic_load_explicit(&c->n, memory_order_relaxed) == SLOT_CACHE_CAP)
        give_back(t, c, SLOT_CACHE_CAP / 2);
    uint32_t n = atomic_load_explicit(&c->n, memory_order_relaxed);
    c->idx[n] = index;
    atomic_store_explicit(&c->n, n + 1, memory_order_relaxed);
    slot_unlock(&c->lock);
    atomic_fetch_sub_explicit(&t->used, 1, memory_order_relaxed);
}

slot *slot_of(slot_table *t, uint64_t pid)
{
    uint32_t i = pid_index(pid);
    return i < t->max ? &t->slots[i] : NULL;
}

uint64_t slot_pid(slot_table *t, uint32_t index)
{
    slot_assert(index < t->max);
    uint64_t w = atomic_load_explicit(&t->slots[index].word, memory_order_acquire);
    return pid_make(index, slot_word_gen(w));
}

/* One generation-checked transition: from any state in the mask `from` to `to`.
 * Returns the state it moved from, or -1 (stale generation or a state outside `from`).
 * acq_rel on success: every transition either hands the actor to another thread
 * (publish, unpark, park, requeue, done: release what it wrote) or takes it over
 * (begin_run, a park that consumes a NOTIFIED: acquire what the waker wrote). */
static int slot_move(slot *s, uint32_t gen, unsigned from, enum slot_state to)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        enum slot_state st = slot_word_state(w);
        if (slot_word_gen(w) != gen || !(from & 1u << st))
            return -1;
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, slot_word(gen, to),
                                                  memory_order_acq_rel, memory_order_relaxed))
            return (int)st;
    }
}

#define SLOT_BIT(st) (1u << (st))

bool slot_publish(slot *s, uint32_t gen)
{
    return slot_move(s, gen, SLOT_BIT(SLOT_VACANT), SLOT_QUEUED) >= 0;
}

bool slot_begin_run(slot *s, uint32_t gen)
{
    return slot_move(s, gen, SLOT_BIT(SLOT_QUEUED), SLOT_RUNNING) >= 0;
}

bool slot_unpark(slot *s, uint32_t gen)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        if (slot_word_gen(w) != gen)
            return false;
        enum slot_state st = slot_word_state(w), to;
        switch (st) {
        case SLOT_PARKED:
            to = SLOT_QUEUED;
            break;
        case SLOT_RUNNING:
            to = SLOT_NOTIFIED;
            break;
        /* A wake is already pending, but we still write the word (unchanged): a plain load
         * would let the actor's begin_run/park miss what we wrote before this call (a
         * store-load race that loses the wake-up); as an RMW in the word's release
         * sequence it is ordered before whatever the actor does next. */
        case SLOT_QUEUED:
        case SLOT_NOTIFIED:
            to = st;
            break;
        default:
            return false; /* DONE: too late */
        }
        /* release: what the waker wrote (the message) is visible to the woken actor */
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, slot_word(gen, to),
                                                  memory_order_acq_rel, memory_order_relaxed))
            return st == SLOT_PARKED;
    }
}

bool slot_park(slot *s, uint32_t gen)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        enum slot_state st = slot_word_state(w);
        if (slot_word_gen(w) != gen)
            return false;
        slot_assert(st == SLOT_RUNNING || st == SLOT_NOTIFIED);
        if (st != SLOT_RUNNING && st != SLOT_NOTIFIED)
            return false;
        enum slot_state to = st == SLOT_RUNNING ? SLOT_PARKED : SLOT_RUNNING;
        /* acq_rel: parking releases the actor's state to its next runner; consuming a
         * NOTIFIED acquires what the waker wrote before its unpark */
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, slot_word(gen, to),
                                                  memory_order_acq_rel, memory_order_relaxed))
            return to == SLOT_PARKED;
    }
}

void slot_requeue(slot *s, uint32_t gen)
{
    int from = slot_move(s, gen, SLOT_BIT(SLOT_RUNNING) | SLOT_BIT(SLOT_NOTIFIED), SLOT_QUEUED);
    slot_assert(from >= 0);
    (void)from;
}

void slot_set_done(slot *s, uint32_t gen)
{
    int from = slot_move(s, gen, SLOT_BIT(SLOT_RUNNING) | SLOT_BIT(SLOT_NOTIFIED), SLOT_DONE);
    slot_assert(from >= 0);
    (void)from;
}

bool slot_is_live(slot *s, uint32_t gen)
{
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    enum slot_state st = slot_word_state(w);
    return slot_word_gen(w) == gen && st != SLOT_VACANT && st != SLOT_DONE;
}
