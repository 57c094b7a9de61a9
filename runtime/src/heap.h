/* The actor heap allocator: size classes, each scheduler thread holding two
 * magazines per class in front of a shared depot of full magazines; no
 * per-block header (LuaJIT passes the old size). */
#ifndef SMARM_HEAP_H
#define SMARM_HEAP_H

#include <pthread.h>
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

void heap_init(heap *h);
void heap_destroy(heap *h); /* frees every chunk: all states must be closed */
/* lua_Alloc semantics: realloc ptr (osize bytes) to nsize bytes; nsize 0 frees.
 * cache is the calling thread's (NULL off the schedulers: the depot is used). */
void *heap_realloc(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize);
/* Gives everything a thread's cache holds back to the depot (the thread ends). */
void heap_cache_flush(heap *h, heap_cache *cache);
/* Blocks per magazine of the class serving n bytes (n <= HEAP_MAX_SMALL). */
uint32_t heap_magazine_blocks(size_t n);
/* Bytes of chunks the heap has taken from malloc (they are reused, never returned). */
size_t heap_reserved(heap *h);

#endif
