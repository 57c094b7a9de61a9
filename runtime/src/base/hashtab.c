/* A chained hash table of string keys (FNV-1a), doubled when it averages two per bucket. */
#include "base/hashtab.h"

#include <stdlib.h>
#include <string.h>

int hashtab_init(hashtab *t, uint32_t buckets)
{
    uint32_t n = 1;
    while (n < buckets)
        n *= 2;
    t->buckets = calloc(n, sizeof *t->buckets);
    t->mask = n - 1;
    t->count = 0;
    return t->buckets ? 0 : -1;
}

void hashtab_destroy(hashtab *t, void (*free_node)(ht_node *n))
{
    if (!t->buckets)
        return;
    for (uint32_t i = 0; i <= t->mask; i++) {
        for (ht_node *n = t->buckets[i]; n;) {
            ht_node *next = n->next;
            if (free_node)
                free_node(n);
            n = next;
        }
    }
    free(t->buckets);
    t->buckets = NULL;
    t->count = 0;
}

uint32_t hashtab_hash(const char *key)
{
    uint32_t h = 2166136261u;
    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 16777619u;
    return h;
}

ht_node **hashtab_find(hashtab *t, const char *key, uint32_t hash)
{
    ht_node **p = &t->buckets[hash & t->mask];
    while (*p && ((*p)->hash != hash || strcmp((*p)->key, key) != 0))
        p = &(*p)->next;
    return p;
}

static void grow(hashtab *t)
{
    uint32_t mask = t->mask * 2 + 1;
    ht_node **nb = calloc((size_t)mask + 1, sizeof *nb);
    if (!nb)
        return; /* chains just get longer */
    for (uint32_t i = 0; i <= t->mask; i++) {
        for (ht_node *n = t->buckets[i]; n;) {
            ht_node *next = n->next;
            n->next = nb[n->hash & mask];
            nb[n->hash & mask] = n;
            n = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->mask = mask;
}

void hashtab_insert(hashtab *t, ht_node *n)
{
    ht_node **p = &t->buckets[n->hash & t->mask];
    n->next = *p;
    *p = n;
    if (++t->count > (t->mask + 1) * 2)
        grow(t);
}

ht_node *hashtab_unlink(hashtab *t, ht_node **link)
{
    ht_node *n = *link;
    *link = n->next;
    n->next = NULL;
    t->count--;
    return n;
}

void hashtab_filter(hashtab *t, int (*visit)(ht_node *n, void *ud), void *ud)
{
    for (uint32_t i = 0; i <= t->mask; i++) {
        for (ht_node **p = &t->buckets[i]; *p;) {
            ht_node *n = *p, *next = n->next;
            if (visit(n, ud)) {
                *p = next;
                t->count--;
            } else {
                p = &n->next;
            }
        }
    }
}
