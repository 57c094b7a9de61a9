/* A chained hash table of string keys with intrusive nodes: an entry embeds an ht_node as
 * its first member and points node.key at its own copy of the key. No lock: the owner
 * serialises access (the registry and pg each under their mutex). */
#ifndef SMARM_BASE_HASHTAB_H
#define SMARM_BASE_HASHTAB_H

#include <stdint.h>

typedef struct ht_node {
    struct ht_node *next;
    uint32_t hash;
    const char *key;
} ht_node;

typedef struct hashtab {
    ht_node **buckets;
    uint32_t mask, count;
} hashtab;

/* 0, or -1 when out of memory. buckets is rounded up to a power of two. */
int hashtab_init(hashtab *t, uint32_t buckets);
/* Frees the bucket array; each node still in the table is handed to free_node first. */
void hashtab_destroy(hashtab *t, void (*free_node)(ht_node *n));
uint32_t hashtab_hash(const char *key);
/* The link that holds key's node, or the empty link where it would go: *result is the node
 * or NULL. Valid until the table changes. */
ht_node **hashtab_find(hashtab *t, const char *key, uint32_t hash);
/* Adds node n (its hash and key set, its key not in the table); may grow the table. */
void hashtab_insert(hashtab *t, ht_node *n);
/* Unlinks the node at link (from hashtab_find) and returns it. */
ht_node *hashtab_unlink(hashtab *t, ht_node **link);
/* Calls visit on every node; when visit returns nonzero the node is unlinked (visit then
 * owns it and may free it: it is not touched again). */
void hashtab_filter(hashtab *t, int (*visit)(ht_node *n, void *ud), void *ud);

#endif
