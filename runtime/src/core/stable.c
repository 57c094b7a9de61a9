/* Shared tables: a chained hash table whose buckets are guarded by STRIPES reader-writer
 * spinlocks (bucket b by stripe b % STRIPES). The bucket count is a multiple of STRIPES, so
 * a key's stripe is fixed by its hash whatever the size; growing takes every stripe. Values
 * are reference-counted blobs: a reader copies a small one under the read lock, or retains a
 * bigger one and decodes it after, and a writer swaps the pointer and releases the old blob
 * after unlocking. The names, and which actor owns which table, are under one mutex taken
 * only to create, open, hand over or delete a table.
 *
 * The read locks write nothing that another core reads or writes: a reader counts itself
 * in its thread's reader group (READER_GROUPS lines of counters per table, one counter per
 * stripe), then checks the stripe's writer word, which only writers store to. A writer takes
 * that word, then waits for every group's count on the stripe to drain. So two schedulers
 * reading one table at once each keep their own lines, where a count in the stripe's word
 * and a reference on the value's blob moved two lines between their cores per lookup. */
#include "core/stable.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/critical.h"
#include "base/hashtab.h"
#include "base/slot.h"
#include "base/spin.h"
#include "base/wire.h"
#include "base/zalloc.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "core/scheduler.h"

#define STRIPES 64
#define MIN_BUCKETS 256
/* Threads share a group (and its lines) only past this many readers */
#define READER_GROUPS 16
#define WRITER 1u

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    stab_blob *key, *val;
} entry;

/* a stripe's writer word alone in its cache line: writers of different stripes share
 * nothing, and readers only load it */
typedef struct stripe {
    _Alignas(64) _Atomic uint32_t writer;
} stripe;

/* One reader group's count of the readers inside each stripe: its lines are written by the
 * group's threads alone (and read by writers) */
typedef struct reader_group {
    _Alignas(64) _Atomic uint32_t inside[STRIPES];
} reader_group;

struct stab {
    ht_node node; /* first (the names table's nodes are cast to tables); node.key = name */
    reader_group readers[READER_GROUPS];
    stripe stripes[STRIPES];
    entry **buckets; /* nbuckets; both change only with every stripe held for writing */
    uint64_t nbuckets;
    _Atomic uint64_t count, bytes;
    _Atomic uint32_t refs;
    _Atomic uint64_t owner; /* 0 once deleted */
    uint64_t heir;          /* under the names mutex */
    int access;
    struct stab *owned_next; /* in the owner's list, under the names mutex */
    char name[];
};

typedef struct stab_names {
    pthread_mutex_t lock;
    hashtab names;
} stab_names;

stab_blob *stab_blob_new(const char *data, size_t len)
{
    if (len > UINT32_MAX)
        return NULL;
    stab_blob *b = malloc(sizeof *b + len);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = (uint32_t)len;
    memcpy(b->data, data, len);
    return b;
}

