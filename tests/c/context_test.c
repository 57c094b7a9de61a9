/* Tests of the assembly context switch: round trips with values, callee-saved and FP state,
 * entry alignment, unwinding that stops at the entry frame, and a ns-per-switch benchmark. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <execinfo.h>
#include <fenv.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/context.h"
#include "base/stack.h"

#if defined(__SANITIZE_ADDRESS__)
#define CT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CT_TSAN 1
#endif
#endif
#ifdef CT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CT_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
static int on_valgrind(void)
{
#ifdef RUNNING_ON_VALGRIND
    return RUNNING_ON_VALGRIND;
#else
    return 0;
#endif
}

/* A context and what the sanitizers need to know about its stack. */
typedef struct fiber {
    void *sp;
    const void *bottom;
    size_t size;
    void *tsan;
    stack *st;
} fiber;

static fiber main_fiber;

/* Switches from `from` (the running context) to `to`, telling the sanitizers. */
static void fiber_switch(fiber *from, fiber *to)
{
#ifdef CT_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, to->bottom, to->size);
#endif
#ifdef CT_TSAN
    __tsan_switch_to_fiber(to->tsan, 0);
#endif
    ctx_switch(&from->sp, to->sp);
#ifdef CT_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* First thing a fresh context does. */
static void fiber_started(void)
{
#ifdef CT_ASAN
    __sanitizer_finish_switch_fiber(NULL, &main_fiber.bottom, &main_fiber.size);
#endif
}

static stack_pool *pool;

static void fiber_make(fiber *f, void (*entry)(void *), void *arg)
{
    f->st = stack_get(pool, 0, 0);
    assert_non_null(f->st);
    f->bottom = f->st->base;
    f->size = f->st->size;
    f->sp = ctx_make(stack_top(f->st), entry, arg);
#ifdef CT_TSAN
    f->tsan = __tsan_create_fiber(0);
    main_fiber.tsan = __tsan_get_current_fiber();
#endif
}

/* Only for a fiber that is suspended and never resumed again. */
static void fiber_drop(fiber *f)
{
#ifdef CT_TSAN
    __tsan_destroy_fiber(f->tsan);
#endif
    stack_put(pool, f->st);
}

static fiber co;
static volatile long value;

static void counter_entry(void *arg)
{
    fiber_started();
    long step = *(long *)arg;
    for (;;) {
        value += step;
        fiber_switch(&co, &main_fiber);
    }
}

static void round_trips_pass_values_both_ways(void **state)
{
    (void)state;
    long step = 3;
    value = 0;
    fiber_make(&co, counter_entry, &step);
    for (long i = 1; i <= 100000; i++) {
        fiber_switch(&main_fiber, &co);
        assert_int_equal(value, 3 * i);
    }
    fiber_drop(&co);
}

/* Integer and float work live across switches in both contexts: any register the switch
 * failed to preserve would corrupt one of the two sums. */
static volatile double co_fsum;
static volatile uint64_t co_isum;

static void work_entry(void *arg)
{
    fiber_started();
    long n = (long)(intptr_t)arg;
    uint64_t a = 1, b = 2, c = 3, d = 5, e = 7, f = 11;
    double x = 0.5, y = 1.25;
    for (long i = 0; i < n; i++) {
        a = a * 6364136223846793005u + b;
        b ^= a >> 7;
        c += a ^ d;
        d = d * 3 + e;
        e ^= c << 1;
        f += a + b + c + d + e;
        x = x * 1.0000001 + y;
        y = y * 0.9999999 + 0.25;
        fiber_switch(&co, &main_fiber);
    }
    co_isum = a ^ b ^ c ^ d ^ e ^ f;
    co_fsum = x + y;
    for (;;)
        fiber_switch(&co, &main_fiber);
}

static void reference_work(long n, uint64_t *isum, double *fsum)
{
    volatile uint64_t a = 1, b = 2, c = 3, d = 5, e = 7, f = 11;
    volatile double x = 0.5, y = 1.25;
    for (long i = 0; i < n; i++) {
        a = a * 6364136223846793005u + b;
        b ^= a >> 7;
        c += a ^ d;
        d = d * 3 + e;
        e ^= c << 1;
        f += a + b + c + d + e;
        x = x * 1.0000001 + y;
        y = y * 0.9999999 + 0.25;
    }
    *isum = a ^ b ^ c ^ d ^ e ^ f;
    *fsum = x + y;
}

static void callee_saved_registers_survive_switches(void **state)
{
    (void)state;
    const long n = 50000;
    uint64_t want_i;
    double want_f;
    reference_work(n, &want_i, &want_f);
    fiber_make(&co, work_entry, (void *)(intptr_t)n);
    uint64_t p = 0x9e3779b97f4a7c15u, q = 17, r = 23, s = 31, t = 41, u = 43;
    double m = 1.5, k = 2.5;
    for (long i = 0; i <= n; i++) {
        fiber_switch(&main_fiber, &co);
        p = p * 2862933555777941757u + 3037000493u;
        q += p >> 3;
        r ^= q * 5;
        s += r | 1;
        t ^= s + p;
        u += t;
        m = m * 1.0000002 + 0.5;
        k = k * 0.9999998 + 0.125;
    }
    assert_int_equal(co_isum, want_i);
    assert_true(co_fsum == want_f);
    /* our own chain, replayed without switches */
    volatile uint64_t p2 = 0x9e3779b97f4a7c15u, q2 = 17, r2 = 23, s2 = 31, t2 = 41, u2 = 43;
    volatile double m2 = 1.5, k2 = 2.5;
    for (long i = 0; i <= n; i++) {
        p2 = p2 * 2862933555777941757u + 3037000493u;
        q2 += p2 >> 3;
        r2 ^= q2 * 5;
        s2 += r2 | 1;
        t2 ^= s2 + p2;
        u2 += t2;
        m2 = m2 * 1.0000002 + 0.5;
        k2 = k2 * 0.9999998 + 0.125;
    }
    assert_int_equal(p ^ q ^ r ^ s ^ t ^ u, p2 ^ q2 ^ r2 ^ s2 ^ t2 ^ u2);
    assert_true(m == m2 && k == k2);
    fiber_drop(&co);
}

/* Rounding modes are per context: set in one, they do not leak into the other. */
static volatile int co_mode_ok;

static void rounding_entry(void *arg)
{
    (void)arg;
    fiber_started();
    co_mode_ok = fegetround() == FE_TONEAREST; /* inherited from ctx_make's caller */
    fesetround(FE_TOWARDZERO);
    for (;;) {
        fiber_switch(&co, &main_fiber);
        volatile double one = 1.0, three = 3.0;
        /* valgrind computes SSE arithmetic round-to-nearest whatever the mode */
        co_mode_ok &= fegetround() == FE_TOWARDZERO && (one / three * three < 1.0 || on_valgrind());
    }
}

static void rounding_mode_does_not_leak_between_contexts(void **state)
{
    (void)state;
    assert_int_equal(fegetround(), FE_TONEAREST);
    fiber_make(&co, rounding_entry, NULL);
    fiber_switch(&main_fiber, &co);
    assert_int_equal(fegetround(), FE_TONEAREST);
    fesetround(FE_UPWARD);
    for (int i = 0; i < 100; i++) {
        fiber_switch(&main_fiber, &co);
        assert_int_equal(fegetround(), FE_UPWARD);
    }
    fesetround(FE_TONEAREST);
    assert_true(co_mode_ok);
    fiber_drop(&co);
}

/* The switch loads a control word only when the two contexts' differ: each of them is still
 * every context's own when it alone differs (MXCSR's flush-to-zero bit, the x87 precision). */
static unsigned get_mxcsr(void)
{
    unsigned v;
    __asm__ volatile("stmxcsr %0" : "=m"(v));
    return v;
}

static void set_mxcsr(unsigned v) { __asm__ volatile("ldmxcsr %0" : : "m"(v)); }

static unsigned short get_x87cw(void)
{
    unsigned short v;
    __asm__ volatile("fnstcw %0" : "=m"(v));
    return v;
}

static void set_x87cw(unsigned short v) { __asm__ volatile("fldcw %0" : : "m"(v)); }

#define MXCSR_FTZ 0x8000u
#define MXCSR_FLAGS 0x3fu   /* sticky exception flags: not the context's own (base/context.h) */
#define X87_PC_MASK 0x0300u /* precision control: 00 is single precision */

static volatile int co_words_ok;

static void control_words_entry(void *arg)
{
    (void)arg;
    fiber_started();
    /* inherited from ctx_make's caller: neither set */
    co_words_ok = !(get_mxcsr() & MXCSR_FTZ) && (get_x87cw() & X87_PC_MASK) == X87_PC_MASK;
    set_mxcsr(get_mxcsr() | MXCSR_FTZ);
    set_x87cw((unsigned short)(get_x87cw() & ~X87_PC_MASK));
    for (;;) {
        fiber_switch(&co, &main_fiber);
        co_words_ok &= (get_mxcsr() & MXCSR_FTZ) && (get_x87cw() & X87_PC_MASK) == 0;
    }
}

static void control_words_do_not_leak_between_contexts(void **state)
{
    (void)state;
    unsigned mx = get_mxcsr();
    unsigned short cw = get_x87cw();
    assert_false(mx & MXCSR_FTZ);
    assert_int_equal(cw & X87_PC_MASK, X87_PC_MASK);
    fiber_make(&co, control_words_entry, NULL);
    for (int i = 0; i < 100; i++) {
        fiber_switch(&main_fiber, &co);
        /* each word alone differs on the other side: both come back as they were here */
        assert_int_equal(get_mxcsr() & ~MXCSR_FLAGS, mx & ~MXCSR_FLAGS);
        assert_int_equal(get_x87cw(), cw);
    }
    assert_true(co_words_ok);
    fiber_drop(&co);
}

/* The entry runs with an ABI-aligned stack and its backtrace ends at the trampoline. */
static volatile uintptr_t co_frame;
static volatile int co_depth;

static __attribute__((noinline)) void probe_frame(void)
{
    co_frame = (uintptr_t)__builtin_frame_address(0);
    void *bt[64];
    co_depth = backtrace(bt, 64);
}

static void frame_entry(void *arg)
{
    (void)arg;
    fiber_started();
    probe_frame();
    for (;;)
        fiber_switch(&co, &main_fiber);
}

static void entry_is_aligned_and_backtrace_stops(void **state)
{
    (void)state;
    fiber_make(&co, frame_entry, NULL);
    fiber_switch(&main_fiber, &co);
    /* with a frame pointer, rbp = entry rsp - 8, 16-aligned iff the call was ABI-aligned */
    assert_int_equal(co_frame % 16, 0);
    assert_true(co_depth >= 2 && co_depth < 16);
    fiber_drop(&co);
}

static void returning_entry(void *arg) { (void)arg; }

static void returning_from_entry_aborts(void **state)
{
    (void)state;
#if defined(CT_ASAN) || defined(CT_TSAN)
    skip(); /* the child would run unannotated; covered by the plain build */
#endif
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        stack_pool *p = stack_pool_new(0, 0);
        stack *s = stack_get(p, 0, 0);
        void *sp;
        ctx_switch(&sp, ctx_make(stack_top(s), returning_entry, NULL));
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}

static void pingpong_entry(void *arg)
{
    (void)arg;
    fiber_started();
    for (;;)
        fiber_switch(&co, &main_fiber);
}

static void bench_pingpong_switch_ns(void **state)
{
    (void)state;
    const long n = 1000000;
    fiber_make(&co, pingpong_entry, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        fiber_switch(&main_fiber, &co);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    print_message("ctx_switch: %.1f ns per switch (%.1f ns round trip), %ld round trips\n",
                  ns / (2.0 * n), ns / n, n);
    fiber_drop(&co);
}

int main(void)
{
    alarm(240);
    pool = stack_pool_new(0, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trips_pass_values_both_ways),
        cmocka_unit_test(callee_saved_registers_survive_switches),
        cmocka_unit_test(rounding_mode_does_not_leak_between_contexts),
        cmocka_unit_test(control_words_do_not_leak_between_contexts),
        cmocka_unit_test(entry_is_aligned_and_backtrace_stops),
        cmocka_unit_test(returning_from_entry_aborts),
        cmocka_unit_test(bench_pingpong_switch_ns),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    stack_pool_free(pool);
    return r;
}
