/* Tests of the choice of a state pool (vm/pool_pick.h): the caller's own while it can, else
 * the first other one that can, and none when no pool can. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vm/pool_pick.h"

#define CAP 4

static void takes_from_its_own_pool_while_it_has_a_state(void **state)
{
    (void)state;
    uint32_t n[3] = {2, 1, 3};
    assert_int_equal(pool_pick(n, 3, 1, 1, CAP), 1);
    assert_int_equal(pool_pick(n, 3, 2, 1, CAP), 2);
}

static void takes_from_another_pool_when_its_own_is_empty(void **state)
{
    (void)state;
    uint32_t n[3] = {0, 0, 3};
    assert_int_equal(pool_pick(n, 3, 0, 1, CAP), 2);
    uint32_t m[3] = {1, 0, 3};
    assert_int_equal(pool_pick(m, 3, 1, 1, CAP), 0); /* the first that has one */
}

static void takes_none_when_every_pool_is_empty(void **state)
{
    (void)state;
    uint32_t n[3] = {0, 0, 0};
    assert_int_equal(pool_pick(n, 3, 1, 1, CAP), -1);
    /* pools past `used` do not count */
    uint32_t m[3] = {0, 0, 2};
    assert_int_equal(pool_pick(m, 2, 0, 1, CAP), -1);
}

static void puts_in_its_own_pool_while_it_has_room(void **state)
{
    (void)state;
    uint32_t n[2] = {CAP - 1, 0};
    assert_int_equal(pool_pick(n, 2, 0, 0, CAP), 0);
}

static void puts_in_another_pool_when_its_own_is_full(void **state)
{
    (void)state;
    uint32_t n[3] = {CAP, CAP, 1};
    assert_int_equal(pool_pick(n, 3, 0, 0, CAP), 2);
    uint32_t m[2] = {CAP, CAP};
    assert_int_equal(pool_pick(m, 2, 1, 0, CAP), -1); /* then the state is closed */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(takes_from_its_own_pool_while_it_has_a_state),
        cmocka_unit_test(takes_from_another_pool_when_its_own_is_empty),
        cmocka_unit_test(takes_none_when_every_pool_is_empty),
        cmocka_unit_test(puts_in_its_own_pool_while_it_has_room),
        cmocka_unit_test(puts_in_another_pool_when_its_own_is_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
