/* The actor heap allocator: size classes, each scheduler thread holding two
 * magazines per class in front of a shared depot of full magazines; no
 * per-block header (LuaJIT passes the old size). */
#ifndef SMARM_HEAP_H
#define SMARM_HEAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_CLASSES 40
#define HEAP_MAX_SMALL 4096 /* larger blocks come from malloc */

/* One thread's blocks of a class: cur is allocated from and freed to; prev is
 * empty or exactly full, so whole magazines move to and from the depot. */
typedef struct heap_mags {
    void *cur, *prev; /* null-terminated lists through each block's first word */
    uint32_t ncur, nprev;
} heap_mags;

typedef struct heap_cache {
    heap_mags mag[HEAP_CLASSES];
    char *bump, *bump_end; /* this thread's region of fresh memory */
} heap_cache;

typedef struct heap {
    pthread_mutex_t lock;
    void *full[HEAP_CLASSES];  /* full magazines, linked through their first block's second word */
    void *loose[HEAP_CLASSES]; /* single blocks freed off the schedulers, until a magazine fills */
    uint32_t nfull[HEAP_CLASSES], nloose[HEAP_CLASSES];
    void *chunks;          /* every chunk taken from malloc (freed with the heap) */
    char *bump, *bump_end; /* fresh memory for callers without a cache */
    size_t reserved;       /* bytes of chunks taken so far */
} heap;

/* The size classes: 16-byte steps to 256, 64-byte steps to 1024, 256-byte steps to 4096.
 * Their tables, one object so that a fast path addresses both from one base: the class of
 * each size up to HEAP_MAX_SMALL by (n - 1) >> 4 (classes change only at multiples of 16, so
 * a class is one load), and the blocks per magazine of each class (about 16 KiB of blocks,
 * 16 to 128). */
typedef struct heap_tables {
    uint8_t class_by16[HEAP_MAX_SMALL / 16];
    uint8_t mag_blocks[HEAP_CLASSES];
} heap_tables;
extern const heap_tables heap_tab;

/* The index into class_by16 of a size: past the table (>= HEAP_MAX_SMALL / 16) for 0, which
 * wraps, and for more than HEAP_MAX_SMALL. */
static inline size_t heap_size_index(size_t n) { return (n - 1) >> 4; }

/* The class of n bytes, 0 < n <= HEAP_MAX_SMALL. */
static inline unsigned heap_class_of(size_t n) { return heap_tab.class_by16[heap_size_index(n)]; }

void *heap_alloc_slow(heap *h, heap_cache *cache, size_t n);
void heap_free_slow(heap *h, heap_cache *cache, void *p, size_t n);

/* The fast paths, which make no call: a block of n > 0 bytes from the thread's current
 * magazine, or NULL when that needs the slow path; and p (n bytes) back into it, or 0 when
 * that needs the slow path. */
static inline void *heap_alloc_fast(heap_cache *cache, size_t n)
{
    size_t i = heap_size_index(n);
    if (i < HEAP_MAX_SMALL / 16 && cache) {
        /* a size_t: with an int GCC computed the magazine's address twice */
        size_t c = heap_tab.class_by16[i];
        heap_mags *m = &cache->mag[c];
        void *b = m->cur;
        if (b) {
            void *next = *(void **)b;
            m->ncur--;
            m->cur = next;
            /* the next block is likely cold (a GC sweep freed it a while ago):
             * start loading it now rather than stall on it at the next pop */
            __builtin_prefetch(next, 1);
            return b;
        }
    }
    return NULL;
}

static inline int heap_free_fast(heap_cache *cache, void *p, size_t n)
{
    size_t i = heap_size_index(n);
    if (i < HEAP_MAX_SMALL / 16 && cache) {
        size_t c = heap_tab.class_by16[i];
        heap_mags *m = &cache->mag[c];
        if (m->ncur < heap_tab.mag_blocks[c]) {
            *(void **)p = m->cur;
            m->cur = p;
            m->ncur++;
            return 1;
        }
    }
    return 0;
}

/* A block of n > 0 bytes; cache as for heap_realloc. Inline: a Lua state
 * allocates and frees hundreds of blocks per spawn and per GC cycle. */
static inline void *heap_alloc(heap *h, heap_cache *cache, size_t n)
{
    void *b = heap_alloc_fast(cache, n);
    return b ? b : heap_alloc_slow(h, cache, n);
}

/* Frees p, a block of n bytes from heap_alloc or heap_realloc. */
static inline void heap_free(heap *h, heap_cache *cache, void *p, size_t n)
{
    if (!heap_free_fast(cache, p, n))
        heap_free_slow(h, cache, p, n);
}

void heap_init(heap *h);
void heap_destroy(heap *h); /* frees every chunk: all states must be closed */
/* lua_Alloc semantics: realloc ptr (osize bytes) to nsize bytes; nsize 0 frees.
 * cache is the calling thread's (NULL off the schedulers: the depot is used). */
void *heap_realloc(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize);
/* Gives everything a thread's cache holds back to the depot (the thread ends). */
void heap_cache_flush(heap *h, heap_cache *cache);
/* Where the thread's next fresh block would start (NULL: no cache, or no region yet): the
 * blocks a caller is given between two reads lie between them when they all came fresh. */
static inline const char *heap_fresh_at(const heap_cache *cache)
{
    return cache ? cache->bump : NULL;
}
/* Blocks per magazine of the class serving n bytes (n <= HEAP_MAX_SMALL). */
static inline uint32_t heap_magazine_blocks(size_t n)
{
    return heap_tab.mag_blocks[heap_class_of(n)];
}
/* Bytes of chunks the heap has taken from malloc (they are reused, never returned). */
size_t heap_reserved(heap *h);

/* Whether p lies in a chunk of some heap of this process: a block heap_alloc handed out
 * for n <= HEAP_MAX_SMALL does, memory from malloc or another allocator does not. One bit
 * per 2 MiB of the 47-bit address space, read without a lock (a chunk is marked before any
 * of its blocks is handed out). Valid only while heap_owns_ready() says so. */
#define HEAP_CHUNK_SHIFT 21 /* a chunk is 2 MiB, aligned to its size */
#define HEAP_ADDR_BITS 47   /* the user address space the map covers */
extern _Atomic(_Atomic uint64_t *) heap_chunk_map;
static inline int heap_owns(const void *p)
{
    _Atomic uint64_t *m = atomic_load_explicit(&heap_chunk_map, memory_order_acquire);
    uintptr_t i = (uintptr_t)p >> HEAP_CHUNK_SHIFT;
    if (!m || (i >> (HEAP_ADDR_BITS - HEAP_CHUNK_SHIFT)))
        return 0;
    return (int)((atomic_load_explicit(&m[i >> 6], memory_order_relaxed) >> (i & 63)) & 1);
}
/* Whether heap_owns can be trusted: its map could be made and every chunk is in it. */
int heap_owns_ready(void);

#endif
