/* Tests of the small blocks each thread keeps (base/blocks.h): a block freed by another
 * thread is reused, and blocks made on one thread and freed on another come back to the
 * maker's side by whole lists through the depot, not from malloc (run under the tsan and
 * asan flavours too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/blocks.h"

enum { N = 4 * BLOCKS_KEEP };

struct batch {
    void *b[N];
    size_t size;
};

static void *free_all(void *arg)
{
    struct batch *x = arg;
    for (int i = 0; i < N; i++)
        blocks_put(x->b[i], x->size);
    return NULL;
}

static void made_here_and_freed_on_another_thread(size_t size)
{
    static struct batch x, y;
    x.size = y.size = size;
    for (int i = 0; i < N; i++) {
        x.b[i] = blocks_get(size);
        assert_non_null(x.b[i]);
        memset(x.b[i], 0x5a, size); /* the whole size is usable */
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, free_all, &x), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    /* the other thread kept one list (it ended: drained to malloc) and gave the depot the
     * other three; this thread's list is empty, so it takes them before malloc */
    size_t before = blocks_malloced();
    for (int i = 0; i < N; i++)
        y.b[i] = blocks_get(size);
    assert_int_equal(blocks_malloced() - before, N - 3 * BLOCKS_KEEP);
    int reused = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            reused += y.b[i] == x.b[j];
    assert_true(reused >= 3 * BLOCKS_KEEP);
    /* every block handed out is distinct */
    for (int i = 0; i < N; i++)
        *(int *)y.b[i] = i;
    for (int i = 0; i < N; i++)
        assert_int_equal(*(int *)y.b[i], i);
    for (int i = 0; i < N; i++)
        blocks_put(y.b[i], size);
}

static void blocks_freed_on_another_thread_come_back_by_whole_lists(void **state)
{
    (void)state;
    made_here_and_freed_on_another_thread(BLOCK_SMALL);
    made_here_and_freed_on_another_thread(BLOCK_LARGE);
}

/* A block freed on this thread is the next one it gets, of its size only. */
static void a_freed_block_is_reused_last_freed_first(void **state)
{
    (void)state;
    void *a = blocks_get(40), *b = blocks_get(100);
    blocks_put(a, 40);
    blocks_put(b, 100);
    assert_ptr_equal(blocks_get(BLOCK_SMALL), a);
    assert_ptr_equal(blocks_get(BLOCK_LARGE), b);
    blocks_put(a, BLOCK_SMALL);
    blocks_put(b, BLOCK_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocks_freed_on_another_thread_come_back_by_whole_lists),
        cmocka_unit_test(a_freed_block_is_reused_last_freed_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
