/* mmap'd C stacks for actors: PROT_NONE guard below each stack, LIFO pool of default-sized ones. */
#ifndef SMARM_STACK_H
#define SMARM_STACK_H

#include <stddef.h>

typedef struct stack {
    void *base;         /* lowest usable byte, just above the guard */
    size_t size;        /* usable bytes, a multiple of the page size */
    size_t guard;       /* PROT_NONE bytes below base */
    struct stack *next; /* pool link */
    unsigned valgrind_id;
} stack;

typedef struct stack_pool stack_pool;

#define STACK_DEFAULT_SIZE (64 * 1024)
#define STACK_DEFAULT_GUARD (64 * 1024)

/* A pool of stacks of one default shape; size/guard of 0 pick the defaults above. */
stack_pool *stack_pool_new(size_t default_size, size_t guard);
void stack_pool_free(stack_pool *p); /* unmaps every pooled stack */
/* A stack of at least size usable bytes (0: the default) with the given guard
 * (0: the default); default-shaped stacks come from the pool (LIFO: the most
 * recently returned, warmest one first). NULL if the mapping fails. Thread-safe. */
stack *stack_get(stack_pool *p, size_t size, size_t guard);
/* Returns a stack: default-shaped ones go back to the pool, others are unmapped. */
void stack_put(stack_pool *p, stack *s);
size_t stack_pool_default_size(const stack_pool *p);
size_t stack_pool_count(stack_pool *p); /* stacks waiting in the pool */
static inline void *stack_top(const stack *s) { return (char *)s->base + s->size; }
/* True if addr lies in the guard of s. */
int stack_in_guard(const stack *s, const void *addr);

#endif
