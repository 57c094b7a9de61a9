/* Reservations for the arenas of LuaJIT's allocator: see arena_map.h for why. */
#include "base/arena_map.h"
#include "base/critical.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)
/* Pieces are made readable and writable this much at a time (one call per huge page). */
#define COMMIT_STEP HUGE_PAGE
/* Pages given back above the highest piece stay mapped while they are no more than this, or
 * than the bytes handed out: the arena's own swing between collections (binary-trees trims
 * and grows again by about 15 MiB) costs no fault, and an arena that shrank for good gives
 * the rest back. */
#define CACHE_MIN ((size_t)32 << 20)
#define HOLES 16

struct arena_map {
    char *base, *end; /* the reservation */
    char *top;        /* [base, top): handed out, or in a hole */
    char *hw;         /* [base, hw): readable and writable; [top, hw) is the cache */
    size_t handed;
    int closed; /* its arena is gone: unmapped when nothing is handed out */
    int nholes; /* pieces given back below top (a piece is carved from one first) */
    struct {
        char *p;
        size_t n;
    } hole[HOLES];
};

typedef arena_map *running_fn(void);

/* x rounded up to a multiple of a (a power of two) */
static inline uintptr_t round_up(uintptr_t x, uintptr_t a) { return (x + a - 1) & ~(a - 1); }

/* len rounded up to whole pages (LuaJIT's lengths are, but a munmap's need not be) */
static size_t whole_pages(size_t len) { return round_up(len, (uintptr_t)sysconf(_SC_PAGESIZE)); }

/* One lock for every reservation and the registry: taken once per piece (128 KiB or more),
 * never on LuaJIT's allocation path otherwise. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static arena_map **maps; /* sorted by base */
static int nmaps, capmaps;
static _Atomic(running_fn *) running_hook;
static __thread arena_map *creating;

/* About the machine's memory (an arena cannot usefully grow past it), at most 64 GiB, and
 * at most an eighth of the address space a limit (ulimit -v) leaves the process. */
static size_t reserve_size(void)
{
    static _Atomic size_t size;
    size_t s = atomic_load_explicit(&size, memory_order_relaxed);
    if (s)
        return s;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    s = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    s = round_up(s, (size_t)1 << 30);
    if (s < ((size_t)1 << 30))
        s = (size_t)1 << 30;
    if (s > ((size_t)64 << 30))
        s = (size_t)64 << 30;
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur / 8 < s)
        s = round_up((size_t)as.rlim_cur / 8, HUGE_PAGE);
    atomic_store_explicit(&size, s, memory_order_relaxed);
    return s;
}

/* The reservation holding p (under the lock), or NULL. */
static arena_map *find(const void *p)
{
    int lo = 0, hi = nmaps;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((const char *)p < maps[mid]->base)
            hi = mid;
        else if ((const char *)p >= maps[mid]->end)
            lo = mid + 1;
        else
            return maps[mid];
    }
    return NULL;
}

static int enlist(arena_map *m)
{
    if (nmaps == capmaps) {
        int cap = capmaps ? capmaps * 2 : 16;
        arena_map **n = realloc(maps, (size_t)cap * sizeof *n);
        if (!n)
            return 0;
        maps = n, capmaps = cap;
    }
    int i = nmaps;
    while (i > 0 && maps[i - 1]->base > m->base) {
        maps[i] = maps[i - 1];
        i--;
    }
    maps[i] = m;
    nmaps++;
    return 1;
}

static void delist(arena_map *m)
{
    int i = 0;
    while (i < nmaps && maps[i] != m)
        i++;
    if (i == nmaps)
        return;
    memmove(&maps[i], &maps[i + 1], (size_t)(nmaps - i - 1) * sizeof *maps);
    nmaps--;
}

static void destroy(arena_map *m)
{
    munmap(m->base, (size_t)(m->end - m->base));
    free(m);
}

arena_map *arena_map_new(void)
{
    arena_map *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    size_t size = reserve_size();
    /* aligned to a huge page, so that the pieces can be backed by huge pages */
    char *r =
        mmap(NULL, size + HUGE_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED) {
        free(m);
        return NULL;
    }
    char *b = (char *)round_up((uintptr_t)r, HUGE_PAGE);
    if (b > r)
        munmap(r, (size_t)(b - r));
    munmap(b + size, (size_t)(r + HUGE_PAGE - b));
    /* advice: huge pages (where THP is "madvise") save a fault per 4 KiB and the TLB misses
     * of the collector's walks over the whole heap */
    (void)madvise(b, size, MADV_HUGEPAGE);
    m->base = m->top = m->hw = b;
    m->end = b + size;
    mutex_lock(&lock);
    int ok = enlist(m);
    mutex_unlock(&lock);
    if (!ok) {
        destroy(m);
        return NULL;
    }
    return m;
}

/* Gives the cached pages past the bound back to the system (under the lock). */
static void trim_cache(arena_map *m, size_t bound)
{
    char *keep = (char *)round_up((uintptr_t)(m->top + bound), COMMIT_STEP);
    if (keep >= m->hw)
        return;
    (void)madvise(keep, (size_t)(m->hw - keep), MADV_DONTNEED);
    (void)mprotect(keep, (size_t)(m->hw - keep), PROT_NONE);
    m->hw = keep;
}

void arena_map_close(arena_map *m)
{
    if (!m)
        return;
    mutex_lock(&lock);
    m->closed = 1;
    int gone = m->handed == 0;
    if (gone) {
        delist(m);
    } else {
        /* another allocator holds a piece: only what is free goes back now */
        trim_cache(m, 0);
        for (int i = 0; i < m->nholes; i++)
            (void)madvise(m->hole[i].p, m->hole[i].n, MADV_DONTNEED);
    }
    mutex_unlock(&lock);
    if (gone)
        destroy(m);
}

