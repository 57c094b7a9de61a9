/* One physical copy of the interpreter's dispatch table for many states.
 *
 * Every LuaJIT state carries its own dispatch table (some 1.9 KB at the end of its GG_State,
 * the block lua_newstate allocates first), and the interpreter reads it at every bytecode. A
 * ring of 1,000 actors reads 1,000 such tables in a lap: 1.9 MB, about the whole of a core's
 * second-level cache, for tables that hold the same addresses. So the first DSHARE_MAX_SLOTS
 * states get their GG_State in a region of their own, placed so that the dispatch table
 * begins a page, and once a state has parked DSHARE_CHECK_EVERY times (a message loop, not a
 * short actor) the runtime maps one page of a memfd over that page, if it holds the same
 * bytes. The mapping is private: a state that writes its table (a hook, a trace being
 * recorded, the JIT switched off) gets a copy of the page, as before, and is offered the
 * shared page again at its next check (every DSHARE_CHECK_EVERY parks). */
#ifndef SMARM_VM_DISPATCH_SHARE_H
#define SMARM_VM_DISPATCH_SHARE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/actor.h"

/* sizeof(GG_State) of the LuaJIT this runtime is built with (dispatch_share.c checks it) */
#define DSHARE_GG_SIZE 6240u
/* the most states in the region (two pages each, and two memory mappings once shared) */
#define DSHARE_MAX_SLOTS 4096u
/* a state's table is checked at every this many parks (a power of two) */
#define DSHARE_CHECK_EVERY 64u

/* the region's bounds, set once before its first block is handed out */
extern _Atomic(char *) dshare_lo, dshare_hi;

/* A GG_State block from the region, or NULL (no room left, or the region or the memfd could
 * not be made: the caller allocates as before). Any thread. */
void *dshare_alloc(void);

/* Whether the block being freed is the region's (every allocation function of a state asks
 * first: lua_close frees the GG_State last, through whichever is set then). */
static inline int dshare_owns(const void *p, size_t osize)
{
    if (osize != DSHARE_GG_SIZE)
        return 0;
    const char *lo = atomic_load_explicit(&dshare_lo, memory_order_relaxed);
    return lo && (const char *)p >= lo &&
           (const char *)p < atomic_load_explicit(&dshare_hi, memory_order_relaxed);
}

/* Gives the region's block p back (its state is closed). */
void dshare_free(void *p);

/* At every DSHARE_CHECK_EVERY-th park of an actor (on the actor's thread,
 * in the wait's C function, before it yields; no field is read per park but the count): if
 * the state's GG_State is the region's and its table is the usual one, and its dispatch page
 * is not the shared page already, maps the shared page over it. The preemption handler leaves
 * the actor alone meanwhile (a->vm.remapping), since a hook it armed in the table would be
 * mapped over. */
void dshare_check(actor *a);

/* Whether state L's dispatch page is the shared page now (introspection, tests). */
int dshare_page_shared(const void *L);

#endif
