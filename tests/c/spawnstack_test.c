/* Tests of a scheduler's spawn stack: the owner's pops are newest first, a thief's oldest
 * first, a full stack spills its oldest, and an owner racing a thief hands out each entry
 * exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/spawnstack.h"

static void owner_pops_newest_thief_pops_oldest(void **state)
{
    (void)state;
    spawnstack s;
    spawnstack_init(&s);
    uint32_t v, spilled;
    assert_false(spawnstack_pop_newest(&s, &v));
    assert_false(spawnstack_pop_oldest(&s, &v));
    for (uint32_t i = 1; i <= 5; i++)
        assert_false(spawnstack_push(&s, i, &spilled));
    assert_int_equal(spawnstack_size(&s), 5);
    assert_true(spawnstack_pop_newest(&s, &v));
    assert_int_equal(v, 5);
    assert_true(spawnstack_pop_oldest(&s, &v));
    assert_int_equal(v, 1);
    assert_true(spawnstack_pop_newest(&s, &v));
    assert_int_equal(v, 4);
    assert_true(spawnstack_pop_oldest(&s, &v));
    assert_int_equal(v, 2);
    assert_true(spawnstack_pop_newest(&s, &v));
    assert_int_equal(v, 3);
    assert_false(spawnstack_pop_newest(&s, &v));
    assert_int_equal(spawnstack_size(&s), 0);
}

/* A full stack moves its oldest out as each newer entry comes, around the ring many times. */
static void full_stack_spills_its_oldest(void **state)
{
    (void)state;
    spawnstack s;
    spawnstack_init(&s);
    uint32_t v, spilled, next_spill = 0;
    for (uint32_t i = 0; i < 10 * SPAWNSTACK_CAP; i++) {
        int spill = spawnstack_push(&s, i, &spilled);
        if (i < SPAWNSTACK_CAP) {
            assert_false(spill);
        } else {
            assert_true(spill);
            assert_int_equal(spilled, next_spill++);
        }
    }
    assert_int_equal(spawnstack_size(&s), SPAWNSTACK_CAP);
    for (uint32_t i = 10 * SPAWNSTACK_CAP; i-- > 9 * SPAWNSTACK_CAP;) {
        assert_true(spawnstack_pop_newest(&s, &v));
        assert_int_equal(v, i);
    }
    assert_false(spawnstack_pop_oldest(&s, &v));
}

/* The owner pushes and pops its newest while a thief takes the oldest: every value comes out
 * once (popped, stolen or spilled). */
#define RACE_N 400000u

typedef struct race {
    spawnstack s;
    _Atomic int done;
    _Atomic uint8_t *seen;
    _Atomic int dup;
    uint32_t stolen;
} race;

static void mark(race *r, uint32_t v)
{
    if (atomic_fetch_add(&r->seen[v], 1) != 0)
        atomic_store(&r->dup, 1);
}

static void *thief(void *arg)
{
    race *r = arg;
    uint32_t v;
    while (!atomic_load(&r->done) || spawnstack_size(&r->s) > 0) {
        if (spawnstack_pop_oldest(&r->s, &v)) {
            mark(r, v);
            r->stolen++;
        }
    }
    return NULL;
}

static void owner_and_thief_hand_out_each_entry_once(void **state)
{
    (void)state;
    race *r = calloc(1, sizeof *r);
    r->seen = calloc(RACE_N, sizeof *r->seen);
    spawnstack_init(&r->s);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, thief, r), 0);
    uint32_t v, spilled;
    for (uint32_t i = 0; i < RACE_N; i++) {
        if (spawnstack_push(&r->s, i, &spilled))
            mark(r, spilled);
        /* the owner pops one for every three it pushes: the stack fills, spills, drains */
        if (i % 3 == 2 && spawnstack_pop_newest(&r->s, &v))
            mark(r, v);
    }
    atomic_store(&r->done, 1);
    pthread_join(t, NULL);
    while (spawnstack_pop_newest(&r->s, &v))
        mark(r, v);
    assert_false(atomic_load(&r->dup));
    for (uint32_t i = 0; i < RACE_N; i++)
        assert_int_equal(atomic_load(&r->seen[i]), 1);
    print_message("spawnstack race: %u of %u stolen\n", r->stolen, RACE_N);
    free((void *)r->seen);
    free(r);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(owner_pops_newest_thief_pops_oldest),
        cmocka_unit_test(full_stack_spills_its_oldest),
        cmocka_unit_test(owner_and_thief_hand_out_each_entry_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
