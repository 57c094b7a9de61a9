/* intern: atoms and remote pids as unique records (see intern.h). Records are appended under
 * a mutex and published by a release store of the count, so intern_lookup reads without a
 * lock: a pointer is a record once it lies inside the published part of the array. */
#include "base/intern.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS (1u << 20)

static intern_rec recs[INTERN_MAX];
static uint32_t buckets[NBUCKETS]; /* index + 1 of a chain's first record, 0 = empty */
static uint32_t count;             /* published records */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t hash_bytes(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

static uint32_t hash_of(uint32_t kind, const char *s, size_t n, uint32_t num, uint32_t serial,
                        uint32_t creation)
{
    uint32_t h = hash_bytes(2166136261u ^ kind, s, n);
    uint32_t f[3] = {num, serial, creation};
    return kind == INTERN_PID ? hash_bytes(h, f, sizeof f) : h;
}

static int same(const intern_rec *r, uint32_t kind, const char *s, size_t n, uint32_t num,
                uint32_t serial, uint32_t creation)
{
    if (r->kind != kind || r->len != n || memcmp(r->name, s, n) != 0)
        return 0;
    return kind == INTERN_ATOM || (r->num == num && r->serial == serial && r->creation == creation);
}

/* Finds or appends a record; name is the atom's name, or a pid's node (already interned, so
 * its bytes live forever). */
static const intern_rec *intern(uint32_t kind, const char *s, size_t n, uint32_t num,
                                uint32_t serial, uint32_t creation)
{
    uint32_t h = hash_of(kind, s, n, num, serial, creation) & (NBUCKETS - 1);
    const intern_rec *found = NULL;
    pthread_mutex_lock(&lock);
    for (uint32_t i = buckets[h]; i; i = recs[i - 1].next) {
        if (same(&recs[i - 1], kind, s, n, num, serial, creation)) {
            found = &recs[i - 1];
            break;
        }
    }
    if (!found && count < INTERN_MAX) {
        char *copy = NULL;
        if (kind == INTERN_ATOM) {
            copy = malloc(n + 1);
            if (copy) {
                memcpy(copy, s, n);
                copy[n] = '\0';
            }
        }
        if (kind != INTERN_ATOM || copy) {
            intern_rec *r = &recs[count];
            r->kind = kind;
            r->len = (uint32_t)n;
            r->name = copy ? copy : s;
            r->num = num;
            r->serial = serial;
            r->creation = creation;
            r->next = buckets[h];
            buckets[h] = count + 1;
            found = r;
            __atomic_store_n(&count, count + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

const intern_rec *intern_atom(const char *s, size_t n)
{
    if (n > INTERN_ATOM_MAX)
        return NULL;
    return intern(INTERN_ATOM, s, n, 0, 0, 0);
}

const intern_rec *intern_pid(const char *node, size_t nlen, uint32_t num, uint32_t serial,
                             uint32_t creation)
{
    const intern_rec *a = intern_atom(node, nlen);
    if (!a)
        return NULL;
    return intern(INTERN_PID, a->name, a->len, num, serial, creation);
}

const intern_rec *intern_lookup(const void *p)
{
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)recs;
    if (a < base)
        return NULL;
    uintptr_t off = a - base;
    if (off % sizeof(intern_rec) != 0)
        return NULL;
    if (off / sizeof(intern_rec) >= __atomic_load_n(&count, __ATOMIC_ACQUIRE))
        return NULL;
    return (const intern_rec *)p;
}

uint32_t intern_index(const intern_rec *r) { return r ? (uint32_t)(r - recs) + 1 : 0; }
