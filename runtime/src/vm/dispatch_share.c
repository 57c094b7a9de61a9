/* One physical copy of the interpreter's dispatch table for many states: see dispatch_share.h.
 *
 * A slot is two pages: the first holds the GG_State up to its dispatch table (4,064 bytes,
 * the lua_State, global_State, jit_State and hot counters, written all the time), the second
 * begins with the dispatch table and holds the rest of the block (2,176 bytes: the table and
 * the fast functions' bytecode), then nothing. Only that second page is ever mapped over. */
#include "vm/dispatch_share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/spin.h"

#include "lj_obj.h"
#include "lj_jit.h"
#include "lj_dispatch.h"

#define PAGE 4096u
#define DISP_OFF offsetof(GG_State, dispatch)
/* the bytes of the second page the block covers */
#define DISP_BYTES (sizeof(GG_State) - DISP_OFF)

_Static_assert(sizeof(GG_State) == DSHARE_GG_SIZE, "DSHARE_GG_SIZE is LuaJIT's GG_State");
_Static_assert(DISP_OFF <= PAGE && DISP_BYTES <= PAGE, "a GG_State fits a slot's two pages");
_Static_assert(DISP_OFF % 16 == 0, "a slot's GG_State is 16-byte aligned");

_Atomic(char *) dshare_lo, dshare_hi;

static _Atomic uint32_t lock;
static int state; /* 0 not tried, 1 ready, -1 unavailable (under lock) */
static uint32_t nslots, bumped, nfree;
static uint32_t *freelist;
static int memfd = -1;
/* the shared page, through a mapping of its own; made from the first usual table a check
 * offers (under lock) */
static _Atomic(char *) canon;
/* a mapping failed: no more are tried */
static _Atomic int give_up;

/* Whether page is the shared page itself, not a copy: a fresh token written into the shared
 * page's last word (past the block: no state reads it) shows in page iff page is the same
 * memory. A copy holds whatever the word was when it was made, and the state's own thread is
 * the only one that makes copies of its page: here, it is in a wait, and no hook is armed. */
#define TOKEN_AT (PAGE - sizeof(uint64_t))
static _Atomic uint64_t tokens;

static int is_shared(const char *page, char *c)
{
    uint64_t t = atomic_fetch_add_explicit(&tokens, 1, memory_order_relaxed) + 1;
    uint64_t *mine = (uint64_t *)(void *)(c + TOKEN_AT);
    const uint64_t *theirs = (const uint64_t *)(const void *)(page + TOKEN_AT);
    /* atomic: checks on other threads write the same word meanwhile (through c, or through
     * a page that is the shared page), which leaves it as another new token */
    __atomic_store_n(mine, t, __ATOMIC_RELAXED);
    return __atomic_load_n(theirs, __ATOMIC_RELAXED) == __atomic_load_n(mine, __ATOMIC_RELAXED);
}

/* The slots this process can afford: two mappings each once shared, a small part of the
 * kernel's limit on them (vm.max_map_count), whatever else the process maps. */
static uint32_t slots_for_map_limit(void)
{
    long limit = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &limit) != 1)
            limit = 65530;
        fclose(f);
    }
    long n = limit / 16;
    return n < 0 ? 0 : n > (long)DSHARE_MAX_SLOTS ? DSHARE_MAX_SLOTS : (uint32_t)n;
}

/* Makes the region, its free list and the memfd (under lock). */
static int setup(void)
{
    uint32_t n = slots_for_map_limit();
    if (n == 0)
        return -1;
    uint32_t *fl = malloc(n * sizeof *fl);
    if (!fl)
        return -1;
    size_t len = (size_t)n * 2 * PAGE;
    char *base =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        free(fl);
        return -1;
    }
    /* pages, not huge pages: single pages are mapped over */
    madvise(base, len, MADV_NOHUGEPAGE);
    int fd = memfd_create("smarm-dispatch", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, PAGE) != 0) {
        if (fd >= 0)
            close(fd);
        munmap(base, len);
        free(fl);
        return -1;
    }
    memfd = fd;
    freelist = fl;
    nslots = n;
    atomic_store_explicit(&dshare_hi, base + len, memory_order_relaxed);
    atomic_store_explicit(&dshare_lo, base, memory_order_release);
    return 0;
}

