/* Tests of the timers: due entries in deadline order, nothing early, the earliest-deadline
 * snapshot, a million timers, concurrent arming, send timers (cancel before / after the
 * fire, and cancel racing the fire: exactly one wins), and the run that takes entries armed
 * in deadline order beside the heap (interleaved with it, wrapping and growing, compacted). */
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

#include "base/mailbox.h"
#include "base/timer.h"

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
    assert_int_equal(timers_pending(&t), 2 * PER_THREAD);
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

static void cancel_before_fire_takes_the_message_back(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    uint64_t id1, id2;
    msg *m1 = msg_new("a", 1), *m2 = msg_new("b", 1);
    assert_true(timers_arm_send(&t, 100, 7, m1, &id1) >= 0);
    assert_true(timers_arm_send(&t, 200, 8, m2, &id2) >= 0);
    assert_true(id1 != 0 && id2 != 0 && id1 != id2);
    assert_ptr_equal(timers_cancel(&t, id1), m1); /* before its fire: the message back */
    msg_free(m1);
    assert_null(timers_cancel(&t, id1)); /* only once */
    timer_entry out[4];
    /* the cancelled entry is skipped; the other fires with its message and destination */
    assert_int_equal(timers_due(&t, 1000, out, 4), 1);
    assert_int_equal(out[0].id, id2);
    assert_int_equal(out[0].pid, 8);
    assert_ptr_equal(out[0].msg, m2);
    assert_null(timers_cancel(&t, id2)); /* after the fire */
    msg_free(m2);
    /* a pending send timer's message is freed with the timers */
    uint64_t id3;
    assert_true(timers_arm_send(&t, 5000, 9, msg_new("c", 1), &id3) >= 0);
    timers_destroy(&t);
}

#define RACE_N 200000

struct race {
    timers *t;
    uint64_t *ids;
    _Atomic uint32_t armed;
    _Atomic int done;
    uint32_t fired;
    uint8_t *outcome; /* per timer: 1 fired, 2 cancelled */
};

static void *race_firer(void *arg)
{
    struct race *r = arg;
    timer_entry out[64];
    for (;;) {
        int done = atomic_load_explicit(&r->done, memory_order_acquire);
        uint32_t n;
        while ((n = timers_due(r->t, UINT64_MAX - 1, out, 64)) > 0) {
            for (uint32_t i = 0; i < n; i++) {
                uint64_t idx = out[i].pid; /* the test stores the timer's index as its dest */
                assert_int_equal(r->outcome[idx], 0);
                r->outcome[idx] = 1;
                r->fired++;
                msg_free(out[i].msg);
            }
        }
        if (done)
            return NULL;
    }
}

static void cancel_racing_the_fire_wins_exactly_once(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    struct race r = {.t = &t};
    r.ids = calloc(RACE_N, sizeof *r.ids);
    r.outcome = calloc(RACE_N, 1);
    pthread_t th;
    pthread_create(&th, NULL, race_firer, &r);
    uint32_t cancelled = 0;
    for (uint32_t i = 0; i < RACE_N; i++) {
        /* due at once: the firer is draining concurrently */
        assert_true(timers_arm_send(&t, 1, i, msg_new("x", 1), &r.ids[i]) >= 0);
        if (i >= 3) {
            msg *m = timers_cancel(&t, r.ids[i - 3]);
            if (m) {
                /* the firer never saw this one (it would have been given the message) */
                r.outcome[i - 3] = 2;
                cancelled++;
                msg_free(m);
            }
        }
    }
    atomic_store_explicit(&r.done, 1, memory_order_release);
    pthread_join(th, NULL);
    uint32_t none = 0;
    for (uint32_t i = 0; i < RACE_N; i++)
        none += r.outcome[i] == 0;
    printf("[ info     ] race: %u fired, %u cancelled\n", r.fired, cancelled);
    assert_int_equal(none, 0);
    assert_int_equal(r.fired + cancelled, RACE_N);
    assert_true(cancelled > 0 && r.fired > 0);
    free(r.ids);
    free(r.outcome);
    timers_destroy(&t);
}

