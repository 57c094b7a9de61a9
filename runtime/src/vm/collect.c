/* Collections between waits (see collect.h). */
#include "vm/collect.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/runtime.h"
#include "vm/ljx.h"
#include "vm/luavm.h"

/* The collector starts a cycle once its heap passes a threshold; one that would pass it
 * within this much more allocation (a sixteenth of the threshold, at least 1 KiB) collects at
 * this resume rather than in the middle of the code that follows, where nothing prefetches. */
static int due(actor *a)
{
    return a->vm.mem <= COLLECT_MAX_WALK && ljx_gc_cycle_due(a->vm.co, 1024, 16);
}

/* A logged block may have been freed since and taken by another state, even on another
 * thread: reading a byte of it is harmless here (the heap's chunks stay mapped while the
 * runtime lives, and the byte is thrown away), but the sanitizers would report it, so their
 * builds prefetch instead. */
#if defined(SMARM_ASAN) || defined(SMARM_TSAN)
#define TOUCH_LINE(p, sink) __builtin_prefetch((p), 1)
#else
#define TOUCH_LINE(p, sink) ((sink) += *(volatile const char *)(p))
#endif

/* Reads one byte of each line from lo (len bytes, in steps of 64) and of each of the n newest
 * blocks in log, the newest first. Loads, not prefetch instructions: a burst of a few hundred
 * prefetches outruns the misses a core can have in flight, and on some processors (this
 * project's AMD EPYC host) the prefetches past that are dropped, while a load waits for room.
 * The loads do not depend on each other, so their misses still overlap. */
static void touch_lines(const char *lo, uint32_t len, void *const *log, uint32_t newest, uint32_t n)
{
    uintptr_t sink = 0;
    for (uint32_t off = 0; off < len; off += 64)
        TOUCH_LINE(lo + off, sink);
    for (uint32_t i = 1; i <= n; i++)
        TOUCH_LINE(log[(newest - i) & (COLLECT_LOG - 1)], sink);
    __asm__ volatile("" ::"r"(sink));
}

size_t collect_budget_for(long l2)
{
    if (l2 <= 0)
        return COLLECT_BUDGET_UNKNOWN;
    size_t b = (size_t)l2 / 2;
    return b < COLLECT_BUDGET_MIN   ? COLLECT_BUDGET_MIN
           : b > COLLECT_BUDGET_MAX ? COLLECT_BUDGET_MAX
                                    : b;
}

size_t collect_room_budget(void)
{
    /* read once; two threads that both find 0 compute the same value */
    static _Atomic size_t budget;
    size_t b = atomic_load_explicit(&budget, memory_order_relaxed);
    if (!b) {
        b = collect_budget_for(sysconf(_SC_LEVEL2_CACHE_SIZE));
        atomic_store_explicit(&budget, b, memory_order_relaxed);
    }
    return b;
}

/* The room a state gets after a cycle between waits, at least: the budget shared by the
 * actors alive, at most COLLECT_ROOM_MAX. None beyond the pause's under max_heap: the
 * limit counts garbage too, and an actor stopped for garbage it would have collected under
 * the pause's room would be a surprise. */
static size_t room_after_cycle(actor *a)
{
    if (a->vm.max_heap)
        return 0;
    int64_t live = atomic_load_explicit(&a->rt->live, memory_order_relaxed);
    size_t room = collect_room_budget() / (size_t)(live > 0 ? live : 1);
    return room < COLLECT_ROOM_MAX ? room : COLLECT_ROOM_MAX;
}

size_t collect_small_room(size_t kept, size_t share)
{
    size_t room = share > COLLECT_ROOM_SMALL ? share : COLLECT_ROOM_SMALL;
    return room > kept / 2 ? room : kept / 2;
}

/* The room after a cycle, once the collector is in its pause: at least the state's share, and
 * for a state that keeps little at most collect_small_room past it (under max_heap too, where
 * less garbage only keeps it further from its limit). 0 if the collector is not in its pause
 * yet (the cycle left finalizers due): the room is owed. */
static int give_room(actor *a)
{
    size_t share = room_after_cycle(a);
    if (!ljx_gc_room_min(a->vm.co, share))
        return 0;
    if (a->vm.mem <= COLLECT_SMALL_KEPT)
        ljx_gc_room(a->vm.co, collect_small_room(a->vm.mem, share));
    return 1;
}

/* collect_between_waits past its check: apart, so that the check, run at every wake, saves
 * no registers for the cycle's work (its prologue and epilogue were 17 of its 37
 * instructions) */
static __attribute__((noinline)) void collect_now(actor *a)
{
    /* the last cycle's finalizers have run since (the code's own steps ran them): the
     * pause's threshold is set, and the room goes on top of it */
    if (__builtin_expect(a->vm.room_owed, 0) && give_room(a))
        a->vm.room_owed = 0;
    if (!due(a))
        return;
    void **log = a->vm.gc_log;
    uint32_t n = 0;
    if (!log) {
        /* a second cycle will come: keep the addresses from now on (no log to read yet) */
        a->vm.gc_log = malloc(COLLECT_LOG * sizeof *a->vm.gc_log);
    } else {
        n = a->vm.gc_log_n < COLLECT_LOG ? a->vm.gc_log_n : COLLECT_LOG;
    }
    /* the objects its boot made first, which the mark walks (in a ring of 1,000 most of a
     * cycle's misses to memory were theirs), then the newest blocks, newest first as the sweep
     * goes (it flips a survivor's mark and links a dead block into a free list) */
    touch_lines(a->vm.boot_objs, a->vm.boot_objs_len, log, a->vm.gc_log_n, n);
    a->vm.gc_log_n = 0;
    atomic_fetch_add_explicit(&a->rt->vm->resume_collections, 1, memory_order_relaxed);
    ljx_gc_cycle(a->vm.co, &a->vm.gc_strings);
    a->vm.room_owed = !give_room(a);
}

void collect_between_waits(actor *a)
{
    if (__builtin_expect(a->vm.room_owed, 0) || due(a))
        collect_now(a);
}

void collect_forget(actor *a)
{
    free(a->vm.gc_log);
    a->vm.gc_log = NULL;
    a->vm.gc_log_n = 0;
    a->vm.room_owed = 0;
}
