/* Tests of the actor slab: claim/release, generations, the state machine, and the
 * park/unpark race that must lose no wake-up and enqueue no actor twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/slot.h"

static uint32_t gen_of(slot_table *t, uint32_t i) { return pid_gen(slot_pid(t, i)); }

static enum slot_state state_of(slot_table *t, uint32_t i)
{
    return slot_word_state(atomic_load(&slot_at(t, i)->word));
}

/* Runs a slot through VACANT -> QUEUED -> RUNNING -> DONE and releases it. */
static void run_to_done(slot_table *t, uint32_t i)
{
    uint32_t g = gen_of(t, i);
    assert_true(slot_publish(slot_at(t, i), g));
    assert_true(slot_begin_run(slot_at(t, i), g));
    slot_set_done(slot_at(t, i), g);
    slot_release(t, i);
}

static void claim_release_cycles_reuse_slots_lifo(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 8), 0);
    int64_t a = slot_claim(&t), b = slot_claim(&t);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(atomic_load(&t.used), 2);
    assert_int_equal(state_of(&t, 0), SLOT_VACANT);
    for (int k = 0; k < 1000; k++) {
        run_to_done(&t, (uint32_t)a);
        int64_t c = slot_claim(&t);
        assert_int_equal(c, a); /* the freed slot, not a fresh one */
        assert_int_equal(atomic_load(&t.used), 2);
    }
    assert_int_equal(t.hwm, 2);
    slot_table_destroy(&t);
}

static void first_claim_has_generation_one(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 4), 0);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(slot_claim(&t), i);
        assert_int_equal(gen_of(&t, i), 1);
        assert_int_equal(slot_pid(&t, i), pid_make(i, 1));
    }
    slot_table_destroy(&t);
}

static void generation_advances_and_skips_zero(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 2), 0);
    assert_int_equal(slot_claim(&t), 0);
    for (uint32_t k = 1; k < 5; k++) {
        assert_int_equal(gen_of(&t, 0), k);
        slot_release(&t, 0); /* a claimed, never published slot may be released */
        assert_int_equal(slot_claim(&t), 0);
    }
    /* Force the generation to the top of its range and wrap. */
    atomic_store(&slot_at(&t, 0)->word, (uint64_t)PID_GEN_MASK << 32 | SLOT_VACANT);
    assert_int_equal(gen_of(&t, 0), PID_GEN_MASK);
    assert_int_equal(pid_gen(slot_pid(&t, 0)), PID_GEN_MASK);
    run_to_done(&t, 0);
    assert_int_equal(slot_claim(&t), 0);
    assert_int_equal(gen_of(&t, 0), 1);
    slot_table_destroy(&t);
}

static void stale_pid_cannot_touch_reused_slot(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 1), 0);
    assert_int_equal(slot_claim(&t), 0);
    uint64_t old = slot_pid(&t, 0);
    run_to_done(&t, 0);
    assert_int_equal(slot_claim(&t), 0);
    uint64_t cur = slot_pid(&t, 0);
    assert_true(cur != old);
    slot *s = slot_of(&t, old);
    assert_ptr_equal(s, slot_at(&t, 0));
    uint32_t og = pid_gen(old), ng = pid_gen(cur);

    assert_false(slot_publish(s, og));
    assert_int_equal(state_of(&t, 0), SLOT_VACANT);
    assert_true(slot_publish(s, ng));
    assert_false(slot_begin_run(s, og));
    assert_int_equal(state_of(&t, 0), SLOT_QUEUED);
    assert_true(slot_begin_run(s, ng));
    assert_false(slot_is_live(s, og));
    assert_true(slot_is_live(s, ng));
    assert_false(slot_unpark(s, og)); /* would be RUNNING -> NOTIFIED */
    assert_int_equal(state_of(&t, 0), SLOT_RUNNING);
    assert_true(slot_park(s, ng));
    assert_false(slot_unpark(s, og)); /* would be PARKED -> QUEUED */
    assert_int_equal(state_of(&t, 0), SLOT_PARKED);
    assert_true(slot_unpark(s, ng));
    assert_true(slot_begin_run(s, ng));
    assert_false(slot_park(s, og));
    assert_int_equal(state_of(&t, 0), SLOT_RUNNING);
    slot_table_destroy(&t);
}

static void slot_of_rejects_out_of_range_index(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 10), 0);
    assert_non_null(slot_of(&t, pid_make(9, 1)));
    assert_null(slot_of(&t, pid_make(10, 1)));
    assert_null(slot_of(&t, pid_make(PID_MAX_INDEX, 3)));
    slot_table_destroy(&t);
    assert_int_equal(slot_table_init(&t, 0), -EINVAL);
    assert_int_equal(slot_table_init(&t, PID_MAX_INDEX + 2), -EINVAL);
}

