/* Tests of actor stacks, under both schemes (stacks cut from chunks with MADV_GUARD_INSTALL
 * guards, and one mapping per stack with a PROT_NONE guard): the LIFO pool, custom shapes,
 * the guard that faults, the usable range, the number of mappings, the reserve, failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/stack.h"

/* Let the guard fault kill the forked child with SIGSEGV instead of a sanitizer report. */
const char *__asan_default_options(void) { return "handle_segv=0"; }
const char *__tsan_default_options(void) { return "handle_segv=0"; }

static enum stack_scheme chunks = STACK_SCHEME_CHUNKS, mprotect_scheme = STACK_SCHEME_MPROTECT;

/* A pool of the test's scheme; skips the test where the kernel lacks chunks. */
static stack_pool *pool_new(void **state, size_t size, size_t guard)
{
    enum stack_scheme scheme = *(enum stack_scheme *)*state;
    if (scheme == STACK_SCHEME_CHUNKS && !stack_guard_install_supported()) {
        fprintf(stderr, "skipped: this kernel lacks MADV_GUARD_INSTALL (Linux 6.13+)\n");
        skip();
    }
    stack_pool *p = stack_pool_new_scheme(size, guard, scheme);
    assert_non_null(p);
    assert_int_equal(stack_pool_scheme(p), scheme);
    return p;
}

static size_t maps_lines(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    size_t n = 0;
    int c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

static void auto_scheme_follows_the_kernel(void **state)
{
    (void)state;
    stack_pool *p = stack_pool_new(0, 0);
    assert_non_null(p);
    assert_int_equal(stack_pool_scheme(p),
                     stack_guard_install_supported() ? STACK_SCHEME_CHUNKS : STACK_SCHEME_MPROTECT);
    if (!stack_guard_install_supported()) {
        errno = 0;
        assert_null(stack_pool_new_scheme(0, 0, STACK_SCHEME_CHUNKS));
        assert_int_equal(errno, ENOTSUP);
    }
    stack_pool_free(p);
}

static void pool_returns_the_warmest_stack_first(void **state)
{
    stack_pool *p = pool_new(state, 0, 0);
    assert_int_equal(stack_pool_default_size(p), STACK_DEFAULT_SIZE);
    assert_int_equal(stack_pool_default_guard(p), STACK_DEFAULT_GUARD);
    stack *a = stack_get(p, 0, 0), *b = stack_get(p, 0, 0);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a->base, b->base);
    assert_int_equal(a->size, STACK_DEFAULT_SIZE);
    assert_int_equal(a->guard, STACK_DEFAULT_GUARD);
    assert_true(a->pooled);
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
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_pool *p = pool_new(state, 10000, 1);
    assert_int_equal(stack_pool_default_size(p), (10000 + page - 1) / page * page);
    /* a guard below the minimum is raised to it: one C frame must not step over it */
    assert_int_equal(stack_pool_default_guard(p), STACK_MIN_GUARD);
    stack *s = stack_get(p, 3 * STACK_DEFAULT_SIZE + 1, 0);
    assert_non_null(s);
    assert_int_equal(s->size, 3 * STACK_DEFAULT_SIZE + page);
    assert_int_equal(s->guard, STACK_MIN_GUARD);
    assert_false(s->pooled);
    assert_false(s->carved);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 0);
    s = stack_get(p, 0, STACK_MIN_GUARD + page); /* default size, custom guard */
    assert_int_equal(s->guard, STACK_MIN_GUARD + page);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 0);
    s = stack_get(p, 0, page); /* rounded up to the minimum: the default shape again */
    assert_int_equal(s->guard, STACK_MIN_GUARD);
    assert_true(s->pooled);
    stack_put(p, s);
    assert_int_equal(stack_pool_count(p), 1);
    stack_pool_free(p);
}

