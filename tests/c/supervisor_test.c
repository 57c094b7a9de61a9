/* Tests of the supervisor bookkeeping: the restart-intensity ring at its exact
 * boundaries (against OTP's list walk), restart decisions per restart type, the
 * children each strategy cycles, start and reverse order, deletion and counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/supervisor.h"

static void intensity_allows_exactly_intensity_restarts_within_the_period(void **state)
{
    (void)state;
    smarm_sup *s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, 3, 5.0);
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 0.0), 1);
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 1.0), 1);
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 2.0), 1);
    /* a fourth within 5 s of the first trips; exactly 5 s apart counts as within */
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 5.0), 0);
    smarm_ffi_sup_free(s);

    s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, 3, 5.0);
    smarm_ffi_sup_restart_allowed(s, 0.0);
    smarm_ffi_sup_restart_allowed(s, 1.0);
    smarm_ffi_sup_restart_allowed(s, 2.0);
    /* just past the period of the oldest: allowed, and the window slides */
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 5.001), 1);
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 6.0), 0); /* 1, 2, 5.001 within 5 */
    smarm_ffi_sup_free(s);
}

static void intensity_zero_never_restarts(void **state)
{
    (void)state;
    smarm_sup *s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, 0, 5.0);
    assert_int_equal(smarm_ffi_sup_restart_allowed(s, 100.0), 0);
    smarm_ffi_sup_free(s);
}

/* OTP's rule, walked as OTP walks it: keep the restarts within the period, add
 * this one, trip when there are more than intensity. */
static int otp_allowed(double *hist, int *n, double now, int intensity, double period)
{
    int k = 0;
    for (int i = 0; i < *n; i++)
        if (now - hist[i] <= period)
            hist[k++] = hist[i];
    hist[k++] = now;
    *n = k;
    return k <= intensity;
}

static void intensity_ring_agrees_with_otp_on_random_arrivals(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (int intensity = 1; intensity <= 12; intensity++) {
        smarm_sup *s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, intensity, 1.0);
        double *hist = malloc(100000 * sizeof *hist);
        int n = 0;
        double now = 0;
        for (int i = 0; i < 20000; i++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            now += (double)(seed % 1000) / 2000.0; /* gaps of 0..0.5 s */
            int want = otp_allowed(hist, &n, now, intensity, 1.0);
            int got = smarm_ffi_sup_restart_allowed(s, now);
            assert_int_equal(want, got);
            if (!want) { /* the supervisor would stop: start a fresh one */
                smarm_ffi_sup_free(s);
                s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, intensity, 1.0);
                n = 0;
            }
        }
        free(hist);
        smarm_ffi_sup_free(s);
    }
}

static void huge_intensity_costs_only_what_is_used(void **state)
{
    (void)state;
    smarm_sup *s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, 2000000000, 1.0);
    for (int i = 0; i < 100000; i++)
        assert_int_equal(smarm_ffi_sup_restart_allowed(s, i * 1e-6), 1);
    smarm_ffi_sup_free(s);
}

static int exited(smarm_sup *s, uint64_t pid, int abnormal, int32_t *out)
{
    return smarm_ffi_sup_child_exited(s, pid, abnormal, out, 16);
}

static void restart_types_decide(void **state)
{
    (void)state;
    int32_t out[16];
    smarm_sup *s = smarm_ffi_sup_new(SMARM_SUP_ONE_FOR_ONE, 3, 5.0);
    int32_t p = smarm_ffi_sup_add_child(s, SMARM_SUP_PERMANENT, 5, 0);
    int32_t t = smarm_ffi_sup_add_child(s, SMARM_SUP_TRANSIENT, 5, 0);
    int32_t x = smarm_ffi_sup_add_child(s, SMARM_SUP_TEMPORARY, SMARM_SUP_BRUTAL_KILL, 0);
    smarm_ffi_sup_set_pid(s, p, 101);
    smarm_ffi_sup_set_pid(s, t, 102);
    smarm_ffi_sup_set_pid(s, x, 103);
    assert_int_equal(smarm_ffi_sup_key_of(s, 102), t);
    assert_int_equal(exited(s, 101, 0, out), 1); /* permanent: even a normal exit */
    assert_int_equal(out[0], p);
    assert_int_equal(smarm_ffi_sup_pid(s, p), 0);
    assert_int_equal(exited(s, 102, 0, out), 0); /* transient, normal: no */
    smarm_ffi_sup_set_pid(s, t, 104);
    assert_int_equal(exited(s, 104, 1, out), 1); /* transient, abnormal: yes */
    assert_int_equal(exited(s, 103, 1, out), 0); /* temporary: never, and removed */
    assert_int_equal(smarm_ffi_sup_restart_type(s, x), -1);
    assert_int_equal(exited(s, 999, 1, out), -1); /* not a child */
    assert_int_equal(smarm_ffi_sup_children(s, out, 16, 0), 2);
    smarm_ffi_sup_free(s);
}

