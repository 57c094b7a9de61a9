/* Names: a hash table (base/hashtab.h) from name to pid under one mutex. Liveness is
 * read from the slot word (atomic) under the lock, so no other lock nests in it;
 * bindings to dead actors are dropped at their death and, should one race
 * that, on contact.
 *
 * A death does not take the lock unless the actor holds a name. Its finalize marks the
 * slot DONE, then (after a full fence) reads the actor's name; a registration of that
 * actor writes the name, then (after a full fence) reads the slot again and undoes
 * itself if it finds DONE. Of two such sides one sees the other's write, so a name is
 * never left on a dead actor's record (the next actor in it would read as named). */
#include "base/critical.h"
#include "core/registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashtab.h"
#include "core/actor.h"
#include "core/runtime.h"
#include "core/scheduler.h"

typedef struct binding {
    ht_node node; /* key: name */
    uint64_t pid;
    char name[];
} binding;

struct registry {
    pthread_mutex_t lock;
    hashtab names;
};

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

/* The actor's name pointer: written under the lock, read by its finalize without it. */
static inline char *name_of(const actor *a)
{
    return __atomic_load_n(&a->names.name, __ATOMIC_RELAXED);
}
static inline void set_name(actor *a, char *name)
{
    __atomic_store_n(&a->names.name, name, __ATOMIC_RELAXED);
}

static void free_binding(ht_node *n) { free(n); }

int registry_init(struct smarm_runtime *rt)
{
    struct registry *r = calloc(1, sizeof *r);
    if (!r)
        return SMARM_ENOMEM;
    if (hashtab_init(&r->names, 64) != 0) {
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
    hashtab_destroy(&r->names, free_binding);
    pthread_mutex_destroy(&r->lock);
    free(r);
    rt->registry = NULL;
}

static binding **find(struct registry *r, const char *name, uint32_t h)
{
    return (binding **)hashtab_find(&r->names, name, h);
}

/* Drops the binding at p; the holder's name goes with it. Lock held. */
static void drop(struct smarm_runtime *rt, struct registry *r, binding **p)
{
    binding *b = (binding *)hashtab_unlink(&r->names, (ht_node **)p);
    actor *a = sched_actor(rt, b->pid);
    char *own = a ? name_of(a) : NULL;
    if (own && strcmp(own, b->name) == 0) {
        set_name(a, NULL);
        free(own);
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
    b->node.hash = h;
    b->node.key = b->name;
    hashtab_insert(&r->names, &b->node);
    set_name(a, own);
    return REG_OK;
}

int registry_register(struct smarm_runtime *rt, const char *name, uint64_t pid)
{
    struct registry *r = rt->registry;
    uint32_t h = hashtab_hash(name);
    mutex_lock(&r->lock);
    binding **p = find(r, name, h);
    int rc = REG_OK;
    actor *a = sched_actor(rt, pid);
    if (*p && (*p)->pid == pid && alive(rt, pid)) {
        rc = REG_OK;
    } else if (*p && alive(rt, (*p)->pid)) {
        rc = REG_TAKEN;
    } else if (!a || !alive(rt, pid)) {
        rc = REG_DEAD;
    } else if (name_of(a)) {
        rc = REG_NAMED;
    } else {
        if (*p)
            drop(rt, r, p); /* the last holder died: the name heals */
        rc = bind(r, name, h, a, pid);
        /* the death may have begun since alive(): if its finalize read no name, it is
         * this side that must see the slot DONE (see the top of the file) */
        atomic_thread_fence(memory_order_seq_cst);
        if (rc == REG_OK && !alive(rt, pid)) {
            drop(rt, r, find(r, name, h));
            rc = REG_DEAD;
        }
    }
    mutex_unlock(&r->lock);
    return rc;
}

int registry_register_spawning(struct smarm_runtime *rt, const char *name, actor *a)
{
    /* a is being spawned: not published yet, so not "alive" by its slot, but
     * nobody can reach it before this returns */
    struct registry *r = rt->registry;
    uint32_t h = hashtab_hash(name);
    mutex_lock(&r->lock);
    binding **p = find(r, name, h);
    int rc = REG_OK;
    if (*p && alive(rt, (*p)->pid)) {
        rc = REG_TAKEN;
    } else {
        if (*p)
            drop(rt, r, p);
        rc = bind(r, name, h, a, a->pid);
    }
    mutex_unlock(&r->lock);
    return rc;
}

int registry_unregister(struct smarm_runtime *rt, const char *name)
{
    struct registry *r = rt->registry;
    mutex_lock(&r->lock);
    binding **p = find(r, name, hashtab_hash(name));
    int found = *p != NULL;
    if (found)
        drop(rt, r, p);
    mutex_unlock(&r->lock);
    return found;
}

uint64_t registry_whereis(struct smarm_runtime *rt, const char *name)
{
    struct registry *r = rt->registry;
    mutex_lock(&r->lock);
    binding **p = find(r, name, hashtab_hash(name));
    uint64_t pid = 0;
    if (*p) {
        if (alive(rt, (*p)->pid))
            pid = (*p)->pid;
        else
            drop(rt, r, p);
    }
    mutex_unlock(&r->lock);
    return pid;
}

void registry_finalize(struct smarm_runtime *rt, actor *a)
{
    struct registry *r = rt->registry;
    /* the caller marked a's slot DONE and fenced: a registration still to come fails */
    if (!r || !name_of(a))
        return;
    mutex_lock(&r->lock);
    char *name = name_of(a);
    if (name) {
        set_name(a, NULL);
        binding **p = find(r, name, hashtab_hash(name));
        if (*p && (*p)->pid == a->pid)
            drop(rt, r, p);
        free(name);
    }
    mutex_unlock(&r->lock);
}

void registry_name_of(struct smarm_runtime *rt, actor *a, char *buf, unsigned len)
{
    struct registry *r = rt->registry;
    buf[0] = 0;
    mutex_lock(&r->lock);
    const char *name = name_of(a);
    if (name) {
        strncpy(buf, name, len - 1);
        buf[len - 1] = 0;
    }
    mutex_unlock(&r->lock);
}