static void million_send_timers_arm_and_fire(void **state)
{
    (void)state;
    enum { N = 1000000 };
    timers t;
    timers_init(&t);
    uint64_t seed = 42, id;
    uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < N; i++)
        assert_true(timers_arm_send(&t, 1 + rnd(&seed) % 1000000000u, i, msg_new("m", 1), &id) >=
                    0);
    uint64_t t1 = now_ns();
    timer_entry out[256];
    uint32_t n, total = 0;
    uint64_t last = 0;
    while ((n = timers_due(&t, UINT64_MAX - 1, out, 256)) > 0) {
        for (uint32_t i = 0; i < n; i++) {
            assert_true(out[i].deadline >= last);
            last = out[i].deadline;
            msg_free(out[i].msg);
        }
        total += n;
    }
    uint64_t t2 = now_ns();
    assert_int_equal(total, N);
    printf("[ info     ] 1e6 send timers: arm %.0f ns each, fire %.0f ns each\n",
           (double)(t1 - t0) / N, (double)(t2 - t1) / N);
    timers_destroy(&t);
}

/* Cancelled sends leave the heap once they are half of it; the ones still
 * armed (and the wakes beside them) fire exactly, in order, untouched. */
static void cancelled_sends_are_dropped_before_their_deadline(void **state)
{
    (void)state;
    enum { N = 10000 };
    timers t;
    timers_init(&t);
    uint64_t seed = 7, ids[N];
    for (uint32_t i = 0; i < N; i++)
        assert_true(
            timers_arm_send(&t, 1000 + rnd(&seed) % 1000000u, i, msg_new("m", 1), &ids[i]) >= 0);
    for (uint32_t i = 0; i < 100; i++)
        assert_true(timers_arm(&t, 1000 + rnd(&seed) % 1000000u, 1000000 + i) >= 0);
    /* cancel all but every tenth send */
    for (uint32_t i = 0; i < N; i++) {
        if (i % 10 == 0)
            continue;
        void *m = timers_cancel(&t, ids[i]);
        assert_non_null(m);
        msg_free(m);
    }
    uint32_t left = timers_pending(&t);
    printf("[ info     ] %u entries left of %u after %u cancels\n", left, N + 100, N - N / 10);
    assert_true(left <= 2 * (N / 10 + 100));
    assert_true(timers_earliest(&t) >= 1000);
    timer_entry out[64];
    uint32_t n, sends = 0, wakes = 0;
    uint64_t last = 0;
    while ((n = timers_due(&t, UINT64_MAX - 1, out, 64)) > 0) {
        for (uint32_t i = 0; i < n; i++) {
            assert_true(out[i].deadline >= last);
            last = out[i].deadline;
            if (out[i].msg) {
                assert_int_equal(out[i].pid % 10, 0);
                sends++;
                msg_free(out[i].msg);
            } else {
                assert_true(out[i].pid >= 1000000);
                wakes++;
            }
        }
    }
    assert_int_equal(sends, N / 10);
    assert_int_equal(wakes, 100);
    assert_int_equal(timers_pending(&t), 0);
    timers_destroy(&t);
}

/* Drains everything due by now into a list of (deadline, pid); returns how many. */
static uint32_t drain(timers *t, uint64_t now, uint64_t *dl, uint64_t *pid, uint32_t cap)
{
    timer_entry out[5];
    uint32_t n = 0, k;
    while ((k = timers_due(t, now, out, 5)) > 0)
        for (uint32_t i = 0; i < k; i++) {
            assert_true(n < cap);
            if (out[i].msg)
                msg_free(out[i].msg);
            dl[n] = out[i].deadline;
            pid[n++] = out[i].pid;
        }
    return n;
}

static void entries_armed_in_order_take_the_run(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    /* same-duration sleeps: in deadline order, ties included; none goes to the heap */
    for (uint64_t i = 0; i < 1000; i++)
        assert_true(timers_arm(&t, 1000 + i / 3, i) >= 0);
    assert_int_equal(t.len, 0);
    assert_int_equal(t.rlen, 1000);
    assert_int_equal(timers_pending(&t), 1000);
    assert_int_equal(timers_earliest(&t), 1000);
    static uint64_t dl[2000], pid[2000];
    /* nothing early; then the first half in order (deadlines up to 1,166: i up to 500),
     * the ties in arming order */
    assert_int_equal(drain(&t, 999, dl, pid, 2000), 0);
    uint32_t n = drain(&t, 1166, dl, pid, 2000);
    assert_int_equal(n, 501);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(pid[i], i);
        assert_int_equal(dl[i], 1000 + i / 3);
    }
    assert_int_equal(timers_earliest(&t), 1167);
    timers_destroy(&t);
}