static void whole_usable_range_is_writable(void **state)
{
    stack_pool *p = pool_new(state, 0, 0);
    stack *shapes[2] = {stack_get(p, 256 * 1024, 0), stack_get(p, 0, 0)};
    for (int k = 0; k < 2; k++) {
        stack *s = shapes[k];
        assert_non_null(s);
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
    }
    stack_pool_free(p);
}

/* Touches s's guard at base - off in a child; 1 if the child died of SIGSEGV. */
static int guard_faults(stack *s, size_t off, int write)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        volatile char *g = (volatile char *)s->base - off;
        if (write)
            *g = 1;
        else
            (void)*g;
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static void touching_the_guard_kills_with_sigsegv(void **state)
{
    enum stack_scheme scheme = *(enum stack_scheme *)*state;
    stack_pool *p = pool_new(state, 0, 0);
    /* the fourth stack of the pool: under chunks, one cut from the middle of a chunk */
    stack *held[4];
    for (int i = 0; i < 4; i++)
        held[i] = stack_get(p, 0, 0);
    stack *custom = stack_get(p, 128 * 1024, 32 * 1024);
    stack *tests[2] = {held[3], custom};
    assert_int_equal(held[3]->carved, scheme == STACK_SCHEME_CHUNKS);
    for (int k = 0; k < 2; k++) {
        stack *s = tests[k];
        ((char *)s->base)[0] = 1; /* the usable part is fine */
        size_t offsets[] = {1, s->guard / 2, s->guard};
        for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
            assert_true(guard_faults(s, offsets[i], 1));
            assert_true(guard_faults(s, offsets[i], 0));
        }
    }
    stack_put(p, custom);
    for (int i = 0; i < 4; i++)
        stack_put(p, held[i]);
    stack_pool_free(p);
}

/* The point of chunks: many stacks, few mappings (the mprotect scheme: two per stack). */
static void stacks_cost_few_mappings_in_chunks(void **state)
{
    enum stack_scheme scheme = *(enum stack_scheme *)*state;
    enum { N = 2000 };
    stack_pool *p = pool_new(state, 0, 0);
    size_t before = maps_lines();
    stack **held = malloc(N * sizeof *held);
    assert_non_null(held);
    for (int i = 0; i < N; i++) {
        held[i] = stack_get(p, 0, 0);
        assert_non_null(held[i]);
        *((char *)stack_top(held[i]) - 1) = 1;
    }
    size_t after = maps_lines();
    if (scheme == STACK_SCHEME_CHUNKS) {
        /* a few per chunk (more under TSan, which maps shadow for each) */
        assert_true(after - before < N / 20);
        assert_true(stack_pool_chunks(p) < 20);
    } else {
        assert_true(after - before >= 2 * N);
        assert_int_equal(stack_pool_chunks(p), 0);
    }
    for (int i = 0; i < N; i++)
        stack_put(p, held[i]);
    assert_int_equal(stack_pool_count(p), N);
    free(held);
    stack_pool_free(p);
}

static void reserve_stacks_are_kept_apart(void **state)
{
    stack_pool *p = pool_new(state, 0, 0);
    assert_null(stack_get_reserve(p));
    assert_int_equal(stack_pool_reserve(p, 2), 0);
    assert_int_equal(stack_pool_reserve(p, 2), 0); /* already there */
    stack *a = stack_get_reserve(p), *b = stack_get_reserve(p);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(stack_get_reserve(p));
    assert_true(a->reserve);
    assert_false(a->pooled);
    assert_int_equal(a->size, STACK_DEFAULT_SIZE);
    memset(a->base, 1, a->size);
    stack_put(p, a);
    stack_put(p, b);
    /* back in the reserve, not in the pool */
    assert_int_equal(stack_pool_count(p), 0);
    stack *s = stack_get(p, 0, 0);
    assert_ptr_not_equal(s, a);
    assert_ptr_not_equal(s, b);
    stack_put(p, s);
    assert_ptr_equal(stack_get_reserve(p), b);
    stack_put(p, b);
    stack_pool_free(p);
}