void *dshare_alloc(void)
{
    void *p = NULL;
    spin_lock(&lock);
    if (state == 0)
        state = setup() == 0 ? 1 : -1;
    if (state == 1) {
        uint32_t i = UINT32_MAX;
        if (nfree)
            i = freelist[--nfree];
        else if (bumped < nslots)
            i = bumped++;
        if (i != UINT32_MAX)
            p = atomic_load_explicit(&dshare_lo, memory_order_relaxed) + (size_t)i * 2 * PAGE +
                PAGE - DISP_OFF;
    }
    spin_unlock(&lock);
    return p;
}

void dshare_free(void *p)
{
    char *lo = atomic_load_explicit(&dshare_lo, memory_order_relaxed);
    uint32_t i = (uint32_t)(((char *)p + DISP_OFF - PAGE - lo) / (2 * PAGE));
    spin_lock(&lock);
    freelist[nfree++] = i;
    spin_unlock(&lock);
}

int dshare_page_shared(const void *L)
{
    char *c = atomic_load_explicit(&canon, memory_order_acquire);
    return c && dshare_owns(L, DSHARE_GG_SIZE) && is_shared((const char *)L + DISP_OFF, c);
}

/* The state's table as the runtime's states usually have it: JIT mode as set, no hook, no
 * trace being recorded, no profiler. */
static int usual(global_State *g)
{
    return g->hookmask == 0 && G2J(g)->state == LJ_TRACE_IDLE && g->vmevmask == 0;
}

/* The shared page, made from page (a usual table) if there is none yet; NULL if it cannot
 * be made. Whether a state's table matches it is its bytes' business (dshare_check). */
static char *shared_page(const char *page)
{
    char *c = atomic_load_explicit(&canon, memory_order_acquire);
    if (c)
        return c;
    spin_lock(&lock);
    c = atomic_load_explicit(&canon, memory_order_relaxed);
    if (!c && pwrite(memfd, page, DISP_BYTES, 0) == (ssize_t)DISP_BYTES) {
        void *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        if (m != MAP_FAILED) {
            c = m;
            atomic_store_explicit(&canon, c, memory_order_release);
        }
    }
    spin_unlock(&lock);
    return c;
}

void dshare_check(actor *a)
{
    lua_State *L = a->vm.L;
    if (!dshare_owns(L, DSHARE_GG_SIZE) || atomic_load_explicit(&give_up, memory_order_relaxed))
        return;
    char *page = (char *)L + DISP_OFF;
    /* no hook is armed in the table from here until the mapping is made (preempt.c) */
    a->vm.remapping = 1;
    atomic_signal_fence(memory_order_seq_cst);
    char *c = usual(G(L)) ? shared_page(page) : NULL;
    if (c && !is_shared(page, c) && memcmp(page, c, DISP_BYTES) == 0) {
        /* not MAP_POPULATE: on a private writable mapping it populates for writing, which
         * copies the page */
        if (mmap(page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, memfd, 0) ==
            MAP_FAILED) {
            /* the page may be gone: its bytes were the shared page's, so a private page with
             * them is what the state had */
            atomic_store_explicit(&give_up, 1, memory_order_relaxed);
            if (mmap(page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0) == MAP_FAILED) {
                static const char msg[] = "smarm: fatal: a state's dispatch table could not be "
                                          "mapped back after a failed mapping\n";
                (void)!write(2, msg, sizeof msg - 1);
                abort();
            }
            memcpy(page, c, DISP_BYTES);
        }
    }
    atomic_signal_fence(memory_order_seq_cst);
    a->vm.remapping = 0;
}
