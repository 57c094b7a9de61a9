/* mmap'd actor stacks and their pool. Default-shaped stacks are cut from chunks (large
 * mappings whose guards are page-table markers installed by MADV_GUARD_INSTALL, so a chunk
 * stays one mapping) where the kernel supports it, else each is its own mapping with a
 * PROT_NONE guard. A mutex-protected LIFO list holds the returned default-shaped stacks
 * (the warmest comes back first); other shapes get a mapping of their own each time. */
#include "base/critical.h"
#include "base/sanitize.h"
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

/* Linux 6.13: install guard markers on a range of a mapping (reads and writes fault,
 * the mapping is not split); older kernels answer EINVAL. */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/* the first chunk holds this many stacks, each next one twice as many, up to CHUNK_BYTES */
#define CHUNK_FIRST 8
#define CHUNK_BYTES ((size_t)32 << 20)

typedef struct stack_chunk {
    struct stack_chunk *next;
    char *mem;
    size_t len;
    unsigned n;      /* stacks it holds */
    unsigned carved; /* stacks handed out so far (slots[0..carved)), under the pool lock */
    stack slots[];
} stack_chunk;

struct stack_pool {
    pthread_mutex_t lock; /* guards the lists and counts only; never held across a syscall */
    stack *free;          /* LIFO */
    size_t count;
    stack *reserve; /* free reserve stacks */
    unsigned reserve_total;
    stack_chunk *chunks; /* every chunk, newest first; the newest is the one being carved */
    size_t nchunks;
    unsigned next_n;      /* stacks in the next chunk */
    pthread_mutex_t grow; /* one thread maps a new chunk at a time (held across the mmap) */
    enum stack_scheme scheme;
    size_t size;  /* default usable size, page-rounded */
    size_t guard; /* default guard, page-rounded */
    size_t page;
};

/* ---- support ---- */

static int guard_install_ok;
static pthread_once_t guard_install_once = PTHREAD_ONCE_INIT;

static void guard_install_detect(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;
    guard_install_ok = madvise(m, page, MADV_GUARD_INSTALL) == 0;
    munmap(m, 2 * page);
}

int stack_guard_install_supported(void)
{
    int saved = errno;
    pthread_once(&guard_install_once, guard_install_detect);
    errno = saved;
    return guard_install_ok;
}

/* ---- mapping ---- */

static size_t stack_round(size_t n, size_t page) { return (n + page - 1) & ~(page - 1); }

static void stack_init(stack *s, char *base, size_t size, size_t guard)
{
    s->base = base;
    s->size = size;
    s->guard = guard;
    s->next = NULL;
    s->valgrind_id = 0;
    s->pooled = 0;
    s->carved = 0;
    s->reserve = 0;
#ifdef STACK_VALGRIND
    s->valgrind_id = VALGRIND_STACK_REGISTER(s->base, (char *)s->base + size);
#endif
}

/* A stack in a mapping of its own: under the chunk scheme the guard is a marker (one
 * mapping), else PROT_NONE (two). NULL with errno set. */
