/* Tests of scheduler parking: the permit, deadlines, the idle-mask protocol that loses no
 * wake-up, and wake-one exclusivity; prints the park/unpark round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "base/park.h"

static void unpark_before_park_returns_at_once(void **state)
{
    (void)state;
    parker p;
    parker_init(&p);
    parker_unpark(&p);
    uint64_t t0 = park_now_ns();
    parker_park(&p, 0); /* no deadline: would hang (until the alarm) without the permit */
    assert_true(park_now_ns() - t0 < 1000000000u);
    /* the permit was consumed: a second park waits out its deadline */
    uint64_t dl = park_now_ns() + 20000000u;
    parker_park(&p, dl);
    assert_true(park_now_ns() >= dl);
    /* permits do not accumulate */
    parker_unpark(&p);
    parker_unpark(&p);
    parker_park(&p, 0);
    dl = park_now_ns() + 20000000u;
    parker_park(&p, dl);
    assert_true(park_now_ns() >= dl);
}

static void deadline_park_returns_after_the_deadline(void **state)
{
    (void)state;
    parker p;
    parker_init(&p);
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = park_now_ns(), dl = t0 + 50000000u;
        parker_park(&p, dl);
        uint64_t t1 = park_now_ns();
        assert_true(t1 >= dl);
        assert_true(t1 - dl < 5000000000u);
    }
    parker_park(&p, park_now_ns() - 1); /* a past deadline returns at once */
}

static void wake_one_with_nobody_idle_returns_false(void **state)
{
    (void)state;
    park_set ps;
    park_set_init(&ps, 4, NULL);
    assert_false(park_set_wake_one(&ps));
    assert_false(park_set_wake(&ps, 2));
    park_set_idle_begin(&ps, 2);
    park_set_idle_cancel(&ps, 2);
    assert_false(park_set_wake_one(&ps));
    park_set_idle_begin(&ps, 1);
    park_set_idle_begin(&ps, 3);
    assert_true(park_set_wake_one(&ps)); /* the highest idle one */
    assert_int_equal(atomic_load(&ps.idle), 1u << 1);
    assert_true(park_set_wake(&ps, 1));
    assert_false(park_set_wake(&ps, 1));
    assert_false(park_set_wake_one(&ps));
    /* 3 and 1 hold permits now: their waits return at once */
    park_set_wait(&ps, 3, 0);
    park_set_wait(&ps, 1, 0);
    park_set_idle_begin(&ps, 0);
    park_set_idle_begin(&ps, 2);
    park_set_wake_all(&ps);
    assert_int_equal(atomic_load(&ps.idle), 0);
    park_set_wait(&ps, 0, 0);
    park_set_wait(&ps, 2, 0);
}

/* A scheduler goes idle (begin, re-check the counter, wait) while a producer bumps the
 * counter and wakes one; any lost wake-up leaves the scheduler asleep for good. */
#define NOLOST_ROUNDS 100000u

typedef struct nolost {
    park_set ps;
    _Atomic uint32_t counter; /* the "run queue" */
    _Atomic uint32_t ack;
    _Atomic int stop;
    _Atomic int lost;
} nolost;

static void *nolost_sched(void *arg)
{
    nolost *n = arg;
    for (uint32_t r = 1; r <= NOLOST_ROUNDS && !atomic_load(&n->stop); r++) {
        for (;;) {
            if (atomic_load_explicit(&n->counter, memory_order_relaxed) >= r)
                break;
            park_set_idle_begin(&n->ps, 0);
            if (atomic_load_explicit(&n->counter, memory_order_relaxed) >= r) {
                park_set_idle_cancel(&n->ps, 0);
                break;
            }
            park_set_wait(&n->ps, 0, 0);
            if (atomic_load(&n->stop))
                return NULL;
        }
        atomic_store_explicit(&n->ack, r, memory_order_release);
    }
    return NULL;
}