void arena_map_creating(arena_map *m) { creating = m; }

void arena_map_set_running(arena_map *(*running)(void))
{
    atomic_store_explicit(&running_hook, running, memory_order_release);
}

void arena_map_stats_of(arena_map *m, arena_map_stats *out)
{
    mutex_lock(&lock);
    out->reserved = (size_t)(m->end - m->base);
    out->handed = m->handed;
    out->committed = (size_t)(m->hw - m->base);
    out->cached = (size_t)(m->hw - m->top);
    mutex_unlock(&lock);
}

int arena_map_holds(arena_map *m, const void *p)
{
    return (const char *)p >= m->base && (const char *)p < m->end;
}

void arena_map_bounds(arena_map *m, uintptr_t *lo, size_t *span)
{
    *lo = m ? (uintptr_t)m->base : 0;
    *span = m ? (size_t)(m->end - m->base) : 0;
}

int arena_map_live(void)
{
    mutex_lock(&lock);
    int n = nmaps;
    mutex_unlock(&lock);
    return n;
}

/* Makes [base, upto) readable and writable (under the lock); 0 if the system refuses. */
static int commit(arena_map *m, char *upto)
{
    if (upto <= m->hw)
        return 1;
    char *to = (char *)round_up((uintptr_t)upto, COMMIT_STEP);
    if (to > m->end)
        to = m->end;
    if (mprotect(m->hw, (size_t)(to - m->hw), PROT_READ | PROT_WRITE) != 0)
        return 0;
    m->hw = to;
    return 1;
}

/* A piece of len bytes (under the lock), or NULL: from a hole that fits, else from the top. */
static void *take(arena_map *m, size_t len)
{
    for (int i = 0; i < m->nholes; i++)
        if (m->hole[i].n >= len) {
            char *p = m->hole[i].p;
            m->hole[i].p += len;
            m->hole[i].n -= len;
            if (!m->hole[i].n)
                m->hole[i] = m->hole[--m->nholes];
            m->handed += len;
            return p;
        }
    if (len > (size_t)(m->end - m->top) || !commit(m, m->top + len))
        return NULL;
    char *p = m->top;
    m->top += len;
    m->handed += len;
    return p;
}

/* [p, p + len) comes back (under the lock). 1 if the reservation is now to be destroyed. */
static int give(arena_map *m, char *p, size_t len)
{
    m->handed -= len;
    if (p + len == m->top) {
        m->top = p;
        for (int i = 0; i < m->nholes; i++)
            if (m->hole[i].p + m->hole[i].n == m->top) {
                m->top = m->hole[i].p;
                m->hole[i] = m->hole[--m->nholes];
                i = -1; /* another may end where this one began */
            }
        trim_cache(m, m->closed ? 0 : m->handed > CACHE_MIN ? m->handed : CACHE_MIN);
    } else if (m->closed || m->nholes == HOLES) {
        /* kept out of use for good (its address space goes with the reservation) */
        (void)madvise(p, len, MADV_DONTNEED);
    } else {
        m->hole[m->nholes].p = p;
        m->hole[m->nholes].n = len;
        m->nholes++;
    }
    if (m->closed && m->handed == 0) {
        delist(m);
        return 1;
    }
    return 0;
}

void *smarm_arena_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    arena_map *m = creating;
    if (!m) {
        running_fn *running = atomic_load_explicit(&running_hook, memory_order_acquire);
        m = running ? running() : NULL;
    }
    if (m && fd == -1 && (flags & MAP_ANONYMOUS) && !(flags & (MAP_FIXED | MAP_SHARED)) &&
        prot == (PROT_READ | PROT_WRITE)) {
        mutex_lock(&lock);
        void *p = take(m, whole_pages(len));
        mutex_unlock(&lock);
        if (p)
            return p;
        /* the reservation is full: a piece from anywhere, as LuaJIT would map it */
    }
    return mmap(addr, len, prot, flags, fd, off);
}

int smarm_arena_munmap(void *addr, size_t len)
{
    mutex_lock(&lock);
    arena_map *m = find(addr);
    int gone = 0;
    if (m)
        gone = give(m, addr, whole_pages(len));
    mutex_unlock(&lock);
    if (gone)
        destroy(m);
    return m ? 0 : munmap(addr, len);
}

void *smarm_arena_mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *fixed = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        fixed = va_arg(ap, void *);
        va_end(ap);
    }
    mutex_lock(&lock);
    arena_map *m = find(old);
    void *r = MAP_FAILED;
    int gone = 0;
    if (m) {
        char *p = old;
        old_len = whole_pages(old_len);
        new_len = whole_pages(new_len);
        if (new_len <= old_len) {
            if (new_len < old_len)
                gone = give(m, p + new_len, old_len - new_len);
            r = old;
        } else if (p + old_len == m->top && new_len - old_len <= (size_t)(m->end - m->top) &&
                   commit(m, p + new_len)) {
            /* grows in place */
            m->top = p + new_len;
            m->handed += new_len - old_len;
            r = old;
        } else {
            errno = ENOMEM;
        }
    }
    mutex_unlock(&lock);
    if (gone)
        destroy(m);
    if (m)
        return r;
    return flags & MREMAP_FIXED ? mremap(old, old_len, new_len, flags, fixed)
                                : mremap(old, old_len, new_len, flags);
}