void stab_blob_release(stab_blob *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

static uint64_t blob_bytes(const stab_blob *b) { return sizeof *b + b->len; }

uint64_t stab_hash(const char *key, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int stab_init(struct smarm_runtime *rt)
{
    stab_names *n = calloc(1, sizeof *n);
    if (!n || hashtab_init(&n->names, 16) != 0) {
        free(n);
        return SMARM_ENOMEM;
    }
    pthread_mutex_init(&n->lock, NULL);
    rt->tables = n;
    return 0;
}

/* Every actor is gone by now: the tables left are those the handles of closed states kept. */
static void unname(ht_node *n) { (void)n; }

void stab_free(struct smarm_runtime *rt)
{
    stab_names *n = rt->tables;
    if (!n)
        return;
    hashtab_destroy(&n->names, unname);
    pthread_mutex_destroy(&n->lock);
    free(n);
    rt->tables = NULL;
}

static int alive(struct smarm_runtime *rt, uint64_t pid)
{
    slot *sl = slot_of(&rt->slots, pid);
    if (!sl)
        return 0;
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_seq_cst);
    return slot_word_gen(w) == pid_gen(pid) && slot_word_state(w) != SLOT_DONE;
}

/* The calling thread's reader group: threads are given groups in turn at their first read */
static unsigned my_group(void)
{
    static _Atomic unsigned next;
    static _Thread_local unsigned group; /* 1 + the group; 0 before the first read */
    if (__builtin_expect(!group, 0))
        group = 1 + atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % READER_GROUPS;
    return group - 1;
}

/* The read lock of stripe s: the caller's group counts it unless a writer holds the stripe,
 * then it waits for the writer. seq_cst on both sides: either the writer's load of the count
 * sees this reader, or this reader's load of the writer word sees the writer. Returns the
 * count to give back to read_unlock. */
static _Atomic uint32_t *read_lock(stab *t, unsigned s)
{
    _Atomic uint32_t *inside = &t->readers[my_group()].inside[s];
    _Atomic uint32_t *w = &t->stripes[s].writer;
    int spins = 0;
    crit_enter();
    for (;;) {
        atomic_fetch_add_explicit(inside, 1, memory_order_seq_cst);
        if (!atomic_load_explicit(w, memory_order_seq_cst))
            return inside;
        atomic_fetch_sub_explicit(inside, 1, memory_order_relaxed);
        while (atomic_load_explicit(w, memory_order_relaxed))
            spin_backoff(&spins);
    }
}

/* release: the reads inside come before a writer that sees the count drop */
static void read_unlock(_Atomic uint32_t *inside)
{
    atomic_fetch_sub_explicit(inside, 1, memory_order_release);
    crit_exit();
}

/* The write lock of stripe s: writers take its word in turn (new readers wait from then on),
 * then each group's readers inside leave. */
static void write_lock(stab *t, unsigned s)
{
    _Atomic uint32_t *w = &t->stripes[s].writer;
    int spins = 0;
    crit_enter();
    for (;;) {
        uint32_t free_word = 0;
        if (!atomic_load_explicit(w, memory_order_relaxed) &&
            atomic_compare_exchange_weak_explicit(w, &free_word, WRITER, memory_order_seq_cst,
                                                  memory_order_relaxed))
            break;
        spin_backoff(&spins);
    }
    for (unsigned g = 0; g < READER_GROUPS; g++)
        while (atomic_load_explicit(&t->readers[g].inside[s], memory_order_seq_cst))
            spin_backoff(&spins);
}

/* release: publishes what was written under the lock to the next reader or writer */
static void write_unlock(stab *t, unsigned s)
{
    atomic_store_explicit(&t->stripes[s].writer, 0, memory_order_release);
    crit_exit();
}

static void lock_all(stab *t)
{
    for (unsigned i = 0; i < STRIPES; i++)
        write_lock(t, i);
}

static void unlock_all(stab *t)
{
    for (unsigned i = STRIPES; i-- > 0;)
        write_unlock(t, i);
}

/* Drops every entry (the owner died without an heir); handles see a dead table from here. */
static void clear(stab *t)
{
    atomic_store_explicit(&t->owner, 0, memory_order_release);
    lock_all(t);
    entry **b = t->buckets;
    uint64_t nb = t->nbuckets;
    t->buckets = NULL;
    t->nbuckets = 0;
    atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->bytes, 0, memory_order_relaxed);
    unlock_all(t);
    for (uint64_t i = 0; i < nb; i++) {
        for (entry *e = b[i], *next; e; e = next) {
            next = e->next;
            stab_blob_release(e->key);
            stab_blob_release(e->val);
            free(e);
        }
    }
    free(b);
}

