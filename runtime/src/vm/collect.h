/* Collections between waits. A message loop's garbage (the table each receive decodes, the
 * one each send was given) is swept by LuaJIT's collector long after it was made, when a
 * thousand other actors have run and every object is a cache miss: in a ring of 1,000 actors
 * the sweep's loads were a fifth of the time, one missing load per dead object, each waiting
 * for the one before it (the collector walks a linked list). So a state that allocates
 * steadily keeps the addresses of its newest small blocks, and when its collector is about
 * to start a cycle as it resumes from a wait, the runtime loads a byte of each of those
 * blocks and of its boot's objects (independent loads: the misses overlap) and runs the whole
 * cycle there, before the wait's continuation takes anything. */
#ifndef SMARM_VM_COLLECT_H
#define SMARM_VM_COLLECT_H

#include <stddef.h>

#include "core/actor.h"

/* The newest blocks a state's log keeps (a power of two): a ring of 1,000 actors makes about
 * 300 blocks per cycle, and the sweep visits the newest first. */
#define COLLECT_LOG 256
/* Only a state that keeps this little collects at a resume: a cycle is one pause, bounded by
 * the heap it walks, what it keeps and the room's garbage (COLLECT_MAX_WALK at most; larger
 * states keep LuaJIT's incremental steps). */
#define COLLECT_MAX_HEAP (256u * 1024)

/* After a cycle between waits a state may allocate its share of a budget, split among the
 * actors alive, before its next, even where LuaJIT's pause (twice what the cycle left) gives
 * less, and at most COLLECT_ROOM_MAX: every cycle marks and sweeps the whole kept heap (a
 * message loop's libraries, 10 KB, a gen_server's modules, 80-110 KB), so a state among few
 * that keeps its cycles as far apart as its kept heap pays that walk every few dozen
 * messages; among thousands, the budget's share is below the pause's room and nothing
 * changes. The budget is half a core's second-level cache (collect_room_budget): the
 * garbage of the actors that take turns on a core is memory they walk and reuse, and past
 * that cache each of its blocks is a miss twice, when it is made and when it is swept (a
 * ring of 10 actors with a 4 MB budget missed a 1 MB cache about 6 times a hop, with 512 KB
 * almost never: docs/DESIGN.md, "Room by the actors alive"). */
#define COLLECT_BUDGET_MIN (256u * 1024)
#define COLLECT_BUDGET_MAX (4u << 20)
#define COLLECT_BUDGET_UNKNOWN (512u * 1024) /* where the cache's size is not known */
#define COLLECT_ROOM_MAX (256u * 1024)
/* A state that keeps at most COLLECT_SMALL_KEPT after a cycle between waits gets at most
 * collect_small_room before its next: COLLECT_ROOM_SMALL, or half what it keeps, or its share
 * of the budget, whichever is most, where LuaJIT's pause would give it as much as it keeps:
 * its cycles come more often, but each sweeps fewer blocks, which its log holds and the next
 * allocations find warm. A message loop's state keeps 13-15 KB fresh, about 25 KB recycled
 * from the pool (a ring of 1,000 took 0.94 of the time per hop); with 50 small tables of its
 * own 0.92. Half what it keeps, for a state past 16 KB: every cycle walks all it keeps, and
 * ring members that keep 200 small tables (about 29 KB) took 0.82-0.86 of the time per hop
 * with it, against 8 KB, and 0.90 with the pause's room; with 300 and 450 (about 37 and 48
 * KB) 0.86 and 0.88 of the pause's time, with 600 (about 58 KB) the same; a state that keeps
 * 80 KB, past the bound, took 1.19 with half its pause's room. docs/DESIGN.md, "A small
 * state's room"; tests/cli/small_room_test.sh. */
#define COLLECT_SMALL_KEPT (48u * 1024)
#define COLLECT_ROOM_SMALL (8u * 1024)
/* The most heap a cycle at a resume walks: a state that keeps at most COLLECT_MAX_HEAP, with
 * its room's garbage on top. */
#define COLLECT_MAX_WALK (COLLECT_MAX_HEAP + COLLECT_ROOM_MAX)

/* The boot's objects are loaded ahead only from a run of fresh memory at most this long (a
 * booted state's libraries take about 5.5 KB there). */
#define COLLECT_BOOT_MAX (32u * 1024)

/* The state has booted, and fresh was the thread's fresh memory before its boot and after: if
 * every block the boot took came from there, the objects it made lie in between. Those are
 * most of what a message loop's state keeps (its libraries: tables, functions, strings), and
 * every cycle's mark and sweep walk them, cold by then: its cycles load them ahead. */
static inline void collect_booted(actor *a, const char *fresh_before, const char *fresh_after)
{
    size_t n =
        fresh_before && fresh_after > fresh_before ? (size_t)(fresh_after - fresh_before) : 0;
    a->vm.boot_objs = fresh_before;
    a->vm.boot_objs_len = n <= COLLECT_BOOT_MAX ? (uint32_t)n : 0;
}

/* Notes a small block the state was just given (its allocation function, when a log is kept). */
static inline void collect_note(actor *a, void *b)
{
    a->vm.gc_log[a->vm.gc_log_n++ & (COLLECT_LOG - 1)] = b;
}

/* At a resume from a coroutine park, before the wait's continuation: if the state's
 * collector would start a cycle soon, runs the cycle through its sweep now with its newest
 * blocks loaded ahead (the first time, it starts the log instead), and leaves it at least
 * its share of the budget before the next (and, if it keeps little, at most that or
 * COLLECT_ROOM_SMALL). __gc finalizers are not run here: the steps of the code that follows
 * run them, as before. */
void collect_between_waits(actor *a);

/* The budget for a second-level cache of l2 bytes (0 or less: not known): half of it, within
 * COLLECT_BUDGET_MIN and COLLECT_BUDGET_MAX. */
size_t collect_budget_for(long l2);
/* The room after a cycle between waits of a state that keeps `kept` bytes (at most
 * COLLECT_SMALL_KEPT) and whose share of the budget is `share`: the most of
 * COLLECT_ROOM_SMALL, kept / 2 and share. */
size_t collect_small_room(size_t kept, size_t share);
/* This machine's budget (its cache's size read once). */
size_t collect_room_budget(void);

/* The state is closed, abandoned or pooled: its log goes. */
void collect_forget(actor *a);

#endif