static void full_slab_returns_minus_one_repeatably(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 16), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(slot_claim(&t), i);
    for (int k = 0; k < 3; k++)
        assert_int_equal(slot_claim(&t), -1);
    assert_int_equal(atomic_load(&t.used), 16);
    slot_release(&t, 7);
    assert_int_equal(slot_claim(&t), 7);
    assert_int_equal(slot_claim(&t), -1);
    slot_table_destroy(&t);
}

static void unpark_of_parked_is_true_exactly_once(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 1), 0);
    assert_int_equal(slot_claim(&t), 0);
    slot *s = slot_at(&t, 0);
    uint32_t g = gen_of(&t, 0);
    assert_true(slot_publish(s, g));
    assert_false(slot_unpark(s, g)); /* QUEUED: already runnable */
    assert_true(slot_begin_run(s, g));
    assert_true(slot_park(s, g));
    assert_true(slot_unpark(s, g));
    assert_false(slot_unpark(s, g));
    assert_false(slot_unpark(s, g));
    assert_int_equal(state_of(&t, 0), SLOT_QUEUED);
    slot_table_destroy(&t);
}

static void notified_park_returns_false_and_keeps_running(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 1), 0);
    assert_int_equal(slot_claim(&t), 0);
    slot *s = slot_at(&t, 0);
    uint32_t g = gen_of(&t, 0);
    assert_true(slot_publish(s, g));
    assert_true(slot_begin_run(s, g));
    assert_false(slot_unpark(s, g)); /* RUNNING -> NOTIFIED */
    assert_int_equal(state_of(&t, 0), SLOT_NOTIFIED);
    assert_false(slot_unpark(s, g)); /* stays NOTIFIED */
    assert_false(slot_park(s, g));   /* NOTIFIED -> RUNNING */
    assert_int_equal(state_of(&t, 0), SLOT_RUNNING);
    assert_true(slot_park(s, g)); /* the notification was consumed */
    assert_true(slot_unpark(s, g));
    assert_true(slot_begin_run(s, g));
    slot_requeue(s, g);
    assert_int_equal(state_of(&t, 0), SLOT_QUEUED);
    assert_true(slot_begin_run(s, g));
    assert_false(slot_unpark(s, g));
    slot_requeue(s, g); /* NOTIFIED -> QUEUED */
    assert_int_equal(state_of(&t, 0), SLOT_QUEUED);
    assert_true(slot_begin_run(s, g));
    slot_set_done(s, g);
    assert_false(slot_unpark(s, g)); /* DONE: too late */
    assert_false(slot_is_live(s, g));
    slot_table_destroy(&t);
}

/* The race: a waiter parks unless the flag for round r is up; an unparker raises the flag
 * and unparks twice (two wakers). A park that returns true must be matched by exactly one
 * unpark that returns true, which "enqueues" (hands the actor back). */
#define RACE_ROUNDS 1000000

typedef struct race {
    slot *s;
    uint32_t gen;
    _Atomic uint32_t flag;     /* round whose condition is true */
    _Atomic uint32_t unparked; /* round whose unparks have all returned */
    _Atomic uint32_t handoff;  /* enqueues not yet consumed */
    _Atomic uint32_t done;     /* round the waiter has finished */
    _Atomic int failure;       /* 1: lost wake-up, 2: double enqueue, 3: bad state */
    uint64_t parks, enqueues;
} race;

static void spin_pause(unsigned *n)
{
    if (++*n % 32 == 0)
        sched_yield();
    else
        __builtin_ia32_pause();
}

static void *race_waiter(void *arg)
{
    race *rc = arg;
    for (uint32_t r = 1; r <= RACE_ROUNDS && !atomic_load(&rc->failure); r++) {
        while (atomic_load_explicit(&rc->flag, memory_order_acquire) != r) {
            if (!slot_park(rc->s, rc->gen))
                continue; /* notified: look again */
            rc->parks++;
            unsigned n = 0;
            for (;;) {
                uint32_t h = atomic_exchange(&rc->handoff, 0);
                if (h == 1)
                    break;
                if (h > 1) {
                    atomic_store(&rc->failure, 2);
                    return NULL;
                }
                /* Every unpark of this round returned and none enqueued us: lost. */
                if (atomic_load(&rc->unparked) == r && atomic_load(&rc->handoff) == 0) {
                    atomic_store(&rc->failure, 1);
                    return NULL;
                }
                spin_pause(&n);
            }
            if (!slot_begin_run(rc->s, rc->gen)) {
                atomic_store(&rc->failure, 3);
                return NULL;
            }
        }
        atomic_store_explicit(&rc->done, r, memory_order_release);
    }
    return NULL;
}

