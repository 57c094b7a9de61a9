/* Process groups under one mutex: a hash table of groups, each an array of members
 * with the node and incarnation shape the distribution will need (a single
 * node for now). Liveness is read from slot words under the lock.
 *
 * A death takes the lock only when the actor is in a group: its finalize marks the slot
 * DONE, then (after a full fence) reads the actor's count of joins; a join counts itself,
 * then (after a full fence) reads the slot again and undoes itself if it finds DONE. One of
 * the two sees the other's write, so no dead member is left and no count stays on the
 * record for the next actor in it (core/registry.c does the same for names). */
#include "base/critical.h"
#include "core/pg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hashtab.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "core/scheduler.h"

typedef struct member {
    uint64_t pid;
    uint32_t node;        /* 0: this node */
    uint32_t incarnation; /* of the node the pid lives on */
} member;

typedef struct group {
    ht_node node; /* key: name */
    member *m;
    uint32_t n, cap;
    char name[];
} group;

struct pg {
    pthread_mutex_t lock;
    hashtab groups;
    uint32_t incarnation;
    uint64_t rng;
};

/* An actor's count of joins: written under the lock, read by its finalize without it. */
static inline uint32_t joins_of(const actor *a)
{
    return __atomic_load_n(&a->names.pg_joins, __ATOMIC_RELAXED);
}
static inline void set_joins(actor *a, uint32_t n)
{
    __atomic_store_n(&a->names.pg_joins, n, __ATOMIC_RELAXED);
}

static int alive(struct smarm_runtime *rt, uint64_t pid)
{
    slot *sl = slot_of(&rt->slots, pid);
    return sl && slot_is_live(sl, pid_gen(pid));
}

