/* Tests of the MPMC run queue: FIFO order, laps around the ring, exactly-once delivery
 * under 2x2 threads, capacity rounding; prints push+pop cost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/runq.h"

static void pops_in_fifo_order(void **state)
{
    (void)state;
    runq *q = runq_new(64);
    uint32_t v;
    assert_false(runq_pop(q, &v));
    for (uint32_t i = 0; i < 64; i++)
        runq_push(q, i * 7);
    assert_int_equal(runq_size_approx(q), 64);
    for (uint32_t i = 0; i < 64; i++) {
        assert_true(runq_pop(q, &v));
        assert_int_equal(v, i * 7);
    }
    assert_false(runq_pop(q, &v));
    assert_int_equal(runq_size_approx(q), 0);
    runq_free(q);
}

static void wraps_around_many_laps(void **state)
{
    (void)state;
    runq *q = runq_new(8);
    uint32_t next_in = 0, next_out = 0, v;
    for (int round = 0; round < 200000; round++) {
        uint32_t k = (uint32_t)round % 9; /* 0..8 entries: sometimes exactly full */
        for (uint32_t i = 0; i < k; i++)
            runq_push(q, next_in++);
        assert_int_equal(runq_size_approx(q), k);
        for (uint32_t i = 0; i < k; i++) {
            assert_true(runq_pop(q, &v));
            assert_int_equal(v, next_out++);
        }
        assert_false(runq_pop(q, &v));
    }
    assert_true(next_in / 8 > 90000); /* laps */
    runq_free(q);
}

static void capacity_rounds_up_to_a_power_of_two(void **state)
{
    (void)state;
    uint32_t cases[][2] = {{0, 1},
                           {1, 1},
                           {2, 2},
                           {3, 4},
                           {5, 8},
                           {1000, 1024},
                           {1u << 20, 1u << 20},
                           {(1u << 20) + 1, 1u << 21}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        runq *q = runq_new(cases[i][0]);
        assert_non_null(q);
        assert_int_equal(runq_capacity(q), cases[i][1]);
        for (uint32_t k = 0; k < runq_capacity(q) && k < 4096; k++)
            runq_push(q, k);
        runq_free(q);
    }
    assert_null(runq_new((1u << 31) + 1));
    /* a full ring of capacity 5 -> 8 holds 8 */
    runq *q = runq_new(5);
    for (uint32_t k = 0; k < 8; k++)
        runq_push(q, k);
    assert_int_equal(runq_size_approx(q), 8);
    runq_free(q);
}

/* 2 producers, 2 consumers, a small ring: credits keep the queued count within capacity
 * (as the scheduler's queue-once rule does), so the ring laps constantly. */
#define MP_N 1000000u
#define MP_CAP 64

typedef struct mp {
    runq *q;
    _Atomic int credits;
    _Atomic uint32_t popped;
    _Atomic uint64_t *seen;
    _Atomic int dup;
    int id;
} mp;

typedef struct mp_arg {
    mp *m;
    uint32_t first;
} mp_arg;

static void *producer(void *arg)
{
    mp_arg *a = arg;
    for (uint32_t i = 0; i < MP_N / 2; i++) {
        while (atomic_fetch_sub(&a->m->credits, 1) <= 0) {
            atomic_fetch_add(&a->m->credits, 1);
            sched_yield();
        }
        runq_push(a->m->q, a->first + i);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    mp *m = arg;
    uint32_t v;
    while (atomic_load(&m->popped) < MP_N) {
        if (!runq_pop(m->q, &v)) {
            sched_yield(); /* 4 threads may share 2 CPUs */
            continue;
        }
        atomic_fetch_add(&m->credits, 1);
        uint64_t bit = 1ull << (v % 64);
        if (atomic_fetch_or(&m->seen[v / 64], bit) & bit)
            atomic_store(&m->dup, 1);
        atomic_fetch_add(&m->popped, 1);
    }
    return NULL;
}

static void two_producers_two_consumers_deliver_each_value_once(void **state)
{
    (void)state;
    mp m = {.q = runq_new(MP_CAP), .credits = MP_CAP};
    m.seen = calloc(MP_N / 64 + 1, sizeof *m.seen);
    mp_arg pa = {&m, 0}, pb = {&m, MP_N / 2};
    pthread_t t[4];
    pthread_create(&t[0], NULL, producer, &pa);
    pthread_create(&t[1], NULL, producer, &pb);
    pthread_create(&t[2], NULL, consumer, &m);
    pthread_create(&t[3], NULL, consumer, &m);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&m.dup), 0);
    assert_int_equal(atomic_load(&m.popped), MP_N);
    for (uint32_t v = 0; v < MP_N; v++)
        assert_true(atomic_load(&m.seen[v / 64]) & 1ull << (v % 64));
    uint32_t v;
    assert_false(runq_pop(m.q, &v));
    free(m.seen);
    runq_free(m.q);
}

static void bench_push_pop_ns(void **state)
{
    (void)state;
    runq *q = runq_new(1u << 20); /* the scheduler's size: a lazily touched 8 MiB */
    const uint32_t n = 4000000;
    uint32_t v, sum = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (uint32_t i = 0; i < n; i++) {
        runq_push(q, i);
        runq_pop(q, &v);
        sum += v;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    print_message("runq: %.1f ns per push+pop (single thread, sum %u)\n", ns / n, sum);
    runq_free(q);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pops_in_fifo_order),
        cmocka_unit_test(wraps_around_many_laps),
        cmocka_unit_test(capacity_rounds_up_to_a_power_of_two),
        cmocka_unit_test(two_producers_two_consumers_deliver_each_value_once),
        cmocka_unit_test(bench_push_pop_ns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
