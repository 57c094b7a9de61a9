/* Collections between waits (see collect.h). */
#include "vm/collect.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/runtime.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* The collector starts a cycle once its heap passes a threshold; one that would pass it
 * within this much more allocation (a sixteenth of the threshold, at least 1 KiB) collects at
 * this resume rather than in the middle of the code that follows, where nothing prefetches. */
static int due(actor *a)
{
    return a->vm.mem <= COLLECT_MAX_HEAP && ljx_gc_cycle_due(a->vm.co, 1024, 16);
}

void collect_between_waits(actor *a)
{
    if (!due(a))
        return;
    void **log = a->vm.gc_log;
    if (!log) {
        /* a second cycle will come: keep the addresses from now on (no log, no prefetch) */
        a->vm.gc_log = malloc(COLLECT_LOG * sizeof *a->vm.gc_log);
        a->vm.gc_log_n = 0;
    } else {
        /* newest first, as the sweep goes; for writing (the sweep flips a survivor's mark and
         * links a dead block into a free list) */
        uint32_t n = a->vm.gc_log_n < COLLECT_LOG ? a->vm.gc_log_n : COLLECT_LOG;
        for (uint32_t i = 1; i <= n; i++)
            __builtin_prefetch(log[(a->vm.gc_log_n - i) & (COLLECT_LOG - 1)], 1);
        a->vm.gc_log_n = 0;
    }
    /* and the objects its boot made, which the mark and the sweep walk every cycle (in a ring
     * of 1,000 most of a cycle's misses to memory were theirs) */
    const char *b = a->vm.boot_objs;
    for (uint32_t off = 0; off < a->vm.boot_objs_len; off += 64)
        __builtin_prefetch(b + off, 1);
    atomic_fetch_add_explicit(&a->rt->vm->resume_collections, 1, memory_order_relaxed);
    ljx_gc_cycle(a->vm.co);
}

void collect_forget(actor *a)
{
    free(a->vm.gc_log);
    a->vm.gc_log = NULL;
    a->vm.gc_log_n = 0;
}
