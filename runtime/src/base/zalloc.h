/* A zeroed block aligned to a cache line or more: the records whose fields are kept on lines
 * apart from what other threads write (the runtime, the schedulers, a shared table). */
#ifndef SMARM_ZALLOC_H
#define SMARM_ZALLOC_H

#include <stdlib.h>
#include <string.h>

/* size bytes (rounded up to a multiple of align, as aligned_alloc requires) aligned to align,
 * a power of two, all zero; free() frees it. NULL when out of memory. */
static inline void *zalloc_aligned(size_t align, size_t size)
{
    size = (size + align - 1) & ~(align - 1);
    void *p = aligned_alloc(align, size);
    if (p)
        memset(p, 0, size);
    return p;
}

#endif