static void *nolost_producer(void *arg)
{
    nolost *n = arg;
    for (uint32_t r = 1; r <= NOLOST_ROUNDS; r++) {
        /* relaxed: the only ordering the protocol may rely on is wake_one's own fence */
        atomic_store_explicit(&n->counter, r, memory_order_relaxed);
        park_set_wake_one(&n->ps);
        uint64_t deadline = park_now_ns() + 10000000000u;
        unsigned spins = 0;
        while (atomic_load_explicit(&n->ack, memory_order_acquire) != r) {
            if (++spins % 128 == 0) {
                sched_yield();
                if (park_now_ns() > deadline) {
                    atomic_store(&n->lost, 1);
                    return NULL;
                }
            }
        }
    }
    return NULL;
}

static void idle_protocol_loses_no_wakeup(void **state)
{
    (void)state;
    static nolost n;
    park_set_init(&n.ps, 1, NULL);
    pthread_t s, p;
    pthread_create(&s, NULL, nolost_sched, &n);
    pthread_create(&p, NULL, nolost_producer, &n);
    pthread_join(p, NULL); /* bounded: the producer gives up after 10 s without an ack */
    if (atomic_load(&n.lost)) {
        atomic_store(&n.stop, 1);
        parker_unpark(&n.ps.parkers[0]);
    }
    pthread_join(s, NULL);
    assert_int_equal(atomic_load(&n.lost), 0);
    assert_int_equal(atomic_load(&n.ack), NOLOST_ROUNDS);
}

/* Two wakers race for one idle scheduler: exactly one wins, and it is woken once. */
typedef struct duel {
    park_set ps;
    _Atomic int go;
    _Atomic int ready;
    _Atomic int wins;
} duel;

static void *duel_waker(void *arg)
{
    duel *d = arg;
    atomic_fetch_add(&d->ready, 1);
    while (!atomic_load(&d->go))
        sched_yield(); /* 3 threads may share 2 CPUs */
    if (park_set_wake_one(&d->ps))
        atomic_fetch_add(&d->wins, 1);
    return NULL;
}

static void two_wake_ones_wake_a_single_idle_scheduler_once(void **state)
{
    (void)state;
    static duel d;
    for (int round = 0; round < 2000; round++) {
        park_set_init(&d.ps, 2, NULL);
        atomic_store(&d.go, 0);
        atomic_store(&d.ready, 0);
        atomic_store(&d.wins, 0);
        park_set_idle_begin(&d.ps, 1);
        pthread_t a, b;
        pthread_create(&a, NULL, duel_waker, &d);
        pthread_create(&b, NULL, duel_waker, &d);
        while (atomic_load(&d.ready) < 2)
            sched_yield();
        atomic_store(&d.go, 1);
        park_set_wait(&d.ps, 1, 0); /* returns once woken (the alarm bounds it) */
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        assert_int_equal(atomic_load(&d.wins), 1);
        assert_int_equal(atomic_load(&d.ps.idle), 0);
        /* one unpark only: no permit is left over for the next park */
        assert_int_equal(atomic_load(&d.ps.parkers[1].state), 0);
    }
}

/* Ping-pong between two parkers: each round trip is two unparks and two parks. */
#define PP_ROUNDS 100000

static parker pp_a, pp_b;

static void *pp_peer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PP_ROUNDS; i++) {
        parker_park(&pp_b, 0);
        parker_unpark(&pp_a);
    }
    return NULL;
}

static void bench_park_unpark_round_trip(void **state)
{
    (void)state;
    parker_init(&pp_a);
    parker_init(&pp_b);
    pthread_t t;
    pthread_create(&t, NULL, pp_peer, NULL);
    uint64_t t0 = park_now_ns();
    for (int i = 0; i < PP_ROUNDS; i++) {
        parker_unpark(&pp_b);
        parker_park(&pp_a, 0);
    }
    uint64_t ns = park_now_ns() - t0;
    pthread_join(t, NULL);
    print_message("parker: %.0f ns per unpark->park round trip between two threads\n",
                  (double)ns / PP_ROUNDS);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unpark_before_park_returns_at_once),
        cmocka_unit_test(deadline_park_returns_after_the_deadline),
        cmocka_unit_test(wake_one_with_nobody_idle_returns_false),
        cmocka_unit_test(idle_protocol_loses_no_wakeup),
        cmocka_unit_test(two_wake_ones_wake_a_single_idle_scheduler_once),
        cmocka_unit_test(bench_park_unpark_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
