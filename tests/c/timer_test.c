/* Tests of the timer heap: due entries in deadline order, nothing early, the
 * earliest-deadline snapshot, a million timers, and concurrent arming. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "timer.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64: a fixed, reproducible shuffle of deadlines */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void due_entries_come_out_in_deadline_order(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    uint64_t seed = 88172645463325252ull;
    for (uint64_t i = 0; i < 1000; i++) {
        uint64_t d = 1 + rnd(&seed) % 500; /* duplicates on purpose */
        assert_true(timers_arm(&t, d, d * 10000 + i) >= 0);
    }
    timer_entry out[7];
    uint64_t last = 0, n = 0;
    uint32_t k;
    while ((k = timers_due(&t, UINT64_MAX - 1, out, 7)) > 0) {
        for (uint32_t i = 0; i < k; i++) {
            assert_true(out[i].deadline >= last);
            assert_int_equal(out[i].pid / 10000, out[i].deadline); /* pid kept with its deadline */
            last = out[i].deadline;
            n++;
        }
    }
    assert_int_equal(n, 1000);
    assert_int_equal(t.len, 0);
    timers_destroy(&t);
}

static void nothing_is_due_before_its_deadline(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    for (uint64_t d = 100; d <= 1000; d += 100)
        assert_true(timers_arm(&t, d, d) >= 0);
    timer_entry out[16];
    assert_int_equal(timers_due(&t, 0, out, 16), 0);
    assert_int_equal(timers_due(&t, 99, out, 16), 0);
    /* at exactly the deadline it is due */
    assert_int_equal(timers_due(&t, 100, out, 16), 1);
    assert_int_equal(out[0].deadline, 100);
    assert_int_equal(timers_due(&t, 450, out, 16), 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(out[i].deadline, 200 + 100 * i);
    assert_int_equal(timers_due(&t, 450, out, 16), 0);
    /* max caps one call; the rest stays armed */
    assert_int_equal(timers_due(&t, 1000, out, 2), 2);
    assert_int_equal(out[1].deadline, 600);
    assert_int_equal(timers_due(&t, 1000, out, 16), 4);
    assert_int_equal(out[3].deadline, 1000);
    timers_destroy(&t);
}

static void earliest_snapshot_tracks_the_minimum(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    assert_int_equal(timers_earliest(&t), UINT64_MAX);
    assert_int_equal(timers_arm(&t, 500, 1), 1); /* first one is the earliest */
    assert_int_equal(timers_earliest(&t), 500);
    assert_int_equal(timers_arm(&t, 700, 2), 0);
    assert_int_equal(timers_earliest(&t), 500);
    assert_int_equal(timers_arm(&t, 300, 3), 1);
    assert_int_equal(timers_earliest(&t), 300);
    assert_int_equal(timers_arm(&t, 300, 4), 0); /* a tie is not a new earliest */
    timer_entry out[4];
    assert_int_equal(timers_due(&t, 300, out, 4), 2);
    assert_int_equal(timers_earliest(&t), 500);
    assert_int_equal(timers_due(&t, 600, out, 4), 1);
    assert_int_equal(timers_earliest(&t), 700);
    assert_int_equal(timers_due(&t, 700, out, 4), 1);
    assert_int_equal(timers_earliest(&t), UINT64_MAX);
    /* a due call with nothing due leaves it alone */
    assert_int_equal(timers_arm(&t, 900, 5), 1);
    assert_int_equal(timers_due(&t, 10, out, 4), 0);
    assert_int_equal(timers_earliest(&t), 900);
    timers_destroy(&t);
}

#define MANY 1000000

static void million_timers_drain_in_order(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < MANY; i++)
        assert_true(timers_arm(&t, 1 + rnd(&seed) % 1000000000u, i) >= 0);
    uint64_t t1 = now_ns();
    static timer_entry out[64];
    uint64_t last = 0, n = 0;
    uint32_t k;
    int ordered = 1;
    while ((k = timers_due(&t, UINT64_MAX - 1, out, 64)) > 0) {
        for (uint32_t i = 0; i < k; i++) {
            ordered &= out[i].deadline >= last;
            last = out[i].deadline;
        }
        n += k;
    }
    uint64_t t2 = now_ns();
    assert_true(ordered);
    assert_int_equal(n, MANY);
    assert_int_equal(timers_earliest(&t), UINT64_MAX);
    printf("timers: %d random deadlines: %.1f ns per arm, %.1f ns per pop\n", MANY,
           (double)(t1 - t0) / MANY, (double)(t2 - t1) / MANY);
    timers_destroy(&t);
}

#define PER_THREAD 200000

typedef struct armer {
    timers *t;
    _Atomic int *go;
    uint64_t base;
    int failed;
} armer;

static void *arm_many(void *p)
{
    armer *a = p;
    while (!atomic_load(a->go))
        ;
    uint64_t seed = a->base + 12345;
    for (uint64_t i = 0; i < PER_THREAD; i++)
        if (timers_arm(a->t, 1 + rnd(&seed) % 100000, a->base + i) < 0)
            a->failed++;
    return NULL;
}

static void concurrent_arm_from_two_threads_loses_nothing(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    _Atomic int go = 0;
    armer a[2] = {{&t, &go, 0, 0}, {&t, &go, 1ull << 32, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, arm_many, &a[i]), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(a[0].failed + a[1].failed, 0);
    assert_int_equal(t.len, 2 * PER_THREAD);
    uint8_t *seen = calloc(2 * PER_THREAD, 1);
    assert_non_null(seen);
    static timer_entry out[64];
    uint64_t last = 0, n = 0;
    uint32_t k;
    int ok = 1;
    while ((k = timers_due(&t, UINT64_MAX - 1, out, 64)) > 0) {
        for (uint32_t i = 0; i < k; i++) {
            uint64_t pid = out[i].pid;
            uint64_t slot = (pid >> 32) * PER_THREAD + (pid & 0xffffffffu);
            ok &= out[i].deadline >= last && slot < 2 * PER_THREAD && !seen[slot];
            if (slot < 2 * PER_THREAD)
                seen[slot] = 1;
            last = out[i].deadline;
        }
        n += k;
    }
    assert_true(ok);
    assert_int_equal(n, 2 * PER_THREAD);
    free(seen);
    timers_destroy(&t);
}

int main(void)
{
    alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(due_entries_come_out_in_deadline_order),
        cmocka_unit_test(nothing_is_due_before_its_deadline),
        cmocka_unit_test(earliest_snapshot_tracks_the_minimum),
        cmocka_unit_test(million_timers_drain_in_order),
        cmocka_unit_test(concurrent_arm_from_two_threads_loses_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
