/* Names: a chained hash table from name to pid under one mutex. Liveness is
 * read from the slot word (atomic) under the lock, so no other lock nests in it;
 * bindings to dead actors are dropped at their death and, should one race
 * that, on contact. */
#include "core/registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/actor.h"
#include "core/runtime.h"
#include "core/scheduler.h"

typedef struct binding {
    struct binding *next;
    uint64_t pid;
    uint32_t hash;
    char name[];
} binding;

struct registry {
    pthread_mutex_t lock;
    binding **buckets;
    uint32_t mask, count;
};

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* A holder is alive from the claim of its slot (a name given at spawn is bound
 * before the actor is published, while the slot still reads VACANT with the
 * new generation) until its death marks the slot DONE. */
static int alive(struct smarm_runtime *rt, uint64_t pid)
{
    slot *sl = slot_of(&rt->slots, pid);
    if (!sl)
        return 0;
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    return slot_word_gen(w) == pid_gen(pid) && slot_word_state(w) != SLOT_DONE;
}

int registry_init(struct smarm_runtime *rt)
{
    struct registry *r = calloc(1, sizeof *r);
    if (!r)
        return SMARM_ENOMEM;
    r->mask = 63;
    r->buckets = calloc(r->mask + 1, sizeof *r->buckets);
    if (!r->buckets) {
        free(r);
        return SMARM_ENOMEM;
    }
    pthread_mutex_init(&r->lock, NULL);
    rt->registry = r;
    return 0;
}

void registry_free(struct smarm_runtime *rt)
{
    struct registry *r = rt->registry;
    if (!r)
        return;
    for (uint32_t i = 0; i <= r->mask; i++) {
        for (binding *b = r->buckets[i]; b;) {
            binding *next = b->next;
            free(b);
            b = next;
        }
    }
    free(r->buckets);
    pthread_mutex_destroy(&r->lock);
    free(r);
    rt->registry = NULL;
}

static binding **find(struct registry *r, const char *name, uint32_t h)
{
    binding **p = &r->buckets[h & r->mask];
    while (*p && ((*p)->hash != h || strcmp((*p)->name, name) != 0))
        p = &(*p)->next;
    return p;
}

static void grow(struct registry *r)
{
    uint32_t mask = r->mask * 2 + 1;
    binding **nb = calloc(mask + 1, sizeof *nb);
    if (!nb)
        return; /* chains just get longer */
    for (uint32_t i = 0; i <= r->mask; i++) {
        for (binding *b = r->buckets[i]; b;) {
            binding *next = b->next;
            b->next = nb[b->hash & mask];
            nb[b->hash & mask] = b;
            b = next;
        }
    }
    free(r->buckets);
    r->buckets = nb;
    r->mask = mask;
}

/* Drops the binding at p; the holder's name goes with it. Lock held. */
static void drop(struct smarm_runtime *rt, struct registry *r, binding **p)
{
    binding *b = *p;
    *p = b->next;
    r->count--;
    actor *a = sched_actor(rt, b->pid);
    if (a && a->name && strcmp(a->name, b->name) == 0) {
        free(a->name);
        a->name = NULL;
    }
    free(b);
}

/* Binds name (hash h, known free) to pid, held by a. Lock held. */
static int bind(struct registry *r, const char *name, uint32_t h, actor *a, uint64_t pid)
{
    size_t n = strlen(name) + 1;
    binding *b = malloc(sizeof *b + n);
    char *own = strdup(name);
    if (!b || !own) {
        free(b);
        free(own);
        return REG_NOMEM;
    }
    memcpy(b->name, name, n);
    b->pid = pid;
    b->hash = h;
    binding **p = &r->buckets[h & r->mask];
    b->next = *p;
    *p = b;
    a->name = own;
    if (++r->count > (r->mask + 1) * 2)
        grow(r);
    return REG_OK;
}

int registry_register(struct smarm_runtime *rt, const char *name, uint64_t pid)
{
    struct registry *r = rt->registry;
    uint32_t h = hash_str(name);
    pthread_mutex_lock(&r->lock);
    binding **p = find(r, name, h);
    int rc = REG_OK;
    actor *a = sched_actor(rt, pid);
    if (*p && (*p)->pid == pid && alive(rt, pid)) {
        rc = REG_OK;
    } else if (*p && alive(rt, (*p)->pid)) {
        rc = REG_TAKEN;
    } else if (!a || !alive(rt, pid)) {
        rc = REG_DEAD;
    } else if (a->name) {
        rc = REG_NAMED;
    } else {
        if (*p)
            drop(rt, r, p); /* the last holder died: the name heals */
        rc = bind(r, name, h, a, pid);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int registry_register_spawning(struct smarm_runtime *rt, const char *name, actor *a)
{
    /* a is being spawned: not published yet, so not "alive" by its slot, but
     * nobody can reach it before this returns */
    struct registry *r = rt->registry;
    uint32_t h = hash_str(name);
    pthread_mutex_lock(&r->lock);
    binding **p = find(r, name, h);
    int rc = REG_OK;
    if (*p && alive(rt, (*p)->pid)) {
        rc = REG_TAKEN;
    } else {
        if (*p)
            drop(rt, r, p);
        rc = bind(r, name, h, a, a->pid);
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

int registry_unregister(struct smarm_runtime *rt, const char *name)
{
    struct registry *r = rt->registry;
    pthread_mutex_lock(&r->lock);
    binding **p = find(r, name, hash_str(name));
    int found = *p != NULL;
    if (found)
        drop(rt, r, p);
    pthread_mutex_unlock(&r->lock);
    return found;
}

uint64_t registry_whereis(struct smarm_runtime *rt, const char *name)
{
    struct registry *r = rt->registry;
    pthread_mutex_lock(&r->lock);
    binding **p = find(r, name, hash_str(name));
    uint64_t pid = 0;
    if (*p) {
        if (alive(rt, (*p)->pid))
            pid = (*p)->pid;
        else
            drop(rt, r, p);
    }
    pthread_mutex_unlock(&r->lock);
    return pid;
}

void registry_finalize(struct smarm_runtime *rt, actor *a)
{
    struct registry *r = rt->registry;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    if (a->name) {
        binding **p = find(r, a->name, hash_str(a->name));
        if (*p && (*p)->pid == a->pid)
            drop(rt, r, p);
        free(a->name);
        a->name = NULL;
    }
    pthread_mutex_unlock(&r->lock);
}

void registry_name_of(struct smarm_runtime *rt, actor *a, char *buf, unsigned len)
{
    struct registry *r = rt->registry;
    buf[0] = 0;
    pthread_mutex_lock(&r->lock);
    if (a->name) {
        strncpy(buf, a->name, len - 1);
        buf[len - 1] = 0;
    }
    pthread_mutex_unlock(&r->lock);
}
