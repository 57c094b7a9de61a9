/* Tests of the string-keyed hash table shared by names and process groups: find, insert
 * through growth, unlink, filter, and destroy handing back what is left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashtab.h"

typedef struct entry {
    ht_node node;
    int value;
    char key[24];
} entry;

static entry *entry_new(const char *key, int value)
{
    entry *e = calloc(1, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->node.key = e->key;
    e->node.hash = hashtab_hash(key);
    e->value = value;
    return e;
}

static entry *lookup(hashtab *t, const char *key)
{
    return (entry *)*hashtab_find(t, key, hashtab_hash(key));
}

static int freed;
static void free_entry(ht_node *n)
{
    freed++;
    free(n);
}

static void insert_find_through_growth(void **state)
{
    (void)state;
    hashtab t;
    assert_int_equal(hashtab_init(&t, 3), 0);
    assert_int_equal(t.mask, 3); /* rounded up to a power of two */
    char key[24];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "name-%d", i);
        assert_null(lookup(&t, key));
        hashtab_insert(&t, &entry_new(key, i)->node);
    }
    assert_int_equal(t.count, 5000);
    assert_true(t.mask + 1 >= 5000 / 2); /* it grew */
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "name-%d", i);
        entry *e = lookup(&t, key);
        assert_non_null(e);
        assert_int_equal(e->value, i);
    }
    assert_null(lookup(&t, "name-5000"));
    assert_null(lookup(&t, ""));
    freed = 0;
    hashtab_destroy(&t, free_entry);
    assert_int_equal(freed, 5000);
}

static void unlink_removes_only_that_key(void **state)
{
    (void)state;
    hashtab t;
    assert_int_equal(hashtab_init(&t, 1), 0); /* one bucket: every key in one chain */
    hashtab_insert(&t, &entry_new("a", 1)->node);
    hashtab_insert(&t, &entry_new("b", 2)->node);
    hashtab_insert(&t, &entry_new("c", 3)->node);
    ht_node **link = hashtab_find(&t, "b", hashtab_hash("b"));
    entry *b = (entry *)hashtab_unlink(&t, link);
    assert_int_equal(b->value, 2);
    free(b);
    assert_int_equal(t.count, 2);
    assert_null(lookup(&t, "b"));
    assert_int_equal(lookup(&t, "a")->value, 1);
    assert_int_equal(lookup(&t, "c")->value, 3);
    freed = 0;
    hashtab_destroy(&t, free_entry);
    assert_int_equal(freed, 2);
}

static int drop_odd(ht_node *n, void *ud)
{
    entry *e = (entry *)n;
    (*(int *)ud)++;
    if (e->value % 2 == 0)
        return 0;
    free(e); /* the filter does not touch it again */
    return 1;
}

static void filter_visits_all_and_unlinks_chosen(void **state)
{
    (void)state;
    hashtab t;
    assert_int_equal(hashtab_init(&t, 4), 0);
    char key[24];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%d", i);
        hashtab_insert(&t, &entry_new(key, i)->node);
    }
    int visited = 0;
    hashtab_filter(&t, drop_odd, &visited);
    assert_int_equal(visited, 100);
    assert_int_equal(t.count, 50);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "k%d", i);
        if (i % 2)
            assert_null(lookup(&t, key));
        else
            assert_int_equal(lookup(&t, key)->value, i);
    }
    freed = 0;
    hashtab_destroy(&t, free_entry);
    assert_int_equal(freed, 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(insert_find_through_growth),
        cmocka_unit_test(unlink_removes_only_that_key),
        cmocka_unit_test(filter_visits_all_and_unlinks_chosen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
