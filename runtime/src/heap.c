/* The actor heap allocator. Lua states allocate and free many small blocks
 * (a message decoded, a table built, a GC sweep freeing hundreds at once);
 * glibc's per-thread cache holds 7 blocks per size and then takes its arena
 * locks, which made malloc the largest cost of a message round trip. Here a
 * scheduler thread keeps its own free list per size class, unbounded up to a
 * limit, then hands half to a shared depot. Blocks carry no header: LuaJIT
 * always passes the size of the block it frees. Memory stays with the runtime
 * until it is freed (it is reused, not returned). */
#include "heap.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (256 * 1024)
#define CACHE_LIMIT 512 /* blocks per class in a thread's cache before half go to the depot */
#define REFILL 64       /* blocks taken from the depot at once */

/* 16-byte steps to 256, 64-byte steps to 1024, 256-byte steps to 4096 */
static inline unsigned class_of(size_t n)
{
    if (n <= 256)
        return (unsigned)((n - 1) >> 4);
    if (n <= 1024)
        return 16 + (unsigned)((n - 257) >> 6);
    return 28 + (unsigned)((n - 1025) >> 8);
}

static inline size_t class_size(unsigned c)
{
    if (c < 16)
        return (size_t)(c + 1) * 16;
    if (c < 28)
        return 256 + (size_t)(c - 15) * 64;
    return 1024 + (size_t)(c - 27) * 256;
}

static inline void *next_of(void *b) { return *(void **)b; }
static inline void set_next(void *b, void *n) { *(void **)b = n; }

void heap_init(heap *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
}

void heap_destroy(heap *h)
{
    for (void *c = h->chunks; c;) {
        void *next = next_of(c);
        free(c);
        c = next;
    }
    h->chunks = NULL;
    pthread_mutex_destroy(&h->lock);
}

/* A block of class c from the depot or a fresh chunk; lock held. */
static void *carve(heap *h, unsigned c)
{
    size_t sz = class_size(c);
    if ((size_t)(h->bump_end - h->bump) < sz) {
        char *chunk = malloc(CHUNK_SIZE);
        if (!chunk)
            return NULL;
        set_next(chunk, h->chunks);
        h->chunks = chunk;
        h->bump = chunk + 16; /* the chunk link; blocks stay 16-byte aligned */
        h->bump_end = chunk + CHUNK_SIZE;
    }
    void *b = h->bump;
    h->bump += sz;
    return b;
}

static void *alloc_slow(heap *h, heap_cache *cache, unsigned c)
{
    pthread_mutex_lock(&h->lock);
    void *b = NULL;
    if (h->depot[c]) {
        b = h->depot[c];
        h->depot[c] = next_of(b);
        h->depot_count[c]--;
        /* and a batch for the cache, so the next ones take no lock */
        for (int i = 0; cache && i < REFILL && h->depot[c]; i++) {
            void *x = h->depot[c];
            h->depot[c] = next_of(x);
            h->depot_count[c]--;
            set_next(x, cache->free[c]);
            cache->free[c] = x;
            cache->count[c]++;
        }
    } else {
        b = carve(h, c);
    }
    pthread_mutex_unlock(&h->lock);
    return b;
}

static inline void *heap_alloc(heap *h, heap_cache *cache, size_t n)
{
    if (n > HEAP_MAX_SMALL)
        return malloc(n);
    unsigned c = class_of(n);
    if (cache && cache->free[c]) {
        void *b = cache->free[c];
        cache->free[c] = next_of(b);
        cache->count[c]--;
        return b;
    }
    return alloc_slow(h, cache, c);
}

static void free_to_depot(heap *h, unsigned c, void *first, void *last, uint32_t n)
{
    pthread_mutex_lock(&h->lock);
    set_next(last, h->depot[c]);
    h->depot[c] = first;
    h->depot_count[c] += n;
    pthread_mutex_unlock(&h->lock);
}

static inline void heap_free(heap *h, heap_cache *cache, void *p, size_t n)
{
    if (n > HEAP_MAX_SMALL) {
        free(p);
        return;
    }
    unsigned c = class_of(n);
    if (!cache) {
        free_to_depot(h, c, p, p, 1);
        return;
    }
    set_next(p, cache->free[c]);
    cache->free[c] = p;
    if (++cache->count[c] <= CACHE_LIMIT)
        return;
    /* too many here: the older half goes where other threads can reuse it */
    void *first = cache->free[c], *last = first;
    uint32_t keep = CACHE_LIMIT / 2;
    for (uint32_t i = 1; i < keep; i++)
        last = next_of(last);
    void *give = next_of(last);
    set_next(last, NULL);
    uint32_t n_give = cache->count[c] - keep;
    cache->count[c] = keep;
    void *give_last = give;
    while (next_of(give_last))
        give_last = next_of(give_last);
    (void)first;
    free_to_depot(h, c, give, give_last, n_give);
}

void *heap_realloc(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize)
{
    if (nsize == 0) {
        if (ptr)
            heap_free(h, cache, ptr, osize);
        return NULL;
    }
    if (!ptr)
        return heap_alloc(h, cache, nsize);
    if (osize > HEAP_MAX_SMALL && nsize > HEAP_MAX_SMALL)
        return realloc(ptr, nsize);
    if (osize <= HEAP_MAX_SMALL && nsize <= HEAP_MAX_SMALL && class_of(osize) == class_of(nsize))
        return ptr;
    void *n = heap_alloc(h, cache, nsize);
    if (!n)
        return NULL;
    memcpy(n, ptr, osize < nsize ? osize : nsize);
    heap_free(h, cache, ptr, osize);
    return n;
}

void heap_cache_flush(heap *h, heap_cache *cache)
{
    for (unsigned c = 0; c < HEAP_CLASSES; c++) {
        void *first = cache->free[c];
        if (!first)
            continue;
        void *last = first;
        while (next_of(last))
            last = next_of(last);
        free_to_depot(h, c, first, last, cache->count[c]);
        cache->free[c] = NULL;
        cache->count[c] = 0;
    }
}