int stab_new(struct smarm_runtime *rt, const char *name, uint64_t owner, int access, uint64_t heir,
             stab **out)
{
    stab_names *n = rt->tables;
    size_t len = strlen(name) + 1;
    /* aligned: each reader group's counters and each writer word on lines of their own */
    stab *t = zalloc_aligned(64, sizeof *t + len);
    entry **b = calloc(MIN_BUCKETS, sizeof *b);
    if (!t || !b) {
        free(t);
        free(b);
        return STAB_NOMEM;
    }
    memcpy(t->name, name, len);
    t->node.key = t->name;
    t->node.hash = hashtab_hash(name);
    t->buckets = b;
    t->nbuckets = MIN_BUCKETS;
    atomic_init(&t->bytes, sizeof *t + len + MIN_BUCKETS * sizeof *b);
    atomic_init(&t->refs, 2); /* the caller's and the owner's */
    atomic_init(&t->owner, owner);
    t->heir = heir;
    t->access = access;
    actor *a = sched_actor(rt, owner);
    mutex_lock(&n->lock);
    int rc = STAB_OK;
    if (*hashtab_find(&n->names, name, t->node.hash))
        rc = STAB_EXISTS;
    else if (!a || !alive(rt, owner))
        rc = STAB_NOOWNER;
    if (rc == STAB_OK) {
        hashtab_insert(&n->names, &t->node);
        t->owned_next = atomic_load_explicit(&a->names.tables, memory_order_relaxed);
        atomic_store_explicit(&a->names.tables, t, memory_order_seq_cst);
    }
    mutex_unlock(&n->lock);
    if (rc != STAB_OK) {
        free(b);
        free(t);
        return rc;
    }
    *out = t;
    return STAB_OK;
}

stab *stab_open(struct smarm_runtime *rt, const char *name)
{
    stab_names *n = rt->tables;
    mutex_lock(&n->lock);
    stab *t = (stab *)*hashtab_find(&n->names, name, hashtab_hash(name));
    if (t)
        stab_retain(t);
    mutex_unlock(&n->lock);
    return t;
}

void stab_retain(stab *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

void stab_release(stab *t)
{
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    clear(t);
    free(t);
}

const char *stab_name(const stab *t) { return t->name; }
int stab_access(const stab *t) { return t->access; }
uint64_t stab_owner(const stab *t) { return atomic_load_explicit(&t->owner, memory_order_acquire); }
int stab_dead(const stab *t) { return stab_owner(t) == 0; }
uint64_t stab_size(const stab *t) { return atomic_load_explicit(&t->count, memory_order_relaxed); }
uint64_t stab_memory(const stab *t)
{
    return atomic_load_explicit(&t->bytes, memory_order_relaxed);
}

uint64_t stab_owned_memory(struct smarm_runtime *rt, actor *a)
{
    stab_names *n = rt->tables;
    uint64_t sum = 0;
    if (!atomic_load_explicit(&a->names.tables, memory_order_acquire))
        return 0;
    mutex_lock(&n->lock);
    for (stab *t = atomic_load_explicit(&a->names.tables, memory_order_relaxed); t;
         t = t->owned_next)
        sum += stab_memory(t);
    mutex_unlock(&n->lock);
    return sum;
}

static unsigned stripe_of(uint64_t hash) { return (unsigned)(hash % STRIPES); }

/* The link holding key in its bucket (stripe held), or the bucket's end. */
static entry **find(stab *t, uint64_t hash, const char *key, size_t klen)
{
    entry **p = &t->buckets[hash & (t->nbuckets - 1)];
    while (*p && ((*p)->hash != hash || (*p)->key->len != klen ||
                  memcmp((*p)->key->data, key, klen) != 0))
        p = &(*p)->next;
    return p;
}

/* Doubles the buckets when the load passes 2 (best effort: out of memory keeps them). */
static void maybe_grow(stab *t)
{
    uint64_t nb = t->nbuckets;
    if (atomic_load_explicit(&t->count, memory_order_relaxed) <= nb * 2)
        return;
    entry **fresh = calloc(nb * 2, sizeof *fresh);
    if (!fresh)
        return;
    lock_all(t);
    if (t->nbuckets != nb || !t->buckets) { /* another writer grew it, or it died */
        unlock_all(t);
        free(fresh);
        return;
    }
    entry **old = t->buckets;
    for (uint64_t i = 0; i < nb; i++) {
        for (entry *e = old[i], *next; e; e = next) {
            next = e->next;
            entry **slot = &fresh[e->hash & (nb * 2 - 1)];
            e->next = *slot;
            *slot = e;
        }
    }
    t->buckets = fresh;
    t->nbuckets = nb * 2;
    atomic_fetch_add_explicit(&t->bytes, nb * sizeof *fresh, memory_order_relaxed);
    unlock_all(t);
    free(old);
}

/* The end of a write under bucket lock l: the lock goes, then what the write did not keep
 * (an unused entry, a key not linked, the value replaced) is freed, then the table grows
 * if the write linked a new entry. */
static void write_done(stab *t, unsigned l, entry *fresh, stab_blob *key, stab_blob *old, int grew)
{
    write_unlock(t, l);
    free(fresh);
    stab_blob_release(key);
    stab_blob_release(old);
    if (grew)
        maybe_grow(t);
}

/* Links e (made before the lock) at the end of a bucket's chain, *p, for key and val: the
 * table's count and bytes follow; the stripe's write lock is held. */
static void link_entry(stab *t, entry **p, entry *e, uint64_t h, stab_blob *key, stab_blob *val)
{
    *e = (entry){NULL, h, key, val};
    *p = e;
    atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t->bytes, sizeof(entry) + blob_bytes(key) + blob_bytes(val),
                              memory_order_relaxed);
}

