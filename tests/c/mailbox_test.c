/* Tests of the per-actor inbox: FIFO order, tenancy (closed and stale generations),
 * freeing on close, and many producers against one owner losing and duplicating nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mailbox.h"

static msg *msg_u64(uint64_t v) { return msg_new(&v, sizeof v); }

static uint64_t msg_val(const msg *m)
{
    uint64_t v;
    assert_int_equal(m->len, sizeof v);
    memcpy(&v, m->data, sizeof v);
    return v;
}

static void one_producer_pops_in_fifo_order(void **state)
{
    (void)state;
    mailbox mb = {0};
    mailbox_open(&mb, 1);
    assert_null(mailbox_pop(&mb));
    assert_false(mailbox_nonempty(&mb));
    /* interleave pushes and pops so messages sit in both the shared and private lists */
    uint64_t next_in = 0, next_out = 0;
    for (int round = 0; round < 100; round++) {
        for (int k = 0; k < round % 7 + 1; k++)
            assert_int_equal(mailbox_push(&mb, 1, msg_u64(next_in++)), 0);
        for (int k = 0; k < round % 5 + 1 && next_out < next_in; k++) {
            assert_true(mailbox_nonempty(&mb));
            msg *m = mailbox_pop(&mb);
            assert_non_null(m);
            assert_int_equal(msg_val(m), next_out++);
            msg_free(m);
        }
    }
    while (next_out < next_in) {
        msg *m = mailbox_pop(&mb);
        assert_non_null(m);
        assert_int_equal(msg_val(m), next_out++);
        msg_free(m);
    }
    assert_null(mailbox_pop(&mb));
    assert_int_equal(mailbox_depth(&mb), 0);
    mailbox_close(&mb);
}

static void push_to_closed_or_stale_generation_fails_and_leaves_msg(void **state)
{
    (void)state;
    mailbox mb = {0};
    /* never opened: gen 0 is closed, and gen 0 itself is never accepted */
    msg *m = msg_u64(42);
    assert_int_equal(mailbox_push(&mb, 0, m), -1);
    assert_int_equal(mailbox_push(&mb, 1, m), -1);

    mailbox_open(&mb, 7);
    assert_int_equal(mailbox_push(&mb, 6, m), -1); /* stale */
    assert_int_equal(mailbox_push(&mb, 8, m), -1); /* not yet */
    assert_int_equal(mailbox_push(&mb, 0, m), -1);
    assert_null(mailbox_pop(&mb));
    mailbox_close(&mb);
    assert_int_equal(mailbox_push(&mb, 7, m), -1); /* closed */
    /* the message is still the caller's, intact */
    assert_int_equal(msg_val(m), 42);
    msg_free(m);
}

static void close_frees_queued_messages(void **state)
{
    (void)state;
    mailbox mb = {0};
    mailbox_open(&mb, 3);
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(mailbox_push(&mb, 3, msg_new("0123456789abcdef", 16)), 0);
    /* one pop moves the batch to the private list; push more into the shared list */
    msg *m = mailbox_pop(&mb);
    assert_non_null(m);
    msg_free(m);
    for (uint64_t i = 0; i < 10; i++)
        assert_int_equal(mailbox_push(&mb, 3, msg_u64(i)), 0);
    assert_int_equal(mailbox_depth(&mb), 19);
    mailbox_close(&mb); /* LeakSanitizer (asan flavour) checks these 19 are freed */
    assert_int_equal(mailbox_depth(&mb), 0);
    assert_null(mb.priv);
    assert_null(mb.head);
}

