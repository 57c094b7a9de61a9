/* Tests of the actor heap allocator: class boundaries and alignment, fresh blocks
 * within as few cache lines as they can, realloc keeping contents, magazines moving
 * between threads through the depot without fresh memory, callers without a cache,
 * two threads churning at once, heap_owns, and a wire buffer made of heap blocks (run
 * under the tsan and asan flavours too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/heap.h"
#include "base/wire.h"

static void *alloc(heap *h, heap_cache *c, size_t n) { return heap_realloc(h, c, NULL, 0, n); }
static void release(heap *h, heap_cache *c, void *p, size_t n) { heap_realloc(h, c, p, n, 0); }

static void blocks_are_aligned_distinct_and_reused_last_freed_first(void **state)
{
    (void)state;
    heap h;
    heap_cache c = {0};
    heap_init(&h);
    static const size_t sizes[] = {1, 15, 16, 17, 255, 256, 257, 1024, 1025, 4095, 4096};
    void *p[sizeof sizes / sizeof *sizes];
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        p[i] = alloc(&h, &c, sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % 16, 0);
        memset(p[i], (int)i, sizes[i]); /* the whole size is usable */
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizes[i]; j++)
            assert_int_equal(((unsigned char *)p[i])[j], i);
    release(&h, &c, p[3], 17);
    assert_ptr_equal(alloc(&h, &c, 30), p[3]); /* same class (17..32) */
    heap_cache_flush(&h, &c);
    heap_destroy(&h);
}

/* Fresh blocks lie in as few cache lines as their size allows (a 64-byte block in one line,
 * a 32-byte one never across two), with or without a cache, and the gap an alignment skips
 * is a block of its own class, handed out before fresh memory. */
static void fresh_blocks_do_not_straddle_lines_and_gaps_are_reused(void **state)
{
    (void)state;
    heap h;
    heap_cache c = {0};
    heap_init(&h);
    static const size_t sizes[] = {16, 64, 48, 32, 16, 128, 16, 96, 192, 320, 16, 64};
    for (int round = 0; round < 2; round++) {
        heap_cache *cache = round ? NULL : &c;
        for (int k = 0; k < 20; k++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
                size_t n = sizes[i], al = n & -n;
                uintptr_t p = (uintptr_t)alloc(&h, cache, n);
                assert_int_equal(p % (al > 64 ? 64 : al), 0);
            }
    }
    heap_cache_flush(&h, &c);
    heap_destroy(&h);
    /* in a fresh heap: a 16-byte block at a chunk's start (16 bytes past a line: the
     * chunk's link is before it), with a run of 32 more carved behind it into the empty
     * magazine (512 bytes: CARVE_BYTES), handed out next in address order; then a 64-byte
     * block at the next line after the run; the 32 bytes between come back as the next
     * 32-byte block, not as fresh memory */
    heap_init(&h);
    heap_cache d = {0};
    char *a = alloc(&h, &d, 16);
    assert_int_equal((uintptr_t)a % 64, 16);
    assert_int_equal(d.mag[heap_class_of(16)].ncur, 32);
    char *b = alloc(&h, &d, 64);
    assert_ptr_equal(b, a + 16 + 512 + 32);
    assert_ptr_equal(alloc(&h, &d, 32), a + 16 + 512);
    for (int i = 1; i <= 32; i++)
        assert_ptr_equal(alloc(&h, &d, 16), a + 16 * i);
    heap_cache_flush(&h, &d);
    heap_destroy(&h);
}

/* The class table follows heap.h's steps (16 bytes to 256, 64 to 1024, 256 to 4096) at
 * every size, and a size of 0 or past HEAP_MAX_SMALL takes no magazine (it wraps past the
 * table, or lies beyond it). */
static void class_table_matches_the_classes_and_bounds_the_fast_paths(void **state)
{
    (void)state;
    for (size_t n = 1; n <= HEAP_MAX_SMALL; n++) {
        unsigned want = n <= 256    ? (unsigned)((n - 1) >> 4)
                        : n <= 1024 ? 16 + (unsigned)((n - 257) >> 6)
                                    : 28 + (unsigned)((n - 1025) >> 8);
        assert_int_equal(heap_class_of(n), want);
    }
    assert_int_equal(heap_class_of(HEAP_MAX_SMALL), HEAP_CLASSES - 1);
    heap h;
    heap_init(&h);
    heap_cache d = {0};
    void *p = alloc(&h, &d, 48);
    heap_free(&h, &d, p, 48); /* its magazine holds a block now */
    assert_null(heap_alloc_fast(&d, 0));
    assert_null(heap_alloc_fast(&d, HEAP_MAX_SMALL + 1));
    assert_int_equal(heap_free_fast(&d, p, HEAP_MAX_SMALL + 1), 0);
    assert_int_equal(heap_free_fast(&d, p, 0), 0);
    assert_ptr_equal(heap_alloc_fast(&d, 48), p);
    heap_free(&h, &d, p, 48);
    heap_cache_flush(&h, &d);
    heap_destroy(&h);
}