int stab_insert(stab *t, stab_blob *key, stab_blob *val)
{
    uint64_t h = stab_hash(key->data, key->len);
    entry *fresh = malloc(sizeof *fresh);
    if (!fresh) {
        stab_blob_release(key);
        stab_blob_release(val);
        return STAB_NOMEM;
    }
    unsigned l = stripe_of(h);
    stab_blob *old = NULL;
    int grew = 0;
    write_lock(t, l);
    if (!t->buckets) {
        write_unlock(t, l);
        free(fresh);
        stab_blob_release(key);
        stab_blob_release(val);
        return STAB_DEAD;
    }
    entry **p = find(t, h, key->data, key->len);
    if (*p) {
        old = (*p)->val;
        (*p)->val = val;
        atomic_fetch_add_explicit(&t->bytes, blob_bytes(val) - blob_bytes(old),
                                  memory_order_relaxed);
    } else {
        link_entry(t, p, fresh, h, key, val);
        fresh = NULL;
        key = NULL;
        grew = 1;
    }
    write_done(t, l, fresh, key, old, grew);
    return STAB_OK;
}

stab_blob *stab_lookup_small(stab *t, const char *key, size_t klen, char *buf, size_t cap,
                             size_t *len)
{
    uint64_t h = stab_hash(key, klen);
    stab_blob *v = NULL;
    *len = STAB_ABSENT;
    _Atomic uint32_t *inside = read_lock(t, stripe_of(h));
    if (t->buckets) {
        entry *e = *find(t, h, key, klen);
        if (e) {
            *len = e->val->len;
            if (e->val->len <= cap) {
                memcpy(buf, e->val->data, e->val->len);
            } else {
                v = e->val;
                stab_blob_retain(v);
            }
        }
    }
    read_unlock(inside);
    return v;
}

stab_blob *stab_lookup(stab *t, const char *key, size_t klen)
{
    size_t len;
    return stab_lookup_small(t, key, klen, NULL, 0, &len);
}

int stab_delete(stab *t, const char *key, size_t klen)
{
    uint64_t h = stab_hash(key, klen);
    unsigned l = stripe_of(h);
    entry *gone = NULL;
    write_lock(t, l);
    if (!t->buckets) {
        write_unlock(t, l);
        return STAB_DEAD;
    }
    entry **p = find(t, h, key, klen);
    if (*p) {
        gone = *p;
        *p = gone->next;
        atomic_fetch_sub_explicit(&t->count, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&t->bytes,
                                  sizeof(entry) + blob_bytes(gone->key) + blob_bytes(gone->val),
                                  memory_order_relaxed);
    }
    write_unlock(t, l);
    if (!gone)
        return 0;
    stab_blob_release(gone->key);
    stab_blob_release(gone->val);
    free(gone);
    return 1;
}

