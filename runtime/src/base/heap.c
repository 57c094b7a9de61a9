/* The actor heap allocator. Lua states allocate and free many small blocks
 * (a message decoded, a table built, a GC sweep freeing hundreds at once);
 * glibc's per-thread cache holds 7 blocks per size and then takes its arena
 * locks, which made malloc the largest cost of a message round trip.
 *
 * Here each scheduler thread keeps two magazines per size class (Bonwick's
 * design): it allocates from and frees to the current one; when that is full
 * it becomes the previous one, and a previous one already full goes to the
 * shared depot; when both are empty a full magazine comes back from the depot.
 * Whole magazines move in O(1) under the depot lock, touching only their first
 * block, so a thread never walks a list of cold blocks (an earlier version
 * handed blocks over by walking half its list, a cache miss per block, which
 * was a quarter of a 1000-actor ring's time). Fresh memory comes from a
 * region per thread, without the lock. Blocks carry no header: LuaJIT always
 * passes the size of the block it frees. Memory stays with the runtime until
 * it is destroyed (it is reused, not returned). */
#include "base/critical.h"
#include "base/heap.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A thread's region, or the shared one, at a time: one transparent huge page. LuaJIT's
 * collector walks every object in allocation order (its sweep, its mark), touching pages all
 * over the heap; with 4 KiB pages a third of binary-trees' samples sat on the sweep's loads
 * of object headers (TLB misses: a cache simulation shows no more misses than plain luajit's). */
#define CHUNK_SIZE ((size_t)1 << HEAP_CHUNK_SHIFT)
#define MAG_BYTES (16 * 1024) /* a magazine holds about this much ... */
#define MAG_MIN 16            /* ... but never fewer blocks than this */
#define MAG_MAX 128           /* or more than this */
/* Fresh blocks a thread carves at once for an empty magazine, in bytes (see alloc_slow). */
#define CARVE_BYTES 512

/* ---- the chunk map behind heap_owns ----
 * A bit per CHUNK_SIZE of the 47-bit user address space: 2^26 bits, 8 MiB of reserved
 * address space of which only the pages covering chunks are ever touched. Shared by every
 * heap of the process (chunks never overlap). */
#define MAP_WORDS (((size_t)1 << (HEAP_ADDR_BITS - HEAP_CHUNK_SHIFT)) / 64)

_Atomic(_Atomic uint64_t *) heap_chunk_map;
static _Atomic int chunk_map_broken; /* a chunk could not be marked: heap_owns lies */
static pthread_once_t chunk_map_once = PTHREAD_ONCE_INIT;

static void chunk_map_init(void)
{
    void *m = mmap(NULL, MAP_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        atomic_store(&chunk_map_broken, 1);
    else
        atomic_store(&heap_chunk_map, (_Atomic uint64_t *)m);
}

static void chunk_mark(const char *chunk, int on)
{
    pthread_once(&chunk_map_once, chunk_map_init);
    _Atomic uint64_t *m = atomic_load_explicit(&heap_chunk_map, memory_order_acquire);
    uintptr_t i = (uintptr_t)chunk >> HEAP_CHUNK_SHIFT;
    if (!m || (i >> (HEAP_ADDR_BITS - HEAP_CHUNK_SHIFT))) {
        atomic_store(&chunk_map_broken, 1);
        return;
    }
    uint64_t bit = (uint64_t)1 << (i & 63);
    if (on)
        atomic_fetch_or_explicit(&m[i >> 6], bit, memory_order_release);
    else
        atomic_fetch_and_explicit(&m[i >> 6], ~bit, memory_order_release);
}

int heap_owns_ready(void)
{
    return atomic_load_explicit(&heap_chunk_map, memory_order_acquire) != NULL &&
           !atomic_load_explicit(&chunk_map_broken, memory_order_relaxed);
}

static inline size_t class_size(unsigned c)
{
    if (c < 16)
        return (size_t)(c + 1) * 16;
    if (c < 28)
        return 256 + (size_t)(c - 15) * 64;
    return 1024 + (size_t)(c - 27) * 256;
}

/* MAG_BYTES / size within [MAG_MIN, MAG_MAX], as a constant expression */
#define MAGN(sz)                                      \
    ((uint8_t)(MAG_BYTES / (sz) < MAG_MIN   ? MAG_MIN \
               : MAG_BYTES / (sz) > MAG_MAX ? MAG_MAX \
                                            : MAG_BYTES / (sz)))
#define SMALL(c) MAGN(((c) + 1) * 16)
#define MID(c) MAGN(256 + ((c)-15) * 64)
#define BIG(c) MAGN(1024 + ((c)-27) * 256)
/* the class of sizes 16i + 1 to 16i + 16 (heap.h's steps) */
#define C4(c) c, c, c, c
#define C16(c) C4(c), C4(c), C4(c), C4(c)
const heap_tables heap_tab = {
    .class_by16 = {0,       1,       2,       3,       4,       5,       6,       7,
                   8,       9,       10,      11,      12,      13,      14,      15,
                   C4(16),  C4(17),  C4(18),  C4(19),  C4(20),  C4(21),  C4(22),  C4(23),
                   C4(24),  C4(25),  C4(26),  C4(27),  C16(28), C16(29), C16(30), C16(31),
                   C16(32), C16(33), C16(34), C16(35), C16(36), C16(37), C16(38), C16(39)},
    .mag_blocks = {SMALL(0),  SMALL(1),  SMALL(2), SMALL(3),  SMALL(4),  SMALL(5),  SMALL(6),
                   SMALL(7),  SMALL(8),  SMALL(9), SMALL(10), SMALL(11), SMALL(12), SMALL(13),
                   SMALL(14), SMALL(15), MID(16),  MID(17),   MID(18),   MID(19),   MID(20),
                   MID(21),   MID(22),   MID(23),  MID(24),   MID(25),   MID(26),   MID(27),
                   BIG(28),   BIG(29),   BIG(30),  BIG(31),   BIG(32),   BIG(33),   BIG(34),
                   BIG(35),   BIG(36),   BIG(37),  BIG(38),   BIG(39)},
};

/* A block's first word links it in its list; the first block of a full
 * magazine in the depot links the next magazine with its second word (every
 * block has at least 16 bytes). */
static inline void *next_of(void *b) { return ((void **)b)[0]; }
static inline void set_next(void *b, void *n) { ((void **)b)[0] = n; }
static inline void *next_mag(void *b) { return ((void **)b)[1]; }
static inline void set_next_mag(void *b, void *n) { ((void **)b)[1] = n; }

/* Whether the depot has anything of class c, read without the lock: a wrong
 * answer only costs a fresh block or a lock taken for nothing. */
static inline int depot_maybe(heap *h, unsigned c)
{
    return atomic_load_explicit((_Atomic uint32_t *)&h->nfull[c], memory_order_relaxed) ||
           atomic_load_explicit((_Atomic uint32_t *)&h->nloose[c], memory_order_relaxed);
}

static inline void set_count(uint32_t *p, uint32_t v)
{
    atomic_store_explicit((_Atomic uint32_t *)p, v, memory_order_relaxed);
}

void heap_init(heap *h)
{
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->lock, NULL);
}

void heap_destroy(heap *h)
{
    for (void *c = h->chunks; c;) {
        void *next = next_of(c);
        chunk_mark(c, 0);
        free(c);
        c = next;
    }
    h->chunks = NULL;
    pthread_mutex_destroy(&h->lock);
}

size_t heap_reserved(heap *h)
{
    mutex_lock(&h->lock);
    size_t n = h->reserved;
    mutex_unlock(&h->lock);
    return n;
}

/* A new chunk, linked into the heap's list; lock held. Its first 16 bytes are
 * the link, so blocks stay 16-byte aligned. */
static char *new_chunk(heap *h)
{
    char *chunk = aligned_alloc(CHUNK_SIZE, CHUNK_SIZE);
    if (!chunk)
        return NULL;
    (void)madvise(chunk, CHUNK_SIZE, MADV_HUGEPAGE); /* advice: THP may be off */
    chunk_mark(chunk, 1);
    set_next(chunk, h->chunks);
    h->chunks = chunk;
    h->reserved += CHUNK_SIZE;
    return chunk + 16;
}

/* The alignment a class's fresh blocks get: the largest power of two dividing their size,
 * up to a cache line. A block then lies in as few lines as its size allows: LuaJIT's table
 * header is 64 bytes, and carved at a 16-byte step three in four straddled two lines, so a
 * table cold in a woken actor (a received message, its garbage at the next sweep) cost two
 * misses at each touch instead of one. */
static inline size_t class_align(size_t sz)
{
    size_t al = sz & (~sz + 1);
    return al > 64 ? 64 : al;
}

static void depot_put_one(heap *h, unsigned c, void *b);
static void free_slow(heap *h, heap_cache *cache, void *p, size_t n);

/* Fresh memory for a block of sz bytes (a class size) from a bump region, aligned by
 * class_align, refilled with a new chunk when it runs short (the rest of the old one is
 * left unused). The gap an alignment skips (16 to 48 bytes) is a free block of its own
 * class: into the cache, or the depot when the caller holds the lock (cache NULL). */
static inline void *bump(heap *h, heap_cache *cache, char **cur, char **end, size_t sz, int locked)
{
    size_t pad = (size_t)(-(uintptr_t)*cur) & (class_align(sz) - 1);
    if ((size_t)(*end - *cur) < pad + sz) {
        if (!locked)
            mutex_lock(&h->lock);
        char *c = new_chunk(h);
        if (!locked)
            mutex_unlock(&h->lock);
        if (!c)
            return NULL;
        *cur = c;
        *end = c - 16 + CHUNK_SIZE;
        pad = (size_t)(-(uintptr_t)*cur) & (class_align(sz) - 1);
    }
    if (pad) {
        void *gap = *cur;
        *cur += pad;
        if (locked)
            depot_put_one(h, heap_class_of(pad), gap);
        else if (!heap_free_fast(cache, gap, pad))
            free_slow(h, cache, gap, pad);
    }
    void *b = *cur;
    *cur += sz;
    return b;
}

/* Takes a full magazine, or the loose blocks, of class c from the depot;
 * lock held. Returns the list and its length in *n (NULL: nothing there). */
static void *depot_take(heap *h, unsigned c, uint32_t *n)
{
    void *m = h->full[c];
    if (m) {
        h->full[c] = next_mag(m);
        set_count(&h->nfull[c], h->nfull[c] - 1);
        *n = heap_tab.mag_blocks[c];
        return m;
    }
    m = h->loose[c];
    *n = h->nloose[c];
    h->loose[c] = NULL;
    set_count(&h->nloose[c], 0);
    return m;
}

/* Puts a full magazine into the depot; lock held. */
static void depot_put_full(heap *h, unsigned c, void *m)
{
    set_next_mag(m, h->full[c]);
    h->full[c] = m;
    set_count(&h->nfull[c], h->nfull[c] + 1);
}

/* Puts one block into the depot's loose list; lock held. A loose list that
 * reaches a magazine's size becomes a full magazine. */
static void depot_put_one(heap *h, unsigned c, void *b)
{
    set_next(b, h->loose[c]);
    h->loose[c] = b;
    set_count(&h->nloose[c], h->nloose[c] + 1);
    if (h->nloose[c] == heap_tab.mag_blocks[c]) {
        depot_put_full(h, c, h->loose[c]);
        h->loose[c] = NULL;
        set_count(&h->nloose[c], 0);
    }
}

static void *alloc_slow(heap *h, heap_cache *cache, size_t size)
{
    if (size > HEAP_MAX_SMALL)
        return malloc(size);
    unsigned c = heap_class_of(size);
    if (!cache) {
        /* one block: a loose one, else one of a full magazine whose rest
         * becomes the (empty until now) loose list */
        mutex_lock(&h->lock);
        void *b = h->loose[c];
        if (b) {
            h->loose[c] = next_of(b);
            set_count(&h->nloose[c], h->nloose[c] - 1);
        } else if ((b = h->full[c])) {
            h->full[c] = next_mag(b);
            set_count(&h->nfull[c], h->nfull[c] - 1);
            h->loose[c] = next_of(b);
            set_count(&h->nloose[c], heap_tab.mag_blocks[c] - 1);
        } else {
            b = bump(h, NULL, &h->bump, &h->bump_end, class_size(c), 1);
        }
        mutex_unlock(&h->lock);
        return b;
    }
    heap_mags *m = &cache->mag[c];
    if (m->nprev) {
        /* the current magazine is empty and the previous one full: swap them */
        void *b = m->prev;
        m->prev = NULL;
        m->cur = next_of(b);
        m->ncur = m->nprev - 1;
        m->nprev = 0;
        return b;
    }
    if (depot_maybe(h, c)) {
        mutex_lock(&h->lock);
        uint32_t n;
        void *list = depot_take(h, c, &n);
        mutex_unlock(&h->lock);
        if (list) {
            m->cur = next_of(list);
            m->ncur = n - 1;
            return list;
        }
    }
    size_t sz = class_size(c);
    char *b = bump(h, cache, &cache->bump, &cache->bump_end, sz, 0);
    if (!b || m->cur)
        return b;
    /* More of the class behind it, into the empty magazine: with nothing freed to reuse
     * (actors that stay alive, each booting a new state) every allocation came here, some
     * 80 instructions a block, where the magazine's pop is a few. The run stays short
     * (CARVE_BYTES), so a class used once does not hold much of the region. */
    uint32_t k = (uint32_t)(CARVE_BYTES / sz);
    size_t room = (size_t)(cache->bump_end - cache->bump) / sz;
    if (k > room)
        k = (uint32_t)room;
    if (k > (uint32_t)heap_tab.mag_blocks[c] - 1)
        k = (uint32_t)heap_tab.mag_blocks[c] - 1;
    if (k == 0)
        return b;
    char *first = cache->bump;
    for (uint32_t i = 0; i + 1 < k; i++)
        set_next(first + i * sz, first + (i + 1) * sz);
    set_next(first + (size_t)(k - 1) * sz, NULL);
    cache->bump += (size_t)k * sz;
    m->cur = first;
    m->ncur = k;
    return b;
}

static void free_slow(heap *h, heap_cache *cache, void *p, size_t n)
{
    if (n > HEAP_MAX_SMALL) {
        free(p);
        return;
    }
    unsigned c = heap_class_of(n);
    if (!cache) {
        mutex_lock(&h->lock);
        depot_put_one(h, c, p);
        mutex_unlock(&h->lock);
        return;
    }
    /* the current magazine is full: it becomes the previous one, and a full
     * previous one goes to the depot */
    heap_mags *m = &cache->mag[c];
    if (m->nprev) {
        mutex_lock(&h->lock);
        depot_put_full(h, c, m->prev);
        mutex_unlock(&h->lock);
    }
    m->prev = m->cur;
    m->nprev = m->ncur;
    set_next(p, NULL);
    m->cur = p;
    m->ncur = 1;
}

static void *realloc_in(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize)
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
    if (osize <= HEAP_MAX_SMALL && nsize <= HEAP_MAX_SMALL &&
        heap_class_of(osize) == heap_class_of(nsize))
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
    mutex_lock(&h->lock);
    for (unsigned c = 0; c < HEAP_CLASSES; c++) {
        heap_mags *m = &cache->mag[c];
        if (m->nprev)
            depot_put_full(h, c, m->prev);
        for (void *x = m->cur; x;) {
            void *next = next_of(x);
            depot_put_one(h, c, x);
            x = next;
        }
        memset(m, 0, sizeof *m);
    }
    mutex_unlock(&h->lock);
    /* the rest of the thread's region stays in the heap's chunk list, unused */
    cache->bump = cache->bump_end = NULL;
}

/* The entries that update a thread's magazines or take the depot's lock are critical
 * sections (base/critical.h): a stack overflow inside would leave them half done. */
void *heap_alloc_slow(heap *h, heap_cache *cache, size_t n)
{
    crit_enter();
    void *b = alloc_slow(h, cache, n);
    crit_exit();
    return b;
}

void heap_free_slow(heap *h, heap_cache *cache, void *p, size_t n)
{
    crit_enter();
    free_slow(h, cache, p, n);
    crit_exit();
}

void *heap_realloc(heap *h, heap_cache *cache, void *ptr, size_t osize, size_t nsize)
{
    crit_enter();
    void *b = realloc_in(h, cache, ptr, osize, nsize);
    crit_exit();
    return b;
}
