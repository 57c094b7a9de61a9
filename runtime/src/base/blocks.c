/* Small blocks each thread keeps (see blocks.h). */
#include "base/blocks.h"

#include <pthread.h>
#include <stdatomic.h>

#include "base/critical.h"

__thread blocks_tls blocks_mine __attribute__((tls_model("initial-exec")));

static pthread_key_t blocks_key;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;
static int blocks_key_ok;

/* The thread's end: its lists go back to malloc. */
static void blocks_drain(void *p)
{
    blocks_tls *t = p;
    for (int k = 0; k < 2; k++) {
        while (t->lists[k].head) {
            void *b = t->lists[k].head;
            t->lists[k].head = *(void **)b;
            free(b);
        }
        t->lists[k].n = 0;
    }
    t->registered = 0; /* a later put in another destructor registers again */
}

static void blocks_key_make(void)
{
    blocks_key_ok = pthread_key_create(&blocks_key, blocks_drain) == 0;
}

/* Whether the thread's lists are drained at its end (registering them if not yet): a thread
 * keeps no block in them before. */
static int registered(void)
{
    if (!blocks_mine.registered) {
        pthread_once(&blocks_once, blocks_key_make);
        if (blocks_key_ok && pthread_setspecific(blocks_key, &blocks_mine) == 0)
            blocks_mine.registered = 1;
    }
    return blocks_mine.registered;
}

/* Full lists a thread gave up, per size, linked through the second word of their first
 * block; at most DEPOT_MAX of each (about 2 MB of 128-byte blocks), past which a full
 * list's blocks go back to malloc one by one as before. */
#define DEPOT_MAX 64
static struct {
    pthread_mutex_t lock;
    void *lists[2];
    _Atomic unsigned n[2]; /* written under the lock; read without it to skip an empty depot */
} depot = {PTHREAD_MUTEX_INITIALIZER, {NULL, NULL}, {0, 0}};

static _Atomic size_t malloced;

size_t blocks_malloced(void) { return atomic_load_explicit(&malloced, memory_order_relaxed); }

static inline void *list_next(void *head) { return ((void **)head)[1]; }
static inline void set_list_next(void *head, void *next) { ((void **)head)[1] = next; }

/* Hands l's full list to the depot; 0 if the depot is full (l unchanged). */
static int depot_put(int k, block_list *l)
{
    if (atomic_load_explicit(&depot.n[k], memory_order_relaxed) >= DEPOT_MAX)
        return 0;
    mutex_lock(&depot.lock);
    unsigned n = atomic_load_explicit(&depot.n[k], memory_order_relaxed);
    int ok = n < DEPOT_MAX;
    if (ok) {
        set_list_next(l->head, depot.lists[k]);
        depot.lists[k] = l->head;
        atomic_store_explicit(&depot.n[k], n + 1, memory_order_relaxed);
    }
    mutex_unlock(&depot.lock);
    if (ok) {
        l->head = NULL;
        l->n = 0;
    }
    return ok;
}

void *blocks_get_slow(int k)
{
    block_list *l = &blocks_mine.lists[k];
    if (atomic_load_explicit(&depot.n[k], memory_order_relaxed) && registered()) {
        void *list = NULL;
        mutex_lock(&depot.lock);
        unsigned n = atomic_load_explicit(&depot.n[k], memory_order_relaxed);
        if (n) {
            list = depot.lists[k];
            depot.lists[k] = list_next(list);
            atomic_store_explicit(&depot.n[k], n - 1, memory_order_relaxed);
        }
        mutex_unlock(&depot.lock);
        if (list) {
            /* a full list: BLOCKS_KEEP blocks; the first is the caller's */
            l->head = *(void **)list;
            l->n = BLOCKS_KEEP - 1;
            return list;
        }
    }
    atomic_fetch_add_explicit(&malloced, 1, memory_order_relaxed);
    return malloc(k ? BLOCK_LARGE : BLOCK_SMALL);
}

void blocks_put_slow(void *b, block_list *l)
{
    if (registered() && (l->n < BLOCKS_KEEP || depot_put((int)(l - blocks_mine.lists), l))) {
        blocks_push(l, b);
        return;
    }
    free(b);
}