/* A number in the message format, as the codec writes one. */
static int read_number(const stab_blob *b, double *out)
{
    const unsigned char *p = (const unsigned char *)b->data;
    size_t n = b->len;
    if (n == 0)
        return -1;
    if (p[0] >= WIRE_FIXINT && n == 1) {
        *out = p[0] - WIRE_FIXINT;
        return 0;
    }
    if (p[0] == WIRE_I8 && n == 2) {
        *out = (int8_t)p[1];
        return 0;
    }
    if (p[0] == WIRE_I16 && n == 3) {
        int16_t v;
        memcpy(&v, p + 1, 2);
        *out = v;
        return 0;
    }
    if (p[0] == WIRE_I32 && n == 5) {
        int32_t v;
        memcpy(&v, p + 1, 4);
        *out = v;
        return 0;
    }
    if (p[0] == WIRE_DOUBLE && n == 9) {
        memcpy(out, p + 1, 8);
        return 0;
    }
    return -1;
}

static void write_number(stab_blob *b, double d)
{
    b->data[0] = (char)WIRE_DOUBLE;
    memcpy(b->data + 1, &d, 8);
    b->len = 9;
}

/* A value blob a counter's update may write over: a double already (its 9 bytes are there)
 * that nothing but the table holds. Readers copy a small blob or retain it under the stripe's
 * read lock, which the caller holds for writing, so none can take it meanwhile; the acquire
 * pairs with the release of the last reader that let it go, whose reads of it come before the
 * write. */
static int writable_number(stab_blob *v)
{
    return v->len == 9 && atomic_load_explicit(&v->refs, memory_order_acquire) == 1;
}

int stab_update_counter(stab *t, const char *key, size_t klen, double incr, int has_default,
                        double deflt, double *out)
{
    uint64_t h = stab_hash(key, klen);
    unsigned l = stripe_of(h);
    /* What a write may need that the table has not: made outside the lock, once a try under
     * it found them needed (then the next try has them, whatever changed meanwhile). An
     * update of a counter nothing else holds needs none of them. */
    stab_blob *nv = NULL, *kb = NULL, *old = NULL;
    entry *fresh = NULL;
    int rc, grew = 0;
    for (;;) {
        int absent = 0;
        write_lock(t, l);
        if (!t->buckets) {
            rc = STAB_DEAD;
            break;
        }
        entry **p = find(t, h, key, klen);
        double cur;
        if (*p) {
            stab_blob *v = (*p)->val;
            if (read_number(v, &cur) != 0) {
                rc = STAB_NOTNUM;
                break;
            }
            int in_place = writable_number(v);
            if (in_place || nv) {
                if (in_place) {
                    write_number(v, cur + incr);
                } else {
                    write_number(nv, cur + incr); /* its length first: the count reads it */
                    old = v;
                    (*p)->val = nv;
                    atomic_fetch_add_explicit(&t->bytes, blob_bytes(nv) - blob_bytes(v),
                                              memory_order_relaxed);
                    nv = NULL;
                }
                *out = cur + incr;
                rc = STAB_OK;
                break;
            }
        } else if (!has_default) {
            rc = 1;
            break;
        } else if (nv && kb && fresh) {
            write_number(nv, deflt + incr);
            link_entry(t, p, fresh, h, kb, nv);
            *out = deflt + incr;
            fresh = NULL;
            kb = nv = NULL;
            grew = 1;
            rc = STAB_OK;
            break;
        } else {
            absent = 1;
        }
        write_unlock(t, l);
        if (!nv && (nv = malloc(sizeof *nv + 9)))
            atomic_init(&nv->refs, 1);
        if (absent && !kb)
            kb = stab_blob_new(key, klen);
        if (absent && !fresh)
            fresh = malloc(sizeof *fresh);
        if (!nv || (absent && (!kb || !fresh))) {
            free(nv);
            free(fresh);
            stab_blob_release(kb);
            return STAB_NOMEM;
        }
    }
    free(nv);
    write_done(t, l, fresh, kb, old, grew);
    return rc;
}

