/* mmap'd C stacks for actors: a guard below each stack, a LIFO pool of default-sized ones.
 *
 * Two schemes, chosen once per process (stack_guard_install_supported):
 * - chunks (Linux 6.13+): default-shaped stacks are cut from large mappings, each with its
 *   guard installed by madvise(MADV_GUARD_INSTALL), which marks pages in the page tables
 *   without splitting the mapping; a chunk of many stacks is one entry of /proc/self/maps,
 *   so the number of stacks is not bounded by vm.max_map_count;
 * - mprotect (older kernels): one mapping per stack with a PROT_NONE guard, two entries of
 *   /proc/self/maps each (against vm.max_map_count, 65,530 by default).
 * Either way a stack is [guard][usable], base being the lowest usable byte. */
#ifndef SMARM_STACK_H
#define SMARM_STACK_H

#include <stddef.h>

typedef struct stack {
    void *base;         /* lowest usable byte, just above the guard */
    size_t size;        /* usable bytes, a multiple of the page size */
    size_t guard;       /* bytes below base that fault when touched */
    struct stack *next; /* pool link */
    unsigned valgrind_id;
    unsigned char pooled;  /* default shape: goes back to the pool */
    unsigned char carved;  /* cut from a chunk: unmapped only with its pool */
    unsigned char reserve; /* one of the pool's reserve stacks (stack_get_reserve) */
} stack;

typedef struct stack_pool stack_pool;

#define STACK_DEFAULT_SIZE (64 * 1024)
#define STACK_DEFAULT_GUARD (64 * 1024)
/* The smallest guard: one C frame (a gsub callback holds an 8 KiB buffer, a signal frame
 * a few KiB) must not step over it. Smaller guards are rounded up to it. */
#define STACK_MIN_GUARD (16 * 1024)
/* What smarm.spawn_opt accepts (a sanity bound, not a kernel one). */
#define STACK_MIN_SIZE (16 * 1024)
#define STACK_MAX_SIZE ((size_t)1 << 30)
#define STACK_MAX_GUARD ((size_t)64 << 20)

enum stack_scheme {
    STACK_SCHEME_AUTO = 0, /* chunks where the kernel has MADV_GUARD_INSTALL, else mprotect */
    STACK_SCHEME_CHUNKS,
    STACK_SCHEME_MPROTECT,
};

/* 1 if madvise(MADV_GUARD_INSTALL) works here (tried once, on first call). */
int stack_guard_install_supported(void);

/* A pool of stacks of one default shape; size/guard of 0 pick the defaults above. */
stack_pool *stack_pool_new(size_t default_size, size_t guard);
/* The same with a given scheme; NULL (errno ENOTSUP) for chunks where they are unsupported. */
stack_pool *stack_pool_new_scheme(size_t default_size, size_t guard, enum stack_scheme scheme);
enum stack_scheme stack_pool_scheme(const stack_pool *p); /* CHUNKS or MPROTECT */
void stack_pool_free(stack_pool *p); /* unmaps every stack; all must have been put back */
/* A stack of at least size usable bytes (0: the default) with at least the given guard
 * (0: the default; never less than STACK_MIN_GUARD); default-shaped stacks come from the
 * pool (LIFO: the most recently returned, warmest one first). NULL with errno set if no
 * stack can be mapped (ENOMEM, or EINVAL for a size that overflows). Thread-safe. */
stack *stack_get(stack_pool *p, size_t size, size_t guard);
/* Returns a stack: default-shaped ones go back to the pool, reserve ones to the reserve,
 * others are unmapped. */
void stack_put(stack_pool *p, stack *s);
/* Makes sure the pool holds at least n reserve stacks (default-shaped, kept apart, for
 * ending actors that cannot have a stack of their own); 0, or -1 with errno. */
int stack_pool_reserve(stack_pool *p, unsigned n);
/* A free reserve stack, or NULL if every one is out. */
stack *stack_get_reserve(stack_pool *p);
size_t stack_pool_default_size(const stack_pool *p);
size_t stack_pool_default_guard(const stack_pool *p);
size_t stack_pool_count(stack_pool *p);  /* stacks waiting in the pool */
size_t stack_pool_chunks(stack_pool *p); /* chunks mapped so far (0 under mprotect) */
static inline void *stack_top(const stack *s) { return (char *)s->base + s->size; }
/* Gives back to the kernel the whole pages of s lying between depth bytes below its top and
 * keep bytes below it (depth > keep), which must hold nothing live: they read as zeros when
 * touched again. Returns the bytes released. */
size_t stack_release(stack *s, size_t depth, size_t keep);
/* True if addr lies in the guard of s. */
int stack_in_guard(const stack *s, const void *addr);
/* True if addr lies in the usable part of s. */
static inline int stack_contains(const stack *s, const void *addr)
{
    return (const char *)addr >= (const char *)s->base &&
           (const char *)addr < (const char *)stack_top(s);
}

#endif