static void impossible_sizes_fail_with_errno(void **state)
{
    stack_pool *p = pool_new(state, 0, 0);
    errno = 0;
    assert_null(stack_get(p, SIZE_MAX - 100, 0));
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_null(stack_get(p, 0, SIZE_MAX - 100));
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_null(stack_get(p, (size_t)1 << 60, 0));   /* more than the address space */
    assert_true(errno == ENOMEM || errno == EINVAL); /* valgrind's mmap says EINVAL */
    stack *s = stack_get(p, 0, 0);                   /* and the pool still works */
    assert_non_null(s);
    stack_put(p, s);
    stack_pool_free(p);
}

/* Out of address space (RLIMIT_AS), the pool answers NULL and ENOMEM, in a child. */
static void running_out_fails_cleanly(void **state)
{
#if defined(SMARM_ASAN) || defined(SMARM_TSAN)
    (void)state;
    skip(); /* the sanitizers' own mappings do not fit under an address-space limit */
#else
    stack_pool *p = pool_new(state, 0, 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        unsigned long vm_kb = 0;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "VmSize: %lu kB", &vm_kb) == 1)
                break;
        if (f)
            fclose(f);
        struct rlimit rl = {(vm_kb + 64 * 1024) * 1024, RLIM_INFINITY};
        if (!vm_kb || setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(2);
        for (int i = 0; i < 4096; i++) { /* 512 MiB of stacks at most */
            stack *s = stack_get(p, 0, 0);
            if (!s)
                _exit(errno == ENOMEM ? 0 : 3);
        }
        _exit(4);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    stack_pool_free(p);
#endif
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
    stack_pool *p = pool_new(state, 0, 0);
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

/* stack_release gives back the whole pages between depth and keep below the top: they read
 * as zeros again, the pages above keep stays intact, and the stack stays usable */
static void release_gives_back_whole_pages_below_keep(void **state)
{
    stack_pool *p = pool_new(state, 256 * 1024, 0);
    stack *s = stack_get(p, 0, 0);
    assert_non_null(s);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *top = stack_top(s);
    memset(top - 200 * 1024, 0x5a, 200 * 1024);
    /* keep 16 KiB + 100 bytes: the page holding that byte stays */
    size_t n = stack_release(s, 200 * 1024, 16 * 1024 + 100);
    assert_int_equal(n, 200 * 1024 - 16 * 1024 - page);
    for (size_t off = 16 * 1024 + page + 1; off <= 200 * 1024; off += 512)
        assert_int_equal(top[-(ptrdiff_t)off], 0);
    for (size_t off = 1; off <= 16 * 1024 + page; off += 512)
        assert_int_equal((unsigned char)top[-(ptrdiff_t)off], 0x5a);
    /* nothing to give back: keep at or below depth, or a depth past the stack's size */
    assert_int_equal(stack_release(s, 8 * 1024, 8 * 1024), 0);
    assert_int_equal(stack_release(s, 8 * 1024, 64 * 1024), 0);
    assert_int_equal(stack_release(s, (size_t)1 << 40, 0), 256 * 1024);
    memset(s->base, 1, s->size); /* still ours, writable */
    stack_put(p, s);
    stack_pool_free(p);
}

/* the test under each scheme, named after it */
#define BOTH(f) \
    {#f " (chunks)", f, NULL, NULL, &chunks}, { #f " (mprotect)", f, NULL, NULL, &mprotect_scheme }

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_scheme_follows_the_kernel),
        BOTH(pool_returns_the_warmest_stack_first),
        BOTH(custom_sizes_are_rounded_and_not_pooled),
        BOTH(whole_usable_range_is_writable),
        BOTH(touching_the_guard_kills_with_sigsegv),
        BOTH(stacks_cost_few_mappings_in_chunks),
        BOTH(reserve_stacks_are_kept_apart),
        BOTH(impossible_sizes_fail_with_errno),
        BOTH(running_out_fails_cleanly),
        BOTH(pool_is_thread_safe),
        BOTH(release_gives_back_whole_pages_below_keep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