int stab_snapshot(stab *t, stab_blob ***out, size_t *n)
{
    for (;;) {
        uint64_t want = stab_size(t) + 16;
        stab_blob **arr = malloc(2 * want * sizeof *arr);
        if (!arr)
            return STAB_NOMEM;
        _Atomic uint32_t *held[STRIPES];
        for (int i = 0; i < STRIPES; i++)
            held[i] = read_lock(t, (unsigned)i);
        size_t k = 0;
        int rc = t->buckets ? STAB_OK : STAB_DEAD;
        if (rc == STAB_OK && stab_size(t) > want)
            rc = 1; /* grew since it was measured: measure again */
        for (uint64_t b = 0; rc == STAB_OK && b < t->nbuckets; b++) {
            for (entry *e = t->buckets[b]; e; e = e->next) {
                stab_blob_retain(e->key);
                stab_blob_retain(e->val);
                arr[k++] = e->key;
                arr[k++] = e->val;
            }
        }
        for (int i = STRIPES; i-- > 0;)
            read_unlock(held[i]);
        if (rc == 1) {
            free(arr);
            continue;
        }
        if (rc != STAB_OK) {
            free(arr);
            return rc;
        }
        *out = arr;
        *n = k / 2;
        return STAB_OK;
    }
}

/* Names mutex held: t leaves its owner's list (whose head is at *head). */
static void unlink_owned(stab *_Atomic *head, stab *t)
{
    stab *prev = NULL;
    for (stab *s = atomic_load_explicit(head, memory_order_relaxed); s; s = s->owned_next) {
        if (s == t) {
            if (prev)
                prev->owned_next = t->owned_next;
            else
                atomic_store_explicit(head, t->owned_next, memory_order_relaxed);
            return;
        }
        prev = s;
    }
}

void stab_finalize(struct smarm_runtime *rt, actor *a)
{
    /* the slot reads DONE (seq_cst) before this load: a hand-over to a that misses the death
     * finds a dead after putting the table in its list, under the lock (see below) */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&a->names.tables, memory_order_seq_cst))
        return;
    stab_names *n = rt->tables;
    stab *dying = NULL;
    mutex_lock(&n->lock);
    stab *t = atomic_load_explicit(&a->names.tables, memory_order_relaxed);
    atomic_store_explicit(&a->names.tables, NULL, memory_order_relaxed);
    while (t) {
        stab *next = t->owned_next;
        uint64_t heir = t->heir;
        actor *h = heir ? sched_actor(rt, heir) : NULL;
        t->heir = 0; /* an heir inherits once, as in OTP */
        int handed = 0;
        if (h && alive(rt, heir)) {
            atomic_store_explicit(&t->owner, heir, memory_order_release);
            t->owned_next = atomic_load_explicit(&h->names.tables, memory_order_relaxed);
            atomic_store_explicit(&h->names.tables, t, memory_order_seq_cst);
            atomic_thread_fence(memory_order_seq_cst);
            handed = alive(rt, heir);
            if (!handed) /* the heir died meanwhile and may have looked already */
                unlink_owned(&h->names.tables, t);
        }
        if (!handed) {
            hashtab_unlink(&n->names, hashtab_find(&n->names, t->name, t->node.hash));
            atomic_store_explicit(&t->owner, 0, memory_order_release);
            t->owned_next = dying;
            dying = t;
        }
        t = next;
    }
    mutex_unlock(&n->lock);
    while (dying) {
        stab *next = dying->owned_next;
        clear(dying);
        stab_release(dying); /* the owner's reference */
        dying = next;
    }
}
