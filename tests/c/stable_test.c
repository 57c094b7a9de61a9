/* Tests of the shared tables' store (core/stable.c): set semantics, growth, counters, and
 * threads reading and writing one table at once, including while its owner dies (ASan
 * reports a use after free or a leak, TSan a race). Owners are host actors of a started
 * runtime; readers and writers are plain threads, as the schedulers are to the store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/wire.h"
#include "core/stable.h"
#include "smarm.h"

static smarm_runtime *start_rt(void)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 2;
    cfg.max_actors = 1024;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    return rt;
}

static void stop_rt(smarm_runtime *rt)
{
    int status = -1;
    assert_int_equal(smarm_stop(rt, 1.0, &status), 0);
    smarm_runtime_free(rt);
}

/* A new public table called name, owned by host actor h (no heir). */
static stab *public_table(smarm_runtime *rt, smarm_host *h, const char *name)
{
    stab *t = NULL;
    assert_int_equal(stab_new(rt, name, smarm_host_pid(h), STAB_PUBLIC, 0, &t), STAB_OK);
    return t;
}

static stab_blob *blob_str(const char *s) { return stab_blob_new(s, strlen(s)); }

static stab_blob *blob_fmt(const char *fmt, long a, long b)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, fmt, a, b);
    return stab_blob_new(buf, (size_t)n);
}

static void set_semantics_growth_and_counters(void **state)
{
    (void)state;
    smarm_runtime *rt = start_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    stab *t = public_table(rt, h, "t1");
    stab *dup = NULL;
    assert_int_equal(stab_new(rt, "t1", smarm_host_pid(h), STAB_PUBLIC, 0, &dup), STAB_EXISTS);
    assert_int_equal(stab_new(rt, "t2", 12345, STAB_PUBLIC, 0, &dup), STAB_NOOWNER);

    for (long i = 0; i < 10000; i++)
        assert_int_equal(stab_insert(t, blob_fmt("k%ld", i, 0), blob_fmt("v%ld", i, 0)), STAB_OK);
    assert_int_equal(stab_insert(t, blob_str("k7"), blob_str("seven")), STAB_OK);
    assert_int_equal(stab_size(t), 10000);
    stab_blob *v = stab_lookup(t, "k7", 2);
    assert_non_null(v);
    assert_memory_equal(v->data, "seven", 5);
    stab_blob_release(v);
    v = stab_lookup(t, "k9999", 5);
    assert_non_null(v);
    assert_memory_equal(v->data, "v9999", 5);
    stab_blob_release(v);
    assert_null(stab_lookup(t, "nope", 4));
    assert_int_equal(stab_delete(t, "k7", 2), 1);
    assert_int_equal(stab_delete(t, "k7", 2), 0);
    assert_int_equal(stab_size(t), 9999);
    assert_true(stab_memory(t) > 9999 * 10);

    double out = 0;
    assert_int_equal(stab_update_counter(t, "c", 1, 1, 0, 0, &out), 1);
    assert_int_equal(stab_update_counter(t, "c", 1, 2, 1, 40, &out), STAB_OK);
    assert_true(out == 42);
    assert_int_equal(stab_update_counter(t, "c", 1, -2, 0, 0, &out), STAB_OK);
    assert_true(out == 40);
    assert_int_equal(stab_update_counter(t, "k1", 2, 1, 0, 0, &out), STAB_NOTNUM);
    /* A counter nothing else holds is written over where it lies; a value a reader holds is
     * replaced instead, and the reader's copy keeps its number. */
    stab_blob *held = stab_lookup(t, "c", 1);
    uint64_t bytes = stab_memory(t);
    assert_int_equal(stab_update_counter(t, "c", 1, 5, 0, 0, &out), STAB_OK);
    assert_true(out == 45);
    assert_int_equal(stab_memory(t), bytes); /* a double replaced by a double */
    double was;
    memcpy(&was, held->data + 1, 8);
    assert_true(was == 40);
    stab_blob *now = stab_lookup(t, "c", 1);
    assert_ptr_not_equal(now, held);
    stab_blob_release(held);
    stab_blob_release(now); /* the table's reference alone is left */
    assert_int_equal(stab_update_counter(t, "c", 1, 1, 0, 0, &out), STAB_OK);
    stab_blob *same = stab_lookup(t, "c", 1);
    assert_ptr_equal(same, now);
    memcpy(&was, same->data + 1, 8);
    assert_true(was == 46 && out == 46);
    stab_blob_release(same);
    /* a counter stored as a small integer becomes a double at its first update */
    char seven = (char)(WIRE_FIXINT + 7);
    assert_int_equal(stab_insert(t, blob_str("i"), stab_blob_new(&seven, 1)), STAB_OK);
    bytes = stab_memory(t);
    assert_int_equal(stab_update_counter(t, "i", 1, 1, 0, 0, &out), STAB_OK);
    assert_int_equal(stab_memory(t), bytes + 8); /* one byte's integer, nine bytes' double */
    stab_blob *grown = stab_lookup(t, "i", 1);
    assert_true(out == 8 && grown->len == 9 && (unsigned char)grown->data[0] == WIRE_DOUBLE);
    stab_blob_release(grown);

    stab_blob **all;
    size_t n;
    assert_int_equal(stab_snapshot(t, &all, &n), STAB_OK);
    assert_int_equal(n, 10001); /* with "i" */
    for (size_t i = 0; i < 2 * n; i++)
        stab_blob_release(all[i]);
    free(all);

    assert_ptr_equal(stab_open(rt, "t1"), t);
    stab_release(t);     /* stab_open's reference */
    smarm_host_close(h); /* the owner dies: the table is deleted */
    assert_true(stab_dead(t));
    assert_null(stab_open(rt, "t1"));
    assert_null(stab_lookup(t, "k1", 2));
    assert_int_equal(stab_insert(t, blob_str("x"), blob_str("y")), STAB_DEAD);
    assert_int_equal(stab_size(t), 0);
    stab_release(t);
    stab_release(NULL);
    stop_rt(rt);
}