static void *race_unparker(void *arg)
{
    race *rc = arg;
    for (uint32_t r = 1; r <= RACE_ROUNDS && !atomic_load(&rc->failure); r++) {
        for (uint32_t k = (r * 2654435761u) >> 28; k; k--) /* jitter: vary the interleaving */
            __builtin_ia32_pause();
        atomic_store_explicit(&rc->flag, r, memory_order_release);
        for (int k = 0; k < 2; k++)
            if (slot_unpark(rc->s, rc->gen)) {
                rc->enqueues++;
                atomic_fetch_add(&rc->handoff, 1);
            }
        atomic_store(&rc->unparked, r);
        unsigned n = 0;
        while (atomic_load_explicit(&rc->done, memory_order_acquire) != r &&
               !atomic_load(&rc->failure))
            spin_pause(&n);
    }
    return NULL;
}

static void concurrent_unpark_vs_park_loses_no_wake_and_enqueues_once(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 1), 0);
    assert_int_equal(slot_claim(&t), 0);
    race rc = {.s = slot_at(&t, 0), .gen = gen_of(&t, 0)};
    assert_true(slot_publish(rc.s, rc.gen));
    assert_true(slot_begin_run(rc.s, rc.gen));
    pthread_t a, b;
    pthread_create(&a, NULL, race_waiter, &rc);
    pthread_create(&b, NULL, race_unparker, &rc);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    assert_int_equal(atomic_load(&rc.failure), 0);
    assert_int_equal(atomic_load(&rc.done), RACE_ROUNDS);
    assert_int_equal(rc.parks, rc.enqueues);
    print_message("park/unpark race: %llu parks in %d rounds (late wakes park twice)\n",
                  (unsigned long long)rc.parks, RACE_ROUNDS);
    slot_table_destroy(&t);
}

/* Two threads claim until the slab is full: together they get exactly the free slots. */
typedef struct claim_race {
    slot_table *t;
    _Atomic int go;
    int64_t got[64];
    int n;
} claim_race;

static void *claimer(void *arg)
{
    claim_race *c = arg;
    while (!atomic_load(&c->go))
        ;
    int64_t i;
    while ((i = slot_claim(c->t)) >= 0)
        c->got[c->n++] = i;
    return NULL;
}

static void racing_claims_take_exactly_the_free_slots(void **state)
{
    (void)state;
    for (int round = 0; round < 2000; round++) {
        slot_table t;
        assert_int_equal(slot_table_init(&t, 48), 0);
        for (int i = 0; i < 48; i++)
            assert_int_equal(slot_claim(&t), i);
        /* Free some from the free list, and leave the rest above the high-water mark. */
        int nfree = 0;
        for (int i = 0; i < 40; i += 3, nfree++)
            slot_release(&t, (uint32_t)i);
        t.hwm = 44; /* the slab's top 4 slots were never claimed */
        atomic_fetch_sub(&t.used, 4);
        nfree += 4;
        claim_race a = {.t = &t}, b = {.t = &t};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, claimer, &a);
        pthread_create(&tb, NULL, claimer, &b);
        atomic_store(&a.go, 1);
        atomic_store(&b.go, 1);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        assert_int_equal(a.n + b.n, nfree);
        assert_int_equal(atomic_load(&t.used), 48);
        uint64_t seen = 0;
        for (int k = 0; k < a.n + b.n; k++) {
            int64_t i = k < a.n ? a.got[k] : b.got[k - a.n];
            assert_false(seen & 1ull << i);
            seen |= 1ull << i;
        }
        slot_table_destroy(&t);
    }
}

/* A scheduler's cache: what its deaths release its next spawns claim, newest first; a full
 * cache gives its older half to the table's list, a flush all of it. */
static void cached_release_is_claimed_back_and_overflows_to_the_list(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 64), 0);
    assert_int_equal(slot_caches_init(&t, 2), 0);
    slot_cache *c = slot_cache_at(&t, 0);
    assert_null(slot_cache_at(&t, 2));
    assert_null(slot_cache_at(&t, -1));
    for (int i = 0; i < 40; i++)
        assert_int_equal(slot_claim_cached(&t, c), i);
    uint32_t g = gen_of(&t, 7);
    slot_release_cached(&t, c, 7);
    assert_int_equal(gen_of(&t, 7), g + 1);
    assert_int_equal(state_of(&t, 7), SLOT_VACANT);
    assert_int_equal(atomic_load(&t.used), 39);
    /* the table's own list does not have it: a claim without the cache takes a new slot */
    assert_int_equal(slot_claim(&t), 40);
    assert_int_equal(slot_claim_cached(&t, c), 7);
    /* 33 releases into a cache of 32: the first 16 went to the list, newest first there */
    for (uint32_t i = 0; i < 33; i++)
        slot_release_cached(&t, c, i);
    assert_int_equal(atomic_load(&c->n), 17);
    assert_int_equal(slot_claim(&t), 15);
    assert_int_equal(slot_claim_cached(&t, c), 32);
    /* a flush (its scheduler goes to sleep) gives them all to the list, the newest on top */
    slot_cache_flush(&t, c);
    assert_int_equal(atomic_load(&c->n), 0);
    assert_int_equal(slot_claim(&t), 31);
    assert_int_equal(slot_claim(&t), 30);
    slot_table_destroy(&t);
}

