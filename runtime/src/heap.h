/* The actor heap allocator: size classes with a free list per scheduler thread
 * in front of a shared depot, no per-block header (LuaJIT passes the old size). */
#ifndef SMARM_HEAP_H
#define SMARM_HEAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define HEAP_CLASSES 40
#define HEAP_MAX_SMALL 4096 /* larger blocks come from malloc */

typedef struct heap_cache {
    void *free[HEAP_CLASSES]; /* singly linked through each block's first word */
    uint32_t count[HEAP_CLASSES];
} heap_cache;

typedef struct heap {
    pthread_mutex_t lock;
    void *depot[HEAP_CLASSES]; /* blocks handed back by caches that grew too long */
    uint32_t depot_count[HEAP_CLASSES];
    void *chunks;          /* every chunk carved so far (freed with the heap) */
    char *bump, *bump_end; /* the chunk being carved */
} heap;

void heap_init(heap *h);
void heap_destroy(heap *h); /* frees every chunk: all states must be closed */
/* lua_Alloc semantics: realloc ptr (osize bytes) to nsize bytes; nsize 0 frees.
 * cache is the calling thread's (NULL off the schedulers: the depot is used). */
void *heap_realloc(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize);
/* Gives everything a thread's cache holds back to the depot (the thread ends). */
void heap_cache_flush(heap *h, heap_cache *cache);

#endif