static void passes_to_a_live_heir_once(void **state)
{
    (void)state;
    smarm_runtime *rt = start_rt();
    smarm_host *a = smarm_host_open(rt), *b = smarm_host_open(rt);
    stab *t = NULL;
    assert_int_equal(
        stab_new(rt, "inherited", smarm_host_pid(a), STAB_PROTECTED, smarm_host_pid(b), &t),
        STAB_OK);
    assert_int_equal(stab_insert(t, blob_str("k"), blob_str("v")), STAB_OK);
    smarm_host_close(a);
    assert_int_equal(stab_owner(t), smarm_host_pid(b));
    assert_int_equal(stab_size(t), 1);
    assert_ptr_equal(stab_open(rt, "inherited"), t);
    stab_release(t);
    smarm_host_close(b); /* no heir of its own: deleted */
    assert_true(stab_dead(t));
    assert_null(stab_open(rt, "inherited"));
    stab_release(t);
    stop_rt(rt);
}

/* A lookup copies a value of at most cap bytes into the caller's buffer and holds nothing
 * (the blob's count is the table's alone, so a counter is still written over in place); a
 * longer value comes back retained; an absent key or a dead table reads STAB_ABSENT. */
static void small_values_are_copied(void **state)
{
    (void)state;
    smarm_runtime *rt = start_rt();
    smarm_host *h = smarm_host_open(rt);
    stab *t = public_table(rt, h, "copies");
    assert_int_equal(stab_insert(t, blob_str("s"), blob_str("hello")), STAB_OK);
    char buf[16] = {0};
    size_t len = 0;
    assert_null(stab_lookup_small(t, "s", 1, buf, sizeof buf, &len));
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    memset(buf, 0, sizeof buf);
    assert_null(stab_lookup_small(t, "s", 1, buf, 5, &len)); /* exactly cap bytes */
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);
    memset(buf, 0, sizeof buf);
    stab_blob *v = stab_lookup_small(t, "s", 1, buf, 4, &len); /* one byte more than cap */
    assert_non_null(v);
    assert_int_equal(len, 5);
    assert_int_equal(v->len, 5);
    assert_memory_equal(v->data, "hello", 5);
    assert_int_equal(buf[0], 0); /* nothing copied */
    assert_int_equal(atomic_load(&v->refs), 2);
    stab_blob_release(v);
    assert_null(stab_lookup_small(t, "nope", 4, buf, sizeof buf, &len));
    assert_true(len == STAB_ABSENT);

    double out;
    assert_int_equal(stab_update_counter(t, "c", 1, 1, 1, 0, &out), STAB_OK);
    stab_blob *before = stab_lookup(t, "c", 1);
    stab_blob_release(before);
    assert_null(stab_lookup_small(t, "c", 1, buf, sizeof buf, &len));
    assert_int_equal(len, 9);
    assert_int_equal((unsigned char)buf[0], WIRE_DOUBLE);
    assert_int_equal(stab_update_counter(t, "c", 1, 1, 0, 0, &out), STAB_OK);
    stab_blob *after = stab_lookup(t, "c", 1);
    assert_ptr_equal(after, before); /* written over where it lies */
    double was, now;
    memcpy(&was, buf + 1, 8);
    memcpy(&now, after->data + 1, 8);
    assert_true(was == 1 && now == 2 && out == 2);
    stab_blob_release(after);

    smarm_host_close(h); /* the owner dies: the table is deleted */
    assert_null(stab_lookup_small(t, "s", 1, buf, sizeof buf, &len));
    assert_true(len == STAB_ABSENT);
    stab_release(t);
    stop_rt(rt);
}

/* ---- threads at one table ---- */

#define KEYS 512
#define WRITES 20000
#define READS 50000

typedef struct crowd {
    stab *t;
    long id;
    _Atomic int *stop;
    long found, gone;
    double count; /* the last count a reader saw */
} crowd;