static void realloc_keeps_contents_across_classes_and_to_malloc(void **state)
{
    (void)state;
    heap h;
    heap_cache c = {0};
    heap_init(&h);
    char *p = alloc(&h, &c, 20);
    memcpy(p, "0123456789abcdefghi", 20);
    assert_ptr_equal(heap_realloc(&h, &c, p, 20, 32), p); /* same class: in place */
    char *q = heap_realloc(&h, &c, p, 32, 3000);
    assert_string_equal(q, "0123456789abcdefghi");
    char *r = heap_realloc(&h, &c, q, 3000, 100000); /* past the classes: malloc */
    assert_string_equal(r, "0123456789abcdefghi");
    char *s = heap_realloc(&h, &c, r, 100000, 10); /* and back */
    assert_memory_equal(s, "0123456789", 10);
    release(&h, &c, s, 10);
    heap_cache_flush(&h, &c);
    heap_destroy(&h);
}

/* What one thread frees past its two magazines goes to the depot, and another
 * thread's allocations take it from there instead of fresh memory. */
static void freed_magazines_reach_another_cache_without_fresh_memory(void **state)
{
    (void)state;
    heap h;
    heap_cache a = {0}, b = {0};
    heap_init(&h);
    enum { N = 2000, SZ = 48 };
    void **p = malloc(N * sizeof *p);
    for (int i = 0; i < N; i++)
        p[i] = alloc(&h, &a, SZ);
    size_t reserved = heap_reserved(&h);
    for (int i = 0; i < N; i++)
        release(&h, &a, p[i], SZ);
    assert_int_equal(heap_reserved(&h), reserved);
    /* a keeps at most two magazines; b gets the rest from the depot */
    uint32_t kept = 2 * heap_magazine_blocks(SZ);
    assert_true(kept < N);
    for (int i = 0; i < N - (int)kept; i++)
        p[i] = alloc(&h, &b, SZ);
    assert_int_equal(heap_reserved(&h), reserved);
    /* every block b got is distinct */
    for (int i = 0; i < N - (int)kept; i++)
        *(int *)p[i] = i;
    for (int i = 0; i < N - (int)kept; i++)
        assert_int_equal(*(int *)p[i], i);
    for (int i = 0; i < N - (int)kept; i++)
        release(&h, &b, p[i], SZ);
    free(p);
    heap_cache_flush(&h, &a);
    heap_cache_flush(&h, &b);
    heap_destroy(&h);
}

/* Off the schedulers (no cache) blocks go to and come from the depot one at a
 * time, and a flushed cache's blocks are found there too. */
