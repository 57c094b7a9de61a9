/* Tests of an actor's link set: adds without duplicates, removals in any order, with and
 * without the index (few links, many links), always the same set as a plain model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/actor.h"
#include "core/linkset.h"

static int has(const actor *a, uint64_t pid)
{
    for (uint32_t i = 0; i < a->ex.nlinks; i++)
        if (a->ex.links[i] == pid)
            return 1;
    return 0;
}

static void check_against(const actor *a, const unsigned char *model, uint64_t n)
{
    uint32_t count = 0;
    for (uint64_t p = 1; p <= n; p++) {
        assert_int_equal(has(a, p), model[p]);
        count += model[p];
    }
    assert_int_equal(a->ex.nlinks, count);
}

/* A zeroed actor record, aligned as the slab aligns it (to cache lines). */
static actor *new_actor(void)
{
    actor *a = aligned_alloc(_Alignof(actor), sizeof *a);
    assert_non_null(a);
    memset(a, 0, sizeof *a);
    return a;
}

static void adds_and_removes_match_a_model(void **state)
{
    (void)state;
    enum { N = 5000 };
    actor *a = new_actor();
    unsigned char *model = calloc(N + 1, 1);
    srand(7);
    for (int round = 0; round < 20000; round++) {
        uint64_t pid = (uint64_t)(rand() % N) + 1;
        if (rand() % 3) {
            assert_int_equal(linkset_add(a, pid), 0);
            model[pid] = 1;
        } else {
            linkset_remove(a, pid);
            model[pid] = 0;
        }
        if (round % 4000 == 0)
            check_against(a, model, N);
    }
    check_against(a, model, N);
    assert_non_null(a->ex.link_index); /* many links: indexed */
    /* remove all: the set empties, re-adding works */
    for (uint64_t p = 1; p <= N; p++)
        linkset_remove(a, p);
    assert_int_equal(a->ex.nlinks, 0);
    assert_int_equal(linkset_add(a, 42), 0);
    assert_int_equal(linkset_add(a, 42), 0);
    assert_int_equal(a->ex.nlinks, 1);
    linkset_drop_index(a);
    free(a->ex.links);
    free(a);
    free(model);
}

static void few_links_need_no_index(void **state)
{
    (void)state;
    actor *a = new_actor();
    for (uint64_t p = 1; p <= 8; p++)
        assert_int_equal(linkset_add(a, p), 0);
    assert_null(a->ex.link_index);
    linkset_remove(a, 3);
    assert_false(has(a, 3));
    assert_int_equal(a->ex.nlinks, 7);
    free(a->ex.links);
    free(a);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adds_and_removes_match_a_model),
        cmocka_unit_test(few_links_need_no_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