static void reopen_with_new_generation_starts_empty(void **state)
{
    (void)state;
    mailbox mb = {0};
    mailbox_open(&mb, 1);
    for (uint64_t i = 0; i < 5; i++)
        assert_int_equal(mailbox_push(&mb, 1, msg_u64(i)), 0);
    msg *m = mailbox_pop(&mb);
    msg_free(m);
    assert_int_equal(mailbox_push(&mb, 1, msg_u64(99)), 0);
    mailbox_close(&mb);
    mailbox_open(&mb, 2);
    assert_false(mailbox_nonempty(&mb));
    assert_null(mailbox_pop(&mb));
    assert_int_equal(mailbox_depth(&mb), 0);
    m = msg_u64(5);
    assert_int_equal(mailbox_push(&mb, 1, m), -1); /* the old tenancy's sender */
    msg_free(m);
    assert_int_equal(mailbox_push(&mb, 2, msg_u64(1000)), 0);
    m = mailbox_pop(&mb);
    assert_non_null(m);
    assert_int_equal(msg_val(m), 1000);
    msg_free(m);
    assert_null(mailbox_pop(&mb));
    mailbox_close(&mb);
}

#define PRODUCERS 2
#define PER_PRODUCER 200000

typedef struct mpsc {
    mailbox mb;
    _Atomic int go;
    int id;
} mpsc;

typedef struct producer_arg {
    mpsc *q;
    uint64_t id;
} producer_arg;

static void *producer(void *p)
{
    producer_arg *pa = p;
    while (!atomic_load(&pa->q->go))
        ;
    for (uint64_t seq = 0; seq < PER_PRODUCER; seq++) {
        msg *m = msg_u64(pa->id << 32 | seq);
        if (!m || mailbox_push(&pa->q->mb, 5, m) != 0)
            abort();
    }
    return NULL;
}

typedef struct consumer_result {
    mpsc *q;
    uint64_t got;
    uint64_t next[PRODUCERS];
    int bad;
} consumer_result;

static void *consumer(void *p)
{
    consumer_result *r = p;
    while (!atomic_load(&r->q->go))
        ;
    while (r->got < (uint64_t)PRODUCERS * PER_PRODUCER) {
        msg *m = mailbox_pop(&r->q->mb);
        if (!m)
            continue;
        uint64_t v;
        memcpy(&v, m->data, sizeof v);
        msg_free(m);
        uint64_t id = v >> 32, seq = v & 0xffffffffu;
        /* each producer's messages arrive in order, each exactly once */
        if (id >= PRODUCERS || seq != r->next[id])
            r->bad++;
        else
            r->next[id]++;
        r->got++;
    }
    return NULL;
}

static void two_producers_one_consumer_deliver_each_once_in_order(void **state)
{
    (void)state;
    mpsc q = {0};
    mailbox_open(&q.mb, 5);
    pthread_t prod[PRODUCERS], cons;
    producer_arg pa[PRODUCERS];
    consumer_result r = {.q = &q};
    assert_int_equal(pthread_create(&cons, NULL, consumer, &r), 0);
    for (int i = 0; i < PRODUCERS; i++) {
        pa[i] = (producer_arg){&q, (uint64_t)i};
        assert_int_equal(pthread_create(&prod[i], NULL, producer, &pa[i]), 0);
    }
    atomic_store(&q.go, 1);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i], NULL);
    pthread_join(cons, NULL);
    assert_int_equal(r.bad, 0);
    assert_int_equal(r.got, (uint64_t)PRODUCERS * PER_PRODUCER);
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(r.next[i], PER_PRODUCER);
    assert_null(mailbox_pop(&q.mb));
    assert_int_equal(mailbox_depth(&q.mb), 0);
    mailbox_close(&q.mb);
}

/* Selective receive's cursor: a scan leaves what it passes queued in order, takes one from
 * the middle, sees messages pushed while it scans, and a mark skips what came before it. */