static void callers_without_a_cache_use_the_depot(void **state)
{
    (void)state;
    heap h;
    heap_cache a = {0};
    heap_init(&h);
    void *x = alloc(&h, NULL, 100);
    release(&h, NULL, x, 100);
    assert_ptr_equal(alloc(&h, NULL, 100), x);
    release(&h, NULL, x, 100);
    enum { N = 500 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = alloc(&h, &a, 64);
    for (int i = 0; i < N; i++)
        release(&h, &a, p[i], 64);
    heap_cache_flush(&h, &a);
    size_t reserved = heap_reserved(&h);
    for (int i = 0; i < N; i++) {
        p[i] = alloc(&h, NULL, 64);
        *(int *)p[i] = i;
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(*(int *)p[i], i);
    assert_int_equal(heap_reserved(&h), reserved);
    for (int i = 0; i < N; i++)
        release(&h, NULL, p[i], 64);
    heap_destroy(&h);
}

/* A wire buffer of heap blocks (a spawn payload) grows through the classes and past them,
 * keeping its bytes; fitted to its length it is freed as a block of that length, which goes
 * back to the freeing thread's cache. */
static void a_heap_wire_buffer_grows_in_heap_blocks_and_frees_to_the_heap(void **state)
{
    (void)state;
    heap h;
    heap_cache c = {0}, other = {0};
    heap_init(&h);
    wire_buf b;
    wire_buf_init_heap(&b, &h, &c);
    for (int i = 0; i < 6000; i++) { /* 64, 128, ... 4096 bytes, then 8192: malloc's */
        unsigned char x = (unsigned char)(i * 7);
        assert_int_equal(wire_buf_append(&b, &x, 1), 0);
        assert_true(b.cap >= b.len);
    }
    assert_true(b.cap > HEAP_MAX_SMALL);
    for (int i = 0; i < 6000; i++)
        assert_int_equal((unsigned char)b.data[i], (unsigned char)(i * 7));
    /* fitted back under the classes: a heap block again, bytes kept */
    b.len = 100;
    assert_int_equal(wire_buf_fit(&b), 0);
    assert_int_equal(b.cap, 100);
    char *fit = b.data;
    for (int i = 0; i < 100; i++)
        assert_int_equal((unsigned char)b.data[i], (unsigned char)(i * 7));
    /* freed on another thread (its cache): that cache hands the block out next */
    b.cache = &other;
    wire_buf_free(&b);
    assert_null(b.data);
    assert_ptr_equal(alloc(&h, &other, 100), fit);
    release(&h, &other, fit, 100);
    /* emptied, it is still a heap buffer */
    assert_int_equal(wire_buf_append(&b, "x", 1), 0);
    assert_true(heap_owns(b.data));
    wire_buf_free(&b);
    heap_cache_flush(&h, &c);
    heap_cache_flush(&h, &other);
    heap_destroy(&h);
}

struct churn {
    heap *h;
    unsigned seed;
    int ok;
};

/* Random sizes allocated, stamped, checked and freed, 200k times. */
static void *churn_thread(void *arg)
{
    struct churn *ch = arg;
    heap_cache c = {0};
    enum { LIVE = 512 };
    struct {
        unsigned char *p;
        size_t n;
        unsigned char stamp;
    } live[LIVE] = {{0}};
    unsigned s = ch->seed;
    ch->ok = 1;
    for (int i = 0; i < 200000; i++) {
        s = s * 1103515245u + 12345u;
        int k = (int)((s >> 8) % LIVE);
        if (live[k].p) {
            for (size_t j = 0; j < live[k].n; j += 7)
                if (live[k].p[j] != live[k].stamp)
                    ch->ok = 0;
            release(ch->h, &c, live[k].p, live[k].n);
        }
        live[k].n = 1 + (s >> 16) % 4096;
        live[k].p = alloc(ch->h, &c, live[k].n);
        live[k].stamp = (unsigned char)(s >> 3);
        memset(live[k].p, live[k].stamp, live[k].n);
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k].p)
            release(ch->h, &c, live[k].p, live[k].n);
    heap_cache_flush(ch->h, &c);
    return NULL;
}

static void two_threads_churning_never_share_a_block(void **state)
{
    (void)state;
    heap h;
    heap_init(&h);
    struct churn a = {&h, 1, 0}, b = {&h, 2, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, churn_thread, &a);
    pthread_create(&tb, NULL, churn_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_true(a.ok);
    assert_true(b.ok);
    heap_destroy(&h);
}

/* heap_owns tells the heap's small blocks from anything else, for every heap of the
 * process, and forgets a heap's chunks when it is destroyed. */
static void heap_owns_its_small_blocks_only(void **state)
{
    (void)state;
    heap h1, h2;
    heap_cache c1 = {0}, c2 = {0};
    heap_init(&h1);
    heap_init(&h2);
    void *a = alloc(&h1, &c1, 64), *b = alloc(&h2, &c2, 4096), *big = alloc(&h1, &c1, 5000);
    void *m = malloc(64);
    int local;
    assert_true(heap_owns_ready());
    assert_true(heap_owns(a));
    assert_true(heap_owns(b));
    assert_false(heap_owns(big)); /* large blocks come from malloc */
    assert_false(heap_owns(m));
    assert_false(heap_owns(&local));
    assert_false(heap_owns(NULL));
    assert_false(heap_owns((void *)~(uintptr_t)0)); /* outside the map: not the heap's */
    /* thousands of blocks: every one, in every chunk taken, is the heap's */
    for (int i = 0; i < 40000; i++)
        assert_true(heap_owns(alloc(&h1, &c1, 16 + (size_t)(i % 100) * 40)));
    release(&h1, &c1, big, 5000);
    free(m);
    heap_cache_flush(&h1, &c1);
    heap_destroy(&h1);
    assert_false(heap_owns(a)); /* its chunk went back to malloc */
    assert_true(heap_owns(b));
    heap_cache_flush(&h2, &c2);
    heap_destroy(&h2);
    assert_false(heap_owns(b));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocks_are_aligned_distinct_and_reused_last_freed_first),
        cmocka_unit_test(fresh_blocks_do_not_straddle_lines_and_gaps_are_reused),
        cmocka_unit_test(class_table_matches_the_classes_and_bounds_the_fast_paths),
        cmocka_unit_test(realloc_keeps_contents_across_classes_and_to_malloc),
        cmocka_unit_test(freed_magazines_reach_another_cache_without_fresh_memory),
        cmocka_unit_test(callers_without_a_cache_use_the_depot),
        cmocka_unit_test(two_threads_churning_never_share_a_block),
        cmocka_unit_test(heap_owns_its_small_blocks_only),
        cmocka_unit_test(a_heap_wire_buffer_grows_in_heap_blocks_and_frees_to_the_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
