/* mmap'd actor stacks: one mapping per stack with a PROT_NONE guard below the usable part,
 * and a mutex-protected LIFO pool of default-shaped stacks (the warmest comes back first). */
#include "base/stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define STACK_VALGRIND 1
#endif
#endif

struct stack_pool {
    pthread_mutex_t lock; /* guards free and count only; never held across a syscall */
    stack *free;          /* LIFO */
    size_t count;
    size_t size;  /* default usable size, page-rounded */
    size_t guard; /* default guard, page-rounded */
    size_t page;
};

static size_t stack_round(size_t n, size_t page) { return (n + page - 1) & ~(page - 1); }

static stack *stack_map(size_t size, size_t guard)
{
    stack *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    /* Reserve guard+size with no access, then open up the usable part: the guard stays
     * PROT_NONE and nothing is committed until touched. */
    char *m = mmap(NULL, guard + size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        free(s);
        return NULL;
    }
    if (mprotect(m + guard, size, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, guard + size);
        free(s);
        return NULL;
    }
    s->base = m + guard;
    s->size = size;
    s->guard = guard;
    s->next = NULL;
    s->valgrind_id = 0;
#ifdef STACK_VALGRIND
    s->valgrind_id = VALGRIND_STACK_REGISTER(s->base, (char *)s->base + size);
#endif
    return s;
}

static void stack_unmap(stack *s)
{
#ifdef STACK_VALGRIND
    VALGRIND_STACK_DEREGISTER(s->valgrind_id);
#endif
    munmap((char *)s->base - s->guard, s->guard + s->size);
    free(s);
}

stack_pool *stack_pool_new(size_t default_size, size_t guard)
{
    stack_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->page = (size_t)sysconf(_SC_PAGESIZE);
    p->size = stack_round(default_size ? default_size : STACK_DEFAULT_SIZE, p->page);
    p->guard = stack_round(guard ? guard : STACK_DEFAULT_GUARD, p->page);
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void stack_pool_free(stack_pool *p)
{
    if (!p)
        return;
    stack *s = p->free;
    while (s) {
        stack *next = s->next;
        stack_unmap(s);
        s = next;
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

stack *stack_get(stack_pool *p, size_t size, size_t guard)
{
    size = size ? stack_round(size, p->page) : p->size;
    guard = guard ? stack_round(guard, p->page) : p->guard;
    if (size == p->size && guard == p->guard) {
        pthread_mutex_lock(&p->lock);
        stack *s = p->free;
        if (s) {
            p->free = s->next;
            p->count--;
        }
        pthread_mutex_unlock(&p->lock);
        if (s) {
            s->next = NULL;
            return s;
        }
    }
    return stack_map(size, guard);
}

void stack_put(stack_pool *p, stack *s)
{
    if (!s)
        return;
    if (s->size != p->size || s->guard != p->guard) {
        stack_unmap(s);
        return;
    }
    pthread_mutex_lock(&p->lock);
    s->next = p->free;
    p->free = s;
    p->count++;
    pthread_mutex_unlock(&p->lock);
}

size_t stack_pool_default_size(const stack_pool *p) { return p->size; }

size_t stack_pool_count(stack_pool *p)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->count;
    pthread_mutex_unlock(&p->lock);
    return n;
}

int stack_in_guard(const stack *s, const void *addr)
{
    uintptr_t a = (uintptr_t)addr, base = (uintptr_t)s->base;
    return a < base && a >= base - s->guard;
}