static void scan_takes_from_the_middle_and_mark_skips_older(void **state)
{
    (void)state;
    mailbox mb = {0};
    mailbox_open(&mb, 1);
    for (uint64_t i = 1; i <= 4; i++)
        assert_int_equal(mailbox_push(&mb, 1, msg_u64(i)), 0);
    mailbox_scan_begin(&mb, 0);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 1);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 2);
    msg *two = mailbox_scan_take(&mb);
    assert_int_equal(msg_val(two), 2);
    msg_free(two);
    assert_null(mailbox_scan_take(&mb)); /* one take per next */
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 3);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 4);
    assert_null(mailbox_scan_next(&mb));
    assert_false(mailbox_scan_ready(&mb));
    /* a push while the scan waits is found after the last one it saw */
    assert_int_equal(mailbox_push(&mb, 1, msg_u64(5)), 0);
    assert_true(mailbox_scan_ready(&mb));
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 5);
    msg *five = mailbox_scan_take(&mb);
    msg_free(five);
    assert_false(mailbox_scan_stale(&mb));

    /* a mark: the scan starts after 4 (the tail when it was made) */
    uint32_t mark = mailbox_mark(&mb);
    assert_int_equal(mailbox_push(&mb, 1, msg_u64(6)), 0);
    mailbox_scan_begin(&mb, mark);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 6);
    msg_free(mailbox_scan_take(&mb));
    /* the mark's own message taken: the mark moves back, still skipping older ones */
    mailbox_scan_begin(&mb, 0);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 1);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 3);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 4);
    msg_free(mailbox_scan_take(&mb));
    assert_int_equal(mailbox_push(&mb, 1, msg_u64(7)), 0);
    mailbox_scan_begin(&mb, mark);
    assert_int_equal(msg_val(mailbox_scan_next(&mb)), 7);
    /* a plain pop makes the scan stale */
    msg *one = mailbox_pop(&mb);
    assert_int_equal(msg_val(one), 1);
    msg_free(one);
    assert_true(mailbox_scan_stale(&mb));
    /* what is left, in order */
    msg *m = mailbox_pop(&mb);
    assert_int_equal(msg_val(m), 3);
    msg_free(m);
    m = mailbox_pop(&mb);
    assert_int_equal(msg_val(m), 7);
    msg_free(m);
    assert_null(mailbox_pop(&mb));
    assert_int_equal(mailbox_depth(&mb), 0);
    mailbox_close(&mb);
}

/* Small nodes are reused from a list per thread: whatever sizes come and go, from whichever
 * thread, each message keeps its own bytes (and the sanitizers see no leak when the threads
 * end with nodes on their lists). */
#define SIZES_N 2000

static void fill(char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(seed * 31 + i);
}

static void *free_all(void *p)
{
    msg **ms = p;
    for (int i = 0; i < SIZES_N; i++)
        msg_free(ms[i]);
    return NULL;
}

static void small_and_large_nodes_keep_their_bytes_across_threads(void **state)
{
    (void)state;
    static msg *ms[SIZES_N];
    char b[200], extra[8] = "name";
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < SIZES_N; i++) {
            size_t n = (size_t)(i * 7 + round) % sizeof b;
            fill(b, n, (unsigned)i);
            ms[i] = i % 5 == 0 ? msg_new_extra(b, n, extra, 5) : msg_new(b, n);
            assert_non_null(ms[i]);
        }
        for (int i = 0; i < SIZES_N; i++) {
            size_t n = (size_t)(i * 7 + round) % sizeof b;
            fill(b, n, (unsigned)i);
            assert_int_equal(ms[i]->len, n);
            assert_int_equal(ms[i]->cache, 0);
            assert_null(ms[i]->next);
            assert_memory_equal(ms[i]->data, b, n);
            if (i % 5 == 0)
                assert_string_equal(ms[i]->data + n, "name");
        }
        if (round == 1) {
            /* freed on another thread, which ends holding nodes */
            pthread_t t;
            assert_int_equal(pthread_create(&t, NULL, free_all, ms), 0);
            assert_int_equal(pthread_join(t, NULL), 0);
        } else {
            free_all(ms);
        }
    }
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_producer_pops_in_fifo_order),
        cmocka_unit_test(push_to_closed_or_stale_generation_fails_and_leaves_msg),
        cmocka_unit_test(close_frees_queued_messages),
        cmocka_unit_test(reopen_with_new_generation_starts_empty),
        cmocka_unit_test(two_producers_one_consumer_deliver_each_once_in_order),
        cmocka_unit_test(scan_takes_from_the_middle_and_mark_skips_older),
        cmocka_unit_test(small_and_large_nodes_keep_their_bytes_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