/* A claim that finds the table's list and high-water mark exhausted takes a slot another
 * scheduler's cache holds: the slab is full only when every slot is claimed. */
static void claim_takes_from_caches_when_the_table_is_empty(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 4), 0);
    assert_int_equal(slot_caches_init(&t, 2), 0);
    slot_cache *c0 = slot_cache_at(&t, 0), *c1 = slot_cache_at(&t, 1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(slot_claim_cached(&t, c0), i);
    assert_int_equal(slot_claim_cached(&t, c1), -1);
    slot_release_cached(&t, c0, 1);
    slot_release_cached(&t, c0, 3);
    assert_int_equal(slot_claim_cached(&t, c1), 3);
    assert_int_equal(slot_claim(&t), 1);
    assert_int_equal(slot_claim(&t), -1);
    assert_int_equal(atomic_load(&t.used), 4);
    slot_table_destroy(&t);
}

/* Two schedulers claim and release through their own caches on a slab just large enough for
 * what both hold at most: no claim fails, and no slot is held twice at once. */
#define CACHE_RACE_HOLD 12
typedef struct cache_race {
    slot_table *t;
    slot_cache *c;
    _Atomic int *owner;
    int id, failed, twice;
} cache_race;

static void *cache_racer(void *arg)
{
    cache_race *r = arg;
    uint32_t held[CACHE_RACE_HOLD];
    int n = 0;
    unsigned seed = (unsigned)r->id * 7919u + 1;
    for (int step = 0; step < 200000; step++) {
        seed = seed * 1103515245u + 12345u;
        if (n < CACHE_RACE_HOLD && (n == 0 || (seed >> 16) % 2)) {
            int64_t i = slot_claim_cached(r->t, r->c);
            if (i < 0) {
                r->failed++;
                continue;
            }
            int none = 0;
            if (!atomic_compare_exchange_strong(&r->owner[i], &none, r->id))
                r->twice++;
            held[n++] = (uint32_t)i;
        } else {
            uint32_t i = held[--n];
            atomic_store(&r->owner[i], 0);
            slot_release_cached(r->t, r->c, i);
        }
    }
    while (n > 0) {
        uint32_t i = held[--n];
        atomic_store(&r->owner[i], 0);
        slot_release_cached(r->t, r->c, i);
    }
    return NULL;
}

static void cached_claims_by_two_threads_never_fail_below_capacity(void **state)
{
    (void)state;
    slot_table t;
    assert_int_equal(slot_table_init(&t, 2 * CACHE_RACE_HOLD), 0);
    assert_int_equal(slot_caches_init(&t, 2), 0);
    _Atomic int owner[2 * CACHE_RACE_HOLD] = {0};
    cache_race a = {&t, slot_cache_at(&t, 0), owner, 1, 0, 0};
    cache_race b = {&t, slot_cache_at(&t, 1), owner, 2, 0, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, cache_racer, &a);
    pthread_create(&tb, NULL, cache_racer, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.failed + b.failed, 0);
    assert_int_equal(a.twice + b.twice, 0);
    assert_int_equal(atomic_load(&t.used), 0);
    slot_table_destroy(&t);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_release_cycles_reuse_slots_lifo),
        cmocka_unit_test(first_claim_has_generation_one),
        cmocka_unit_test(generation_advances_and_skips_zero),
        cmocka_unit_test(stale_pid_cannot_touch_reused_slot),
        cmocka_unit_test(slot_of_rejects_out_of_range_index),
        cmocka_unit_test(full_slab_returns_minus_one_repeatably),
        cmocka_unit_test(unpark_of_parked_is_true_exactly_once),
        cmocka_unit_test(notified_park_returns_false_and_keeps_running),
        cmocka_unit_test(concurrent_unpark_vs_park_loses_no_wake_and_enqueues_once),
        cmocka_unit_test(racing_claims_take_exactly_the_free_slots),
        cmocka_unit_test(cached_release_is_claimed_back_and_overflows_to_the_list),
        cmocka_unit_test(claim_takes_from_caches_when_the_table_is_empty),
        cmocka_unit_test(cached_claims_by_two_threads_never_fail_below_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