int pg_init(struct smarm_runtime *rt)
{
    struct pg *g = calloc(1, sizeof *g);
    if (!g)
        return SMARM_ENOMEM;
    if (hashtab_init(&g->groups, 16) != 0) {
        free(g);
        return SMARM_ENOMEM;
    }
    pthread_mutex_init(&g->lock, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g->incarnation = (uint32_t)ts.tv_sec;
    g->rng = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull | 1;
    rt->pg = g;
    return 0;
}

static void free_group(ht_node *n)
{
    group *gr = (group *)n;
    free(gr->m);
    free(gr);
}

void pg_free(struct smarm_runtime *rt)
{
    struct pg *g = rt->pg;
    if (!g)
        return;
    hashtab_destroy(&g->groups, free_group);
    pthread_mutex_destroy(&g->lock);
    free(g);
    rt->pg = NULL;
}

static group **find(struct pg *g, const char *name)
{
    return (group **)hashtab_find(&g->groups, name, hashtab_hash(name));
}

/* Removes member i (order is not kept: a multiset). Lock held. */
static void remove_at(struct smarm_runtime *rt, group *gr, uint32_t i)
{
    actor *a = sched_actor(rt, gr->m[i].pid);
    if (a && a->pid == gr->m[i].pid && joins_of(a))
        set_joins(a, joins_of(a) - 1);
    gr->m[i] = gr->m[--gr->n];
}

static void drop_if_empty(struct pg *g, group **p)
{
    if ((*p)->n)
        return;
    free_group(hashtab_unlink(&g->groups, (ht_node **)p));
}

int pg_join(struct smarm_runtime *rt, const char *name, uint64_t pid)
{
    struct pg *g = rt->pg;
    mutex_lock(&g->lock);
    int rc = 0;
    actor *a = sched_actor(rt, pid);
    if (!a || !alive(rt, pid)) {
        rc = -1;
        goto out;
    }
    group **p = find(g, name);
    if (!*p) {
        size_t n = strlen(name) + 1;
        group *gr = calloc(1, sizeof *gr + n);
        if (!gr) {
            rc = -2;
            goto out;
        }
        memcpy(gr->name, name, n);
        gr->node.hash = hashtab_hash(name);
        gr->node.key = gr->name;
        hashtab_insert(&g->groups, &gr->node);
        p = find(g, name);
    }
    group *gr = *p;
    if (gr->n == gr->cap) {
        uint32_t cap = gr->cap ? gr->cap * 2 : 4;
        member *m = realloc(gr->m, cap * sizeof *m);
        if (!m) {
            rc = -2;
            drop_if_empty(g, p);
            goto out;
        }
        gr->m = m;
        gr->cap = cap;
    }
    gr->m[gr->n++] = (member){pid, 0, g->incarnation};
    set_joins(a, joins_of(a) + 1);
    /* the death may have begun since alive(): if its finalize read no joins, it is this
     * side that must see the slot DONE (see the top of the file) */
    atomic_thread_fence(memory_order_seq_cst);
    if (!alive(rt, pid)) {
        remove_at(rt, gr, gr->n - 1);
        drop_if_empty(g, p);
        rc = -1;
    }
out:
    mutex_unlock(&g->lock);
    return rc;
}

int pg_leave(struct smarm_runtime *rt, const char *name, uint64_t pid)
{
    struct pg *g = rt->pg;
    mutex_lock(&g->lock);
    int found = 0;
    group **p = find(g, name);
    if (*p) {
        for (uint32_t i = 0; i < (*p)->n; i++) {
            if ((*p)->m[i].pid == pid) {
                remove_at(rt, *p, i);
                found = 1;
                break;
            }
        }
        drop_if_empty(g, p);
    }
    mutex_unlock(&g->lock);
    return found;
}

/* Drops members that died without pg_finalize having run yet. Lock held. */
static void prune(struct smarm_runtime *rt, group *gr)
{
    for (uint32_t i = 0; i < gr->n;) {
        if (alive(rt, gr->m[i].pid))
            i++;
        else
            gr->m[i] = gr->m[--gr->n];
    }
}

uint32_t pg_members(struct smarm_runtime *rt, const char *name, uint64_t *out, uint32_t max)
{
    struct pg *g = rt->pg;
    mutex_lock(&g->lock);
    uint32_t n = 0;
    group **p = find(g, name);
    if (*p) {
        prune(rt, *p);
        n = (*p)->n;
        for (uint32_t i = 0; i < n && i < max; i++)
            out[i] = (*p)->m[i].pid;
        drop_if_empty(g, p);
    }
    mutex_unlock(&g->lock);
    return n;
}

uint64_t pg_pick(struct smarm_runtime *rt, const char *name)
{
    struct pg *g = rt->pg;
    mutex_lock(&g->lock);
    uint64_t pid = 0;
    group **p = find(g, name);
    if (*p) {
        prune(rt, *p);
        if ((*p)->n) {
            /* xorshift: spreads picks, no need to be secret */
            g->rng ^= g->rng << 13;
            g->rng ^= g->rng >> 7;
            g->rng ^= g->rng << 17;
            pid = (*p)->m[g->rng % (*p)->n].pid;
        }
        drop_if_empty(g, p);
    }
    mutex_unlock(&g->lock);
    return pid;
}

/* Drops every membership of the dying pid from a group; 1 (the group goes) if none is left. */
static int leave_all(ht_node *n, void *ud)
{
    group *gr = (group *)n;
    uint64_t pid = *(uint64_t *)ud;
    for (uint32_t i = 0; i < gr->n;) {
        if (gr->m[i].pid == pid)
            gr->m[i] = gr->m[--gr->n];
        else
            i++;
    }
    if (gr->n)
        return 0;
    free_group(n);
    return 1;
}

void pg_finalize(struct smarm_runtime *rt, actor *a)
{
    struct pg *g = rt->pg;
    /* the caller marked a's slot DONE and fenced: a join still to come fails */
    if (!g || !joins_of(a))
        return;
    mutex_lock(&g->lock);
    uint64_t pid = a->pid;
    hashtab_filter(&g->groups, leave_all, &pid);
    set_joins(a, 0);
    mutex_unlock(&g->lock);
}