static smarm_sup *five(int strategy, int32_t *keys)
{
    smarm_sup *s = smarm_ffi_sup_new(strategy, 3, 5.0);
    for (int i = 0; i < 5; i++) {
        keys[i] = smarm_ffi_sup_add_child(s, SMARM_SUP_PERMANENT, 5, i == 4);
        smarm_ffi_sup_set_pid(s, keys[i], 200 + i);
    }
    return s;
}

static void strategies_cycle_the_right_children_in_start_order(void **state)
{
    (void)state;
    int32_t k[5], out[16];
    smarm_sup *s = five(SMARM_SUP_ONE_FOR_ONE, k);
    assert_int_equal(exited(s, 202, 1, out), 1);
    assert_int_equal(out[0], k[2]);
    smarm_ffi_sup_free(s);

    s = five(SMARM_SUP_ONE_FOR_ALL, k);
    assert_int_equal(exited(s, 202, 1, out), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(out[i], k[i]);
    smarm_ffi_sup_free(s);

    s = five(SMARM_SUP_REST_FOR_ONE, k);
    assert_int_equal(exited(s, 202, 1, out), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(out[i], k[2 + i]);
    smarm_ffi_sup_free(s);
}

static void order_queries_delete_and_count(void **state)
{
    (void)state;
    int32_t k[5], out[16], n[4];
    smarm_sup *s = five(SMARM_SUP_ONE_FOR_ONE, k);
    assert_int_equal(smarm_ffi_sup_children(s, out, 16, 1), 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(out[i], k[4 - i]);
    /* a short buffer gets a prefix and the full count */
    assert_int_equal(smarm_ffi_sup_children(s, out, 2, 0), 5);
    assert_int_equal(out[1], k[1]);

    assert_int_equal(smarm_ffi_sup_delete_child(s, k[1]), -2); /* running */
    smarm_ffi_sup_set_pid(s, k[1], 0);
    assert_int_equal(smarm_ffi_sup_delete_child(s, k[1]), 0);
    assert_int_equal(smarm_ffi_sup_delete_child(s, k[1]), -1);
    assert_int_equal(smarm_ffi_sup_children(s, out, 16, 0), 4);
    assert_int_equal(out[1], k[2]);
    /* keys are not reused */
    assert_true(smarm_ffi_sup_add_child(s, SMARM_SUP_PERMANENT, SMARM_SUP_INFINITY, 0) > k[4]);
    smarm_ffi_sup_count(s, n);
    assert_int_equal(n[0], 5);
    assert_int_equal(n[1], 4);
    assert_int_equal(n[2], 1);
    assert_int_equal(n[3], 4);
    /* the counts are kept as children exit, restart and go (count_children is O(1)) */
    assert_int_equal(smarm_ffi_sup_child_exited(s, 200, 1, out, 16), 1);
    smarm_ffi_sup_count(s, n);
    assert_int_equal(n[1], 3);
    smarm_ffi_sup_set_pid(s, k[0], 300);
    smarm_ffi_sup_set_pid(s, k[0], 301); /* a pid replaced counts once */
    smarm_ffi_sup_count(s, n);
    assert_int_equal(n[1], 4);
    int32_t t = smarm_ffi_sup_add_child(s, SMARM_SUP_TEMPORARY, 5, 1);
    smarm_ffi_sup_set_pid(s, t, 400);
    smarm_ffi_sup_count(s, n);
    assert_int_equal(n[0], 6);
    assert_int_equal(n[1], 5);
    assert_int_equal(n[2], 2);
    assert_int_equal(smarm_ffi_sup_child_exited(s, 400, 0, out, 16), 0); /* removed */
    smarm_ffi_sup_count(s, n);
    assert_int_equal(n[0], 5);
    assert_int_equal(n[1], 4);
    assert_int_equal(n[2], 1);
    assert_int_equal(n[3], 4);
    assert_true(smarm_ffi_sup_shutdown(s, k[0]) == 5.0);
    assert_int_equal(smarm_ffi_sup_is_sup(s, k[4]), 1);
    smarm_ffi_sup_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(intensity_allows_exactly_intensity_restarts_within_the_period),
        cmocka_unit_test(intensity_zero_never_restarts),
        cmocka_unit_test(intensity_ring_agrees_with_otp_on_random_arrivals),
        cmocka_unit_test(huge_intensity_costs_only_what_is_used),
        cmocka_unit_test(restart_types_decide),
        cmocka_unit_test(strategies_cycle_the_right_children_in_start_order),
        cmocka_unit_test(order_queries_delete_and_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
