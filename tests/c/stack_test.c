/* Tests of actor stacks: the LIFO pool, custom shapes, the guard that faults, usable range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/stack.h"

/* Let the guard fault kill the forked child with SIGSEGV instead of a sanitizer report. */
const char *__asan_default_options(void) { return "handle_segv=0"; }
const char *__tsan_default_options(void) { return "handle_segv=0"; }

static void pool_returns_the_warmest_stack_first(void **state)
{
    (void)state;
    stack_pool *p = stack_pool_new(0, 0);
    assert_non_null(p);
    assert_int_equal(stack_pool_default_size(p), STACK_DEFAULT_SIZE);
    stack *a = stack_get(p, 0, 0), *b = stack_get(p, 0, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a->base, b->base);
    assert_int_equal(a->size, STACK_DEFAULT_SIZE);
    assert_int_equal(a->guard, STACK_DEFAULT_GUARD);
    stack_put(p, a);
    stack_put(p, b);
    assert_int_equal(stack_pool_count(p), 2);
    assert_ptr_equal(stack_get(p, 0, 0), b);
    assert_ptr_equal(stack_get(p, STACK_DEFAULT_SIZE, STACK_DEFAULT_GUARD), a);
    assert_int_equal(stack_pool_count(p), 0);
    stack_put(p, a);
    stack_put(p, b);
    stack_pool_free(p);
}

static void custom_sizes_are_rounded_and_not_pooled(void **state)
{
    (void)state;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_pool *p = stack_pool_new(10000, 1);
    assert_int_equal(stack_pool_default_size(p), (10000 + page - 1) / page * page);
    stack *s = stack_get(p, 3 * STACK_DEFAULT_SIZE + 1, 0);
    assert_non_null(s);
    assert_int_equal(s->size, 3 * STACK_DEFAULT_SIZE + page);
    assert_int_equal(s->guard, page);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 0);
    s = stack_get(p, 0, 2 * page); /* default size, custom guard */
    assert_int_equal(s->guard, 2 * page);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 0);
    s = stack_get(p, 0, 0);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 1);
    stack_pool_free(p);
}

static void whole_usable_range_is_writable(void **state)
{
    (void)state;
    stack_pool *p = stack_pool_new(0, 0);
    stack *s = stack_get(p, 256 * 1024, 0);
    memset(s->base, 0xa5, s->size);
    unsigned char *top = stack_top(s);
    assert_int_equal(top[-1], 0xa5);
    assert_int_equal(((unsigned char *)s->base)[0], 0xa5);
    assert_int_equal((uintptr_t)top % 16, 0);
    assert_false(stack_in_guard(s, s->base));
    assert_false(stack_in_guard(s, top));
    assert_true(stack_in_guard(s, (char *)s->base - 1));
    assert_true(stack_in_guard(s, (char *)s->base - s->guard));
    assert_false(stack_in_guard(s, (char *)s->base - s->guard - 1));
    stack_put(p, s);
    stack_pool_free(p);
}

static void write_into_guard_kills_with_sigsegv(void **state)
{
    (void)state;
    stack_pool *p = stack_pool_new(0, 0);
    stack *s = stack_get(p, 0, 0);
    size_t offsets[] = {1, s->guard / 2, s->guard};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            signal(SIGSEGV, SIG_DFL);
            *((volatile char *)s->base - offsets[k]) = 1;
            _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGSEGV);
    }
    stack_put(p, s);
    stack_pool_free(p);
}

static void *churn(void *arg)
{
    stack_pool *p = arg;
    stack *held[8];
    for (int r = 0; r < 2000; r++) {
        for (int i = 0; i < 8; i++) {
            held[i] = stack_get(p, 0, 0);
            ((char *)held[i]->base)[0] = (char)i; /* touch: it must be ours alone */
        }
        for (int i = 0; i < 8; i++) {
            if (((char *)held[i]->base)[0] != (char)i)
                return (void *)1;
            stack_put(p, held[i]);
        }
    }
    return NULL;
}

static void pool_is_thread_safe(void **state)
{
    (void)state;
    stack_pool *p = stack_pool_new(0, 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, p);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    assert_true(stack_pool_count(p) <= 32);
    stack_pool_free(p);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_returns_the_warmest_stack_first),
        cmocka_unit_test(custom_sizes_are_rounded_and_not_pooled),
        cmocka_unit_test(whole_usable_range_is_writable),
        cmocka_unit_test(write_into_guard_kills_with_sigsegv),
        cmocka_unit_test(pool_is_thread_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