static stack *stack_map(const stack_pool *p, size_t size, size_t guard)
{
    stack *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    int err;
    char *m;
    if (p->scheme == STACK_SCHEME_CHUNKS) {
        m = mmap(NULL, guard + size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            goto fail;
        if (madvise(m, guard, MADV_GUARD_INSTALL) != 0 && mprotect(m, guard, PROT_NONE) != 0)
            goto fail_unmap;
    } else {
        /* Reserve guard+size with no access, then open up the usable part: the guard
         * stays PROT_NONE and nothing is committed until touched. */
        m = mmap(NULL, guard + size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        if (m == MAP_FAILED)
            goto fail;
        if (mprotect(m + guard, size, PROT_READ | PROT_WRITE) != 0)
            goto fail_unmap;
    }
    stack_init(s, m + guard, size, guard);
    return s;
fail_unmap:
    err = errno;
    munmap(m, guard + size);
    errno = err;
fail:
    err = errno;
    free(s);
    errno = err;
    return NULL;
}

static void stack_unmap(stack *s)
{
#ifdef STACK_VALGRIND
    VALGRIND_STACK_DEREGISTER(s->valgrind_id);
#endif
    /* ASan leaves the poison of the frames that ran here in its shadow after munmap: memory
     * mapped here later (a heap chunk) would read as a stack's redzones */
    SANITIZE_UNPOISON(s->base, s->size);
    munmap((char *)s->base - s->guard, s->guard + s->size);
    free(s);
}

/* A chunk of n default-shaped stacks, each [guard][usable], guards installed. */
static stack_chunk *chunk_map(const stack_pool *p, unsigned n)
{
    size_t slot = p->guard + p->size, len = slot * n;
    stack_chunk *c = malloc(sizeof *c + n * sizeof(stack));
    if (!c)
        return NULL;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        int err = errno;
        free(c);
        errno = err;
        return NULL;
    }
    /* a huge page would commit 2 MiB for the first touch of one stack */
    madvise(m, len, MADV_NOHUGEPAGE);
    for (unsigned i = 0; i < n; i++) {
        if (madvise(m + i * slot, p->guard, MADV_GUARD_INSTALL) != 0) {
            int err = errno;
            munmap(m, len);
            free(c);
            errno = err;
            return NULL;
        }
    }
    c->next = NULL;
    c->mem = m;
    c->len = len;
    c->n = n;
    c->carved = 0;
    return c;
}

static stack *chunk_slot(const stack_pool *p, stack_chunk *c, unsigned i)
{
    stack *s = &c->slots[i];
    stack_init(s, c->mem + (size_t)i * (p->guard + p->size) + p->guard, p->size, p->guard);
    s->carved = 1;
    return s;
}

/* ---- the pool ---- */

stack_pool *stack_pool_new_scheme(size_t default_size, size_t guard, enum stack_scheme scheme)
{
    if (scheme == STACK_SCHEME_AUTO)
        scheme = stack_guard_install_supported() ? STACK_SCHEME_CHUNKS : STACK_SCHEME_MPROTECT;
    else if (scheme == STACK_SCHEME_CHUNKS && !stack_guard_install_supported()) {
        errno = ENOTSUP;
        return NULL;
    }
    stack_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->page = (size_t)sysconf(_SC_PAGESIZE);
    if (!default_size)
        default_size = STACK_DEFAULT_SIZE;
    if (!guard)
        guard = STACK_DEFAULT_GUARD;
    if (guard < STACK_MIN_GUARD)
        guard = STACK_MIN_GUARD;
    if (default_size > SIZE_MAX / 4 || guard > SIZE_MAX / 4) {
        free(p);
        errno = EINVAL;
        return NULL;
    }
    p->size = stack_round(default_size, p->page);
    p->guard = stack_round(guard, p->page);
    p->scheme = scheme;
    p->next_n = CHUNK_FIRST;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->grow, NULL);
    return p;
}

stack_pool *stack_pool_new(size_t default_size, size_t guard)
{
    return stack_pool_new_scheme(default_size, guard, STACK_SCHEME_AUTO);
}

enum stack_scheme stack_pool_scheme(const stack_pool *p) { return p->scheme; }

static void free_list(stack *s)
{
    while (s) {
        stack *next = s->next;
        if (!s->carved)
            stack_unmap(s);
        s = next;
    }
}

