/* Small blocks each thread keeps: two sizes (64 and 128 bytes), a list of freed blocks per
 * size per thread, as glibc's per-thread cache would hand them out without its size classes
 * and checks. Messages take them (most are one 64-byte node) and so do channels (a
 * gen_server call makes one: calloc and free were 400 of its instructions). A block freed on
 * another thread joins that thread's list. A list that is full goes whole to a depot shared
 * by the process, and a thread whose list ran dry takes one from there before it asks
 * malloc: messages sent from one scheduler to actors of another (a server's requests) come
 * back to their maker's side by whole lists, where glibc took one of its arena locks per
 * block on both sides. A thread's lists go back to malloc when it ends. */
#ifndef SMARM_BASE_BLOCKS_H
#define SMARM_BASE_BLOCKS_H

#include <stddef.h>
#include <stdlib.h>

#define BLOCK_SMALL 64  /* bytes of a small block */
#define BLOCK_LARGE 128 /* bytes of a large one */
#define BLOCKS_KEEP 256 /* blocks of each size a thread keeps at most */

typedef struct block_list {
    void *head;
    unsigned n;
} block_list;

/* The calling thread's lists, and whether they are registered for the drain at its end (one
 * thread-local object: one load of its offset per function) */
typedef struct blocks_tls {
    block_list lists[2];
    int registered;
} blocks_tls;

extern __thread blocks_tls blocks_mine __attribute__((tls_model("initial-exec")));

/* blocks_put off its fast path: registers the thread's lists for the drain at its end, or
 * hands the full list to the depot and starts a new one with b, or frees b (the depot is
 * full, or the registration failed). */
void blocks_put_slow(void *b, block_list *l);
/* blocks_get off its fast path (the thread's list is empty): a list from the depot, or
 * malloc's block of the class. */
void *blocks_get_slow(int k);
/* Blocks malloc gave this module so far (all threads; for tests). */
size_t blocks_malloced(void);

/* The list for a block of n bytes (n <= BLOCK_LARGE). */
static inline int blocks_class(size_t n) { return n > BLOCK_SMALL; }

/* A block of at least n bytes (n <= BLOCK_LARGE; uninitialized), or NULL out of memory. */
static inline void *blocks_get(size_t n)
{
    int k = blocks_class(n);
    block_list *l = &blocks_mine.lists[k];
    void *b = l->head;
    if (b) {
        l->head = *(void **)b;
        l->n--;
        return b;
    }
    return blocks_get_slow(k);
}

static inline void blocks_push(block_list *l, void *b)
{
    *(void **)b = l->head;
    l->head = b;
    l->n++;
}

/* Gives back a block blocks_get(n) returned (n: the same size class). */
static inline void blocks_put(void *b, size_t n)
{
    blocks_tls *t = &blocks_mine;
    block_list *l = &t->lists[blocks_class(n)];
    if (__builtin_expect(l->n < BLOCKS_KEEP && t->registered, 1))
        blocks_push(l, b);
    else
        blocks_put_slow(b, l);
}

#endif