/* Values of key k are "k:version": a reader checks it got one of k's own. */
static void *writer(void *p)
{
    crowd *c = p;
    double out;
    for (long i = 0; i < WRITES; i++) {
        long k = (i * 7 + c->id) % KEYS;
        char key[32];
        int n = snprintf(key, sizeof key, "%ld", k);
        if (i % 3 == 0)
            stab_delete(c->t, key, (size_t)n);
        else
            stab_insert(c->t, stab_blob_new(key, (size_t)n), blob_fmt("%ld:%ld", k, i));
        stab_update_counter(c->t, "count", 5, 1, 1, 0, &out);
    }
    return NULL;
}

static void *reader(void *p)
{
    crowd *c = p;
    for (long i = 0; i < READS && !atomic_load(c->stop); i++) {
        long k = (i * 13 + c->id) % KEYS;
        char key[32], want[32];
        int n = snprintf(key, sizeof key, "%ld", k);
        int w = snprintf(want, sizeof want, "%ld:", k);
        /* the writers' counter never goes back, and a copy a reader holds never changes */
        stab_blob *cv = stab_lookup(c->t, "count", 5);
        if (cv) {
            double seen, again;
            memcpy(&seen, cv->data + 1, 8);
            assert_true(seen >= c->count);
            c->count = seen;
            memcpy(&again, cv->data + 1, 8);
            assert_true(again == seen);
            stab_blob_release(cv);
        }
        /* a copy taken while the writers update the counter where it lies */
        char num[16];
        size_t nlen;
        if (!stab_lookup_small(c->t, "count", 5, num, sizeof num, &nlen) && nlen == 9) {
            double seen;
            memcpy(&seen, num + 1, 8);
            assert_true(seen >= c->count && seen == (double)(long)seen);
            c->count = seen;
        }
        /* every other read copies the value under the read lock, while writers replace it */
        char copy[32];
        size_t len;
        stab_blob *v = i % 2 ? stab_lookup(c->t, key, (size_t)n)
                             : stab_lookup_small(c->t, key, (size_t)n, copy, sizeof copy, &len);
        if (v) {
            assert_true(v->len > (uint32_t)w && memcmp(v->data, want, (size_t)w) == 0);
            stab_blob_release(v);
            c->found++;
        } else if (i % 2 == 0 && len != STAB_ABSENT) {
            assert_true(len > (size_t)w && len <= sizeof copy &&
                        memcmp(copy, want, (size_t)w) == 0);
            c->found++;
        } else if (stab_dead(c->t)) {
            c->gone++;
            break;
        }
        if (i % 1000 == 0) {
            stab_blob **all;
            size_t m;
            if (stab_snapshot(c->t, &all, &m) == STAB_OK) {
                for (size_t j = 0; j < 2 * m; j++)
                    stab_blob_release(all[j]);
                free(all);
            }
        }
    }
    return NULL;
}

static void readers_and_writers_on_many_threads(void **state)
{
    (void)state;
    smarm_runtime *rt = start_rt();
    smarm_host *h = smarm_host_open(rt);
    stab *t = public_table(rt, h, "crowd");
    _Atomic int stop = 0;
    crowd cs[5];
    pthread_t th[5];
    for (int i = 0; i < 5; i++) {
        cs[i] = (crowd){stab_open(rt, "crowd"), i, &stop, 0, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, i < 2 ? writer : reader, &cs[i]), 0);
    }
    for (int i = 0; i < 5; i++)
        pthread_join(th[i], NULL);
    stab_blob *v = stab_lookup(t, "count", 5);
    assert_non_null(v);
    double count;
    assert_int_equal((unsigned char)v->data[0], WIRE_DOUBLE);
    memcpy(&count, v->data + 1, 8);
    assert_true(count == 2 * WRITES);
    stab_blob_release(v);
    for (int i = 0; i < 5; i++)
        stab_release(cs[i].t);
    stab_release(t);
    smarm_host_close(h);
    stop_rt(rt);
}

static void owner_dies_during_lookups(void **state)
{
    (void)state;
    smarm_runtime *rt = start_rt();
    for (int round = 0; round < 20; round++) {
        smarm_host *h = smarm_host_open(rt);
        stab *t = public_table(rt, h, "doomed");
        for (long k = 0; k < KEYS; k++) {
            char key[32];
            int n = snprintf(key, sizeof key, "%ld", k);
            stab_insert(t, stab_blob_new(key, (size_t)n), blob_fmt("%ld:%ld", k, 0));
        }
        _Atomic int stop = 0;
        crowd cs[3];
        pthread_t th[3];
        for (int i = 0; i < 3; i++) {
            cs[i] = (crowd){stab_open(rt, "doomed"), i, &stop, 0, 0, 0};
            assert_int_equal(pthread_create(&th[i], NULL, reader, &cs[i]), 0);
        }
        stab_release(t);
        smarm_host_close(h); /* deletes the table under the readers */
        for (int i = 0; i < 3; i++) {
            pthread_join(th[i], NULL);
            assert_true(stab_dead(cs[i].t));
            stab_release(cs[i].t); /* the last reference frees it */
        }
    }
    stop_rt(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(set_semantics_growth_and_counters),
        cmocka_unit_test(passes_to_a_live_heir_once),
        cmocka_unit_test(small_values_are_copied),
        cmocka_unit_test(readers_and_writers_on_many_threads),
        cmocka_unit_test(owner_dies_during_lookups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