void stack_pool_free(stack_pool *p)
{
    if (!p)
        return;
    free_list(p->free);
    free_list(p->reserve);
    stack_chunk *c = p->chunks;
    while (c) {
        stack_chunk *next = c->next;
#ifdef STACK_VALGRIND
        for (unsigned i = 0; i < c->carved; i++)
            VALGRIND_STACK_DEREGISTER(c->slots[i].valgrind_id);
#endif
        for (unsigned i = 0; i < c->carved; i++)
            SANITIZE_UNPOISON(c->slots[i].base, c->slots[i].size); /* as in stack_unmap */
        munmap(c->mem, c->len);
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&p->grow);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* A returned stack, or a fresh slot of the chunk being carved; NULL if neither. */
static stack *pool_take(stack_pool *p)
{
    mutex_lock(&p->lock);
    stack *s = p->free;
    stack_chunk *c = NULL;
    unsigned i = 0;
    if (s) {
        p->free = s->next;
        p->count--;
    } else if (p->chunks && p->chunks->carved < p->chunks->n) {
        c = p->chunks;
        i = c->carved++;
    }
    mutex_unlock(&p->lock);
    if (c)
        s = chunk_slot(p, c, i);
    if (s)
        s->next = NULL;
    return s;
}

static stack *pool_get(stack_pool *p)
{
    stack *s = pool_take(p);
    if (s)
        return s;
    if (p->scheme == STACK_SCHEME_MPROTECT) {
        s = stack_map(p, p->size, p->guard);
        if (s)
            s->pooled = 1;
        return s;
    }
    mutex_lock(&p->grow);
    /* another thread may have grown the pool while this one waited */
    s = pool_take(p);
    if (!s) {
        stack_chunk *c = chunk_map(p, p->next_n);
        if (c) {
            mutex_lock(&p->lock);
            c->next = p->chunks;
            p->chunks = c;
            p->nchunks++;
            c->carved = 1;
            mutex_unlock(&p->lock);
            size_t max = CHUNK_BYTES / (p->guard + p->size);
            if (p->next_n < max)
                p->next_n = 2 * p->next_n < max ? 2 * p->next_n : (unsigned)max;
            s = chunk_slot(p, c, 0);
        }
    }
    int err = errno;
    mutex_unlock(&p->grow);
    errno = err;
    return s;
}

stack *stack_get(stack_pool *p, size_t size, size_t guard)
{
    if (size > SIZE_MAX / 4 || guard > SIZE_MAX / 4) {
        errno = EINVAL;
        return NULL;
    }
    size = size ? stack_round(size, p->page) : p->size;
    if (guard && guard < STACK_MIN_GUARD)
        guard = STACK_MIN_GUARD;
    guard = guard ? stack_round(guard, p->page) : p->guard;
    stack *s;
    if (size == p->size && guard == p->guard) {
        s = pool_get(p);
        if (s)
            s->pooled = 1;
    } else {
        s = stack_map(p, size, guard);
    }
    return s;
}

void stack_put(stack_pool *p, stack *s)
{
    if (!s)
        return;
    if (!s->pooled && !s->reserve) {
        stack_unmap(s);
        return;
    }
    mutex_lock(&p->lock);
    if (s->reserve) {
        s->next = p->reserve;
        p->reserve = s;
    } else {
        s->next = p->free;
        p->free = s;
        p->count++;
    }
    mutex_unlock(&p->lock);
}

size_t stack_release(stack *s, size_t depth, size_t keep)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t top = (uintptr_t)stack_top(s);
    if (depth > s->size)
        depth = s->size;
    if (keep >= depth)
        return 0;
    uintptr_t lo = (top - depth) & ~(uintptr_t)(page - 1);
    uintptr_t hi = (top - keep) & ~(uintptr_t)(page - 1);
    if (lo < (uintptr_t)s->base)
        lo = (uintptr_t)s->base;
    if (hi <= lo)
        return 0;
    if (madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0)
        return 0;
    return hi - lo;
}

int stack_pool_reserve(stack_pool *p, unsigned n)
{
    for (;;) {
        mutex_lock(&p->lock);
        int enough = p->reserve_total >= n;
        mutex_unlock(&p->lock);
        if (enough)
            return 0;
        stack *s = stack_get(p, 0, 0);
        if (!s)
            return -1;
        s->pooled = 0;
        s->reserve = 1;
        mutex_lock(&p->lock);
        s->next = p->reserve;
        p->reserve = s;
        p->reserve_total++;
        mutex_unlock(&p->lock);
    }
}

stack *stack_get_reserve(stack_pool *p)
{
    mutex_lock(&p->lock);
    stack *s = p->reserve;
    if (s)
        p->reserve = s->next;
    mutex_unlock(&p->lock);
    if (s)
        s->next = NULL;
    return s;
}

size_t stack_pool_default_size(const stack_pool *p) { return p->size; }
size_t stack_pool_default_guard(const stack_pool *p) { return p->guard; }

size_t stack_pool_count(stack_pool *p)
{
    mutex_lock(&p->lock);
    size_t n = p->count;
    mutex_unlock(&p->lock);
    return n;
}

size_t stack_pool_chunks(stack_pool *p)
{
    mutex_lock(&p->lock);
    size_t n = p->nchunks;
    mutex_unlock(&p->lock);
    return n;
}

int stack_in_guard(const stack *s, const void *addr)
{
    uintptr_t a = (uintptr_t)addr, base = (uintptr_t)s->base;
    return a < base && a >= base - s->guard;
}