static void run_and_heap_interleave_in_deadline_order(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    uint64_t seed = 99;
    /* an increasing trend with early ones among them: some go to the run, the rest to the
     * heap; every pop must still be the earliest of all */
    uint64_t base = 10000;
    for (uint64_t i = 0; i < 5000; i++) {
        uint64_t d = (i % 7 == 3) ? 1 + rnd(&seed) % (base + i) : base + i * 2;
        int r = timers_arm(&t, d, i);
        assert_true(r >= 0);
    }
    assert_true(t.len > 0 && t.rlen > 0);
    static uint64_t dl[5000], pid[5000];
    assert_int_equal(drain(&t, UINT64_MAX - 1, dl, pid, 5000), 5000);
    for (uint32_t i = 1; i < 5000; i++)
        assert_true(dl[i] >= dl[i - 1]);
    assert_int_equal(timers_pending(&t), 0);
    assert_int_equal(timers_earliest(&t), UINT64_MAX);
    /* "became the earliest" over both: a run entry below the heap's head is, a tie is not */
    assert_int_equal(timers_arm(&t, 500, 1), 1); /* run */
    assert_int_equal(timers_arm(&t, 400, 2), 1); /* heap, earlier */
    assert_int_equal(timers_arm(&t, 600, 3), 0); /* run */
    assert_int_equal(timers_arm(&t, 400, 4), 0); /* heap, a tie */
    assert_int_equal(timers_earliest(&t), 400);
    assert_int_equal(drain(&t, 450, dl, pid, 5000), 2);
    assert_int_equal(timers_earliest(&t), 500);
    timers_destroy(&t);
}

static void the_run_wraps_and_grows_in_order(void **state)
{
    (void)state;
    timers t;
    timers_init(&t);
    static uint64_t dl[100000], pid[100000];
    uint64_t next = 1, want = 1;
    /* arm 48, pop 40, repeatedly: the ring's head goes round, and it grows past 64 */
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 48 + round; i++, next++)
            assert_true(timers_arm(&t, next, next) >= 0);
        uint32_t n = drain(&t, want + 39, dl, pid, 100000);
        assert_int_equal(n, 40);
        for (uint32_t i = 0; i < n; i++, want++)
            assert_int_equal(pid[i], want);
    }
    assert_int_equal(t.len, 0);
    uint32_t n = drain(&t, UINT64_MAX - 1, dl, pid, 100000);
    for (uint32_t i = 0; i < n; i++, want++)
        assert_int_equal(pid[i], want);
    assert_int_equal(want, next);
    timers_destroy(&t);
}

static void cancelled_sends_leave_the_run_in_order(void **state)
{
    (void)state;
    enum { N = 1000 };
    timers t;
    timers_init(&t);
    uint64_t ids[N];
    for (uint32_t i = 0; i < N; i++)
        assert_true(timers_arm_send(&t, 100 + i, i, msg_new("m", 1), &ids[i]) >= 0);
    assert_int_equal(t.rlen, N);
    /* cancel all but every fifth: past 64 cancels and half of the entries, a compaction */
    for (uint32_t i = 0; i < N; i++)
        if (i % 5) {
            void *m = timers_cancel(&t, ids[i]);
            assert_non_null(m);
            msg_free(m);
        }
    assert_true(timers_pending(&t) < N);
    static uint64_t dl[N], pid[N];
    uint32_t n = drain(&t, UINT64_MAX - 1, dl, pid, N);
    assert_int_equal(n, N / 5);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(pid[i], 5 * i);
    timers_destroy(&t);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(due_entries_come_out_in_deadline_order),
        cmocka_unit_test(nothing_is_due_before_its_deadline),
        cmocka_unit_test(earliest_snapshot_tracks_the_minimum),
        cmocka_unit_test(million_timers_drain_in_order),
        cmocka_unit_test(concurrent_arm_from_two_threads_loses_nothing),
        cmocka_unit_test(cancel_before_fire_takes_the_message_back),
        cmocka_unit_test(cancel_racing_the_fire_wins_exactly_once),
        cmocka_unit_test(million_send_timers_arm_and_fire),
        cmocka_unit_test(cancelled_sends_are_dropped_before_their_deadline),
        cmocka_unit_test(entries_armed_in_order_take_the_run),
        cmocka_unit_test(run_and_heap_interleave_in_deadline_order),
        cmocka_unit_test(the_run_wraps_and_grows_in_order),
        cmocka_unit_test(cancelled_sends_leave_the_run_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
