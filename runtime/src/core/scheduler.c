/* Schedulers: each OS thread pops queued actors and switches to their C stacks;
 * actors come back when they yield, park or end, and the scheduler settles the slot. */
#include "core/scheduler.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/context.h"
#include "base/futex.h"
#include "core/blocking.h"
#include "core/exit.h"
#include "core/host.h"
#include "core/pg.h"
#include "core/logsink.h"
#include "core/registry.h"
#include "core/stable.h"
#include "core/preempt.h"
#include "base/sanitize.h"
#include "base/spin.h"
#include "base/zalloc.h"
#include "core/signals.h"
#include "core/stackwatch.h"
#include "core/trace.h"

#if defined(SMARM_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(SMARM_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

/* how long an idle scheduler polls before it sleeps, at most; halved after each spin that
 * found nothing, down to SPIN_NS >> SPIN_SHIFT_MAX (see spin_for_work) */
#define SPIN_NS 20000
#define SPIN_SHIFT_MAX 4
/* one pick in this many prefers actors that used up their timeslice */
#define YIELDED_SHARE 4
/* how many actors in a row a scheduler takes from its runnext */
#define RUNNEXT_STREAK 32
/* one new-actor pick in this many takes the shared new queue ahead of the spawn stack */
#define NEW_FIFO_TURN 256
/* whether a scheduler's new actors are worth a sibling's steal (sched.share_votes, see
 * note_first_run): a first run this long says yes, and the votes range up to SHARE_VOTES */
#define SHARE_NS 20000
#define SHARE_VOTES 8
/* every this many watchdog ticks, a scheduler whose votes fell to none gets one back */
#define SHARE_PROBE_TICKS 8
/* a spin shorter than this takes no runnext: one actor for so short a spin is no sign that
 * its scheduler is held up (spawn.lua's children run about 1 us) */
#define RUNNEXT_STEAL_SPIN_NS 5000
/* in a runnext word (slot index + 1, far below this bit): the actor is new, put there by its
 * spawner, and an idle sibling's spin takes it only while its scheduler shares new actors */
#define RUNNEXT_NEW 0x80000000u

/* The slot index in a non-zero runnext word. */
static inline uint32_t runnext_idx(uint32_t n) { return (n & ~RUNNEXT_NEW) - 1; }

/* initial-exec: a load from the thread pointer, not a __tls_get_addr call (the code is PIC
 * for the shared library) */
static __thread sched *tls_sched __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) sched *sched_current(void)
{
    /* an empty asm keeps the compiler from caching the TLS address across a switch */
    sched *s = tls_sched;
    __asm__ volatile("" ::: "memory");
    return s;
}

actor *sched_actor(smarm_runtime *rt, uint64_t pid)
{
    uint32_t idx = pid_index(pid);
    if (idx >= rt->slots.max)
        return NULL;
    return &rt->actors[idx];
}

/* ---- stack switching, with the sanitizers told about it ---- */

#if defined(SMARM_TSAN)
static void *actor_fiber(actor *a)
{
    if (!a->run.fiber)
        a->run.fiber = __tsan_create_fiber(0);
    return a->run.fiber;
}
#endif

/* scheduler -> actor */
static void switch_in(sched *s, actor *a)
{
#if defined(SMARM_ASAN)
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, a->run.stk->base, a->run.stk->size);
#endif
#if defined(SMARM_TSAN)
    __tsan_switch_to_fiber(actor_fiber(a), 0);
#endif
    /* critical sections that would begin near the guard take the overflow first */
    crit_stack_floor = (uintptr_t)a->run.stk->base + CRIT_STACK_MARGIN;
    ctx_switch(&s->sp, a->run.sp);
    crit_stack_floor = 0;
#if defined(SMARM_ASAN)
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* actor -> its current scheduler */
static void switch_out(actor *a)
{
    sched *s = sched_current();
#if defined(SMARM_ASAN)
    void *fake = NULL;
    /* a finished or coroutine-parked actor never comes back to this stack */
    int gone = a->run.leave == LEAVE_DONE || a->run.leave == LEAVE_PARK_CO;
    __sanitizer_start_switch_fiber(gone ? NULL : &fake, s->stack_lo, s->stack_size);
#endif
#if defined(SMARM_TSAN)
    __tsan_switch_to_fiber(s->fiber, 0);
#endif
    ctx_switch(&a->run.sp, s->sp);
#if defined(SMARM_ASAN)
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void sanitizer_actor_started(void)
{
#if defined(SMARM_ASAN)
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
}

/* Where a fresh context starts: the actor's body (vm/body.c, through the runtime's hooks). */
static void actor_start(void *arg)
{
    actor *a = arg;
    sanitizer_actor_started();
    a->rt->hooks.entry(a);
}

static void actor_stop_start(void *arg)
{
    actor *a = arg;
    sanitizer_actor_started();
    a->rt->hooks.stop_entry(a);
}

/* ---- stacks: one warm spare per scheduler in front of the shared pool ---- */

static stack *take_stack(sched *s, actor *a)
{
    if (!a->run.stack_size && !a->run.stack_guard && s->spare) {
        stack *st = s->spare;
        s->spare = NULL;
        return st;
    }
    return stack_get(s->rt->stacks, a->run.stack_size, a->run.stack_guard);
}

static void give_stack(sched *s, stack *st)
{
    if (!s->spare && st->pooled) {
        s->spare = st;
        return;
    }
    stack_put(s->rt->stacks, st);
}

/* No C stack could be had for a to run on: it ends with reason "no_stack" (unless it is
 * already being stopped for another reason), on one of the pool's reserve stacks. */
static void no_stack(sched *s, actor *a, int err)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&a->run.stop, &expected, STOP_NO_STACK,
                                                 memory_order_acq_rel, memory_order_acquire))
        return;
    stack_pool *p = s->rt->stacks;
    size_t size = a->run.stack_size ? a->run.stack_size : stack_pool_default_size(p);
    size_t guard = a->run.stack_guard ? a->run.stack_guard : stack_pool_default_guard(p);
    char what[96], detail[256];
    snprintf(what, sizeof what, "cannot have a C stack (%zu bytes, guard %zu bytes)", size, guard);
    snprintf(detail, sizeof detail, "%s%s; it ends with reason no_stack", strerror(err),
             err == ENOMEM && stack_pool_scheme(p) == STACK_SCHEME_MPROTECT
                 ? " (this kernel lacks MADV_GUARD_INSTALL: each stack is two mappings, "
                   "against vm.max_map_count)"
                 : "");
    log_report(s->rt, LOG_ERROR, "runtime", a->pid, what, detail);
}

/* ---- run queue with the wake tail ---- */

/* The enqueue tail: a parked scheduler gets the new work, unless one is
 * spinning and will find it anyway. The fence orders the push before the read
 * of `spinning`; a spinner orders its decrement before its last look at the
 * queue the same way, so one of the two always sees the other. */
static void wake_for_work(smarm_runtime *rt)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&rt->spinning, memory_order_relaxed) == 0)
        park_set_wake_one(&rt->parks);
}

static void enqueue(smarm_runtime *rt, uint32_t idx)
{
    runq_push(rt->rq, idx);
    wake_for_work(rt);
}

/* Actors that used up their timeslice (or yielded) wait in a queue of their own, behind
 * actors that were just woken and new ones: a woken actor usually runs briefly and parks
 * again, so it answers within a timeslice even when every scheduler is full of actors that
 * never block, and a new actor gets a first, short slice (see run_actor) before it can
 * join them. next_runnable keeps the yielded queue from starving. */
static void enqueue_new(smarm_runtime *rt, uint32_t idx)
{
    runq_push(rt->rq_new, idx);
    wake_for_work(rt);
}

/* Whether an idle sibling may take s's new actors, and is woken for them. */
static inline int shares_new(sched *s)
{
    return atomic_load_explicit(&s->share_votes, memory_order_relaxed) > 0 ||
           atomic_load_explicit(&s->share_stale, memory_order_relaxed);
}

/* s pushed or took a new actor: it is back with its new actors, which are no longer stale
 * (see sched_share_backlog). */
static inline void touch_new(sched *s)
{
    count_own(&s->new_touches);
    if (__builtin_expect(atomic_load_explicit(&s->share_stale, memory_order_relaxed), 0))
        atomic_store_explicit(&s->share_stale, 0, memory_order_relaxed);
}

/* Spawned actors wait on their scheduler's spawn stack, the newest on top. A tree of actors
 * that spawn and then wait for their children (skynet) so runs depth-first: few of them are
 * alive at once, and each new one boots on the state and C stack that the one before just
 * gave back, in a warm cache. In one FIFO it ran breadth-first, and of skynet's million
 * actors some 700,000 were alive at once (2.9 GB, most of the time in page faults). An idle
 * sibling takes the oldest (the largest subtree, as in work stealing). A full stack moves its
 * oldest to the shared new queue, which goes first one pick in NEW_FIFO_TURN, so no new actor
 * waits for more than a bounded number of spawns and picks. */
static void push_spawned(sched *s, uint32_t idx)
{
    uint32_t spilled;
    if (spawnstack_push(&s->spawned, idx, &spilled))
        runq_push(s->spillq ? s->spillq : s->rt->rq_new, spilled);
    touch_new(s);
    if (shares_new(s))
        wake_for_work(s->rt);
}

/* The oldest new actor for s: of its spill queue or of the shared new queue, which go first
 * in turns (neither starves the other). */
static inline int pop_old_new(sched *s, uint32_t *idx)
{
    runq *mine = s->spillq, *shared = s->rt->rq_new;
    if ((s->new_turn / NEW_FIFO_TURN) & 1)
        return runq_pop(shared, idx) || (mine && runq_pop(mine, idx));
    return (mine && runq_pop(mine, idx)) || runq_pop(shared, idx);
}

/* The next new actor for s: its own newest, or an old one. */
static inline int pop_new(sched *s, uint32_t *idx)
{
    int got = ((++s->new_turn % NEW_FIFO_TURN) == 0 && pop_old_new(s, idx)) ||
              spawnstack_pop_newest(&s->spawned, idx) || pop_old_new(s, idx);
    if (got)
        touch_new(s);
    return got;
}

/* An idle scheduler takes the oldest new actor of a sibling that shares them (shares_new):
 * of its spill queue, or of its spawn stack. */
static int steal_spawned(sched *s, uint32_t *idx)
{
    smarm_runtime *rt = s->rt;
    for (int i = 0; i < sched_total(rt); i++) {
        sched *o = &rt->scheds[i];
        if (o != s && shares_new(o) &&
            ((o->spillq && runq_pop(o->spillq, idx)) || spawnstack_pop_oldest(&o->spawned, idx)))
            return 1;
    }
    return 0;
}

/* Moves the new actors on from's spill queue and spawn stack, oldest first so their order
 * stays: to the stack of `to` (a spare that stands in for from), or to the shared new queue
 * (a spare that retires). Not into the shared queue on a cover: a FIFO runs a tree
 * breadth-first. */
static void move_spawned(sched *from, sched *to)
{
    uint32_t idx, spilled;
    while ((from->spillq && runq_pop(from->spillq, &idx)) ||
           spawnstack_pop_oldest(&from->spawned, &idx)) {
        if (!to)
            runq_push(from->rt->rq_new, idx);
        else if (spawnstack_push(&to->spawned, idx, &spilled))
            runq_push(from->rt->rq_new, spilled);
    }
    wake_for_work(from->rt);
}

/* New actors waiting on the schedulers' spawn stacks and spill queues (approximate). */
static uint32_t spawned_waiting(smarm_runtime *rt)
{
    uint32_t n = 0;
    for (int i = 0; i < sched_total(rt); i++)
        n += sched_own_new(&rt->scheds[i]);
    return n;
}

/* An actor preempted in a slice in which it spawned: ahead of the new actors, its own
 * among them, so a spawner is not held up by the first slices of what it spawns (a root
 * spawning 10,000 CPU-bound actors waited for most of their boots); woken actors still
 * come first. */
static void enqueue_spawner(smarm_runtime *rt, uint32_t idx)
{
    runq_push(rt->rq_spawner, idx);
    wake_for_work(rt);
}

static void enqueue_yielded(smarm_runtime *rt, uint32_t idx)
{
    runq_push(rt->rq_yield, idx);
    wake_for_work(rt);
}

/* Actors waiting in the shared queues of actors that have run: woken, spawning, yielded. */
static inline uint32_t queued_ran(smarm_runtime *rt)
{
    return runq_size_approx(rt->rq) + runq_size_approx(rt->rq_spawner) +
           runq_size_approx(rt->rq_yield);
}

/* Actors waiting in the shared queues (approximate). */
static inline uint32_t queued(smarm_runtime *rt)
{
    return queued_ran(rt) + runq_size_approx(rt->rq_new);
}

/* New actors that s would share: its own, and those of the shared new queue. */
static inline uint32_t new_waiting(sched *s)
{
    return sched_own_new(s) + runq_size_approx(s->rt->rq_new);
}

/* Woken, spawning or new actors wait (approximate): a slice taken ahead of them is short. */
static inline int fresh_queued(sched *s)
{
    smarm_runtime *rt = s->rt;
    return runq_size_approx(rt->rq) + runq_size_approx(rt->rq_spawner) + new_waiting(s) > 0;
}

/* The next actor of the shared queues, in their order: woken, spawning, new (s's spawn stack
 * with the shared new queue), yielded. */
static inline int pop_shared(sched *s, uint32_t *idx)
{
    smarm_runtime *rt = s->rt;
    return runq_pop(rt->rq, idx) || runq_pop(rt->rq_spawner, idx) || pop_new(s, idx) ||
           runq_pop(rt->rq_yield, idx);
}

RACY_READS void sched_report_left_behind(actor *a, const char *where)
{
    char line[200];
    int n = snprintf(line, sizeof line,
                     "smarm: actor <0.%u.%u> is still inside %s after the root-exit sweep; "
                     "the run ends without it\n",
                     pid_index(a->pid), pid_gen(a->pid), where);
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

actor *sched_stuck_actor(sched *s, uint64_t now, uint64_t not_before, uint64_t grace)
{
    actor *a = atomic_load_explicit(&s->cur, memory_order_acquire);
    uint64_t since = atomic_load_explicit(&s->quiet_since, memory_order_relaxed);
    if (since < not_before)
        since = not_before;
    if (!a || now - since < grace || !atomic_load_explicit(&a->run.stop, memory_order_relaxed))
        return NULL;
    return a;
}

int sched_work_waiting(smarm_runtime *rt, uint64_t now)
{
    if (queued(rt) > 0 || timers_earliest(&rt->tm) <= now || spawned_waiting(rt) > 0)
        return 1;
    for (int i = 0; i < sched_total(rt); i++) {
        sched *s = &rt->scheds[i];
        if (atomic_load_explicit(&s->runnext, memory_order_relaxed) ||
            atomic_load_explicit(&s->npinned, memory_order_relaxed) ||
            (s->homeq && runq_size_approx(s->homeq) > 0))
            return 1;
    }
    return 0;
}

/* ---- a spawner held behind quick new actors ----
 *
 * A spawner keeps its place ahead of the actors it spawned (enqueue_spawner), so that it is
 * not held up by their first slices when they compute. When they are quick (they boot and
 * wait, or end), that place let a loop of spawns outrun them without bound: in
 * tests/bench/timers.lua (100,000 actors that each sleep 10 ms) some 85,000 were alive at
 * once, each with an actor record and soon a Lua state on memory never touched before (BEAM's
 * twin peaks at 8,000: its spawner goes to the back of the run queue at the end of its slice,
 * behind what it spawned). So a spawner preempted while HOLD_BACKLOG or more new actors wait
 * for s is held by s instead, and queued again once fewer than HOLD_RELEASE wait; at once
 * when one of them computes (see computes: then HOLD_QUICK quick first runs must follow
 * before s holds a spawner again), when s has nothing else to run, when an idle sibling takes
 * it (steal_held), and when the watchdog or a spare empties s's runnext
 * (sched_release_runnext). All the spawners s holds go together, so two of them take turns
 * (with one held at a time, a spawner held behind a second one waited for the whole of the
 * second's loop); past SCHED_HELD_MAX more go ahead as before. */
#define HOLD_BACKLOG 256u
#define HOLD_RELEASE 32u
#define HOLD_QUICK 64
#define HOLD_COMPUTE_NS (PROBATION_MIN_NS / 2)

/* Whether a, at the end of its first run (at now), proved to compute: it used up its first
 * slice, preempted in Lua code (interpreted or compiled; not at a C function's return or a
 * runtime safe point), spawned nothing in it (a spawner is what is held) and ran its body for
 * HOLD_COMPUTE_NS of it. Its boot does not count: a boot that touched fresh memory took
 * milliseconds on this project's VM, and a preemption signal pending since lands at the
 * body's first instructions. */
static inline int computes(actor *a, uint64_t now)
{
    return (a->run.leave == LEAVE_YIELD || a->run.leave == LEAVE_YIELD_CO) &&
           a->stats.preempt_hook + a->stats.preempt_jit > 0 && !a->run.spawned && a->vm.body_at &&
           now - a->vm.body_at >= HOLD_COMPUTE_NS;
}

/* Queues the spawners s holds, the oldest last and the others in the order they were held
 * (from any thread). Held again in the order they then run, they take turns at going first:
 * the first after a release claims the slots its new actors' deaths just freed, warm in this
 * core's cache, and the next finds fresh ones past the table's high-water mark (about 3 us a
 * spawn against 0.4). In one order each time, of two loops of spawns one did three times the
 * other's, and the slow one stayed slow. */
static void release_held(sched *s)
{
    if (atomic_load_explicit(&s->nheld, memory_order_relaxed) == 0)
        return;
    uint32_t idx[SCHED_HELD_MAX];
    spin_lock(&s->held_lock);
    uint32_t n = atomic_load_explicit(&s->nheld, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = s->held[i];
    atomic_store_explicit(&s->nheld, 0, memory_order_relaxed);
    spin_unlock(&s->held_lock);
    if (n == 0) /* an idle sibling took the last one meanwhile (steal_held) */
        return;
    for (uint32_t i = 1; i < n; i++)
        enqueue_spawner(s->rt, idx[i]);
    enqueue_spawner(s->rt, idx[0]);
}

/* Whether s holds the spawner idx back (see above): not while its new actors compute, not
 * on a spare, not if fewer than HOLD_BACKLOG wait, not if it holds SCHED_HELD_MAX already. */
static int hold(sched *s, uint32_t idx)
{
    if (s->quick_due || s->id >= s->rt->nsched || new_waiting(s) < HOLD_BACKLOG)
        return 0;
    int held = 0;
    spin_lock(&s->held_lock);
    uint32_t n = atomic_load_explicit(&s->nheld, memory_order_relaxed);
    if (n < SCHED_HELD_MAX) {
        s->held[n] = idx;
        atomic_store_explicit(&s->nheld, n + 1, memory_order_relaxed);
        held = 1;
    }
    spin_unlock(&s->held_lock);
    return held;
}

/* After a run on s (first: it was a new actor's first, is_long: it computed, see computes):
 * whether the spawners it holds may go again. */
static inline void held_after_run(sched *s, int first, int is_long)
{
    if (first) {
        if (is_long)
            s->quick_due = HOLD_QUICK;
        else if (s->quick_due)
            s->quick_due--;
    }
    if (__builtin_expect(atomic_load_explicit(&s->nheld, memory_order_relaxed) != 0, 0) &&
        ((first && is_long) || new_waiting(s) < HOLD_RELEASE))
        release_held(s);
}

/* The oldest spawner s holds, taken to run now (by s, which has nothing else, or by an idle
 * sibling); the others stay held. */
static int take_held(sched *s, uint32_t *idx)
{
    if (atomic_load_explicit(&s->nheld, memory_order_relaxed) == 0)
        return 0;
    int got = 0;
    spin_lock(&s->held_lock);
    uint32_t n = atomic_load_explicit(&s->nheld, memory_order_relaxed);
    if (n > 0) {
        *idx = s->held[0];
        for (uint32_t i = 1; i < n; i++)
            s->held[i - 1] = s->held[i];
        atomic_store_explicit(&s->nheld, n - 1, memory_order_relaxed);
        got = 1;
    }
    spin_unlock(&s->held_lock);
    return got;
}

void sched_release_runnext(sched *s)
{
    release_held(s);
    uint32_t n = atomic_exchange_explicit(&s->runnext, 0, memory_order_acq_rel);
    if (n) {
        atomic_fetch_add_explicit(&s->runnext_released, 1, memory_order_relaxed);
        enqueue(s->rt, runnext_idx(n));
    }
    while (s->homeq && runq_pop(s->homeq, &n))
        enqueue(s->rt, n);
}

/* An idle s takes the spawner a sibling holds: it spawns here while the sibling runs what it
 * spawned there. */
static int steal_held(sched *s, uint32_t *idx)
{
    smarm_runtime *rt = s->rt;
    for (int i = 0; i < rt->nsched; i++) {
        sched *o = &rt->scheds[i];
        if (o != s && take_held(o, idx))
            return 1;
    }
    return 0;
}

/* An actor that left its slice still runnable: behind the others that used up theirs,
 * unless it spawned meanwhile (see sched_spawn, and hold above). */
static void requeue(sched *s, actor *a, uint32_t idx)
{
    if (!a->run.spawned)
        enqueue_yielded(s->rt, idx);
    else if (!hold(s, idx))
        enqueue_spawner(s->rt, idx);
}

/* Fills s's runnext with word n if it is empty (1), else leaves it (0). s is this thread's
 * scheduler: only its owner ever sets the word non-zero (the watchdog, spares and idle
 * siblings only empty it), so a word seen empty stays empty until this plain release store
 * (a ring's every hop puts into an empty runnext: a locked exchange there cost about 1% of
 * the hop). */
static inline int fill_empty_runnext(sched *s, uint32_t n)
{
    if (atomic_load_explicit(&s->runnext, memory_order_relaxed))
        return 0;
    atomic_store_explicit(&s->runnext, n, memory_order_release);
    return 1;
}

/* An actor woken by the actor running on this scheduler runs next here: it is likely to
 * consume what the waker just sent while it is hot in this cache, and no other scheduler has
 * to be woken for it. The one it displaces goes to the shared queue.
 * Puts idx in s's runnext (with RUNNEXT_NEW for a new actor); returns the index it
 * displaced, or -1 if the slot was empty. A word seen full takes the exchange, since a thief
 * may empty it meanwhile. */
static inline int64_t swap_runnext(sched *s, uint32_t idx, uint32_t fresh)
{
    uint32_t want = (idx + 1) | fresh;
    if (fill_empty_runnext(s, want))
        return -1;
    uint32_t prev = atomic_exchange_explicit(&s->runnext, want, memory_order_acq_rel);
    return prev ? (int64_t)runnext_idx(prev) : -1;
}

/* Asks the cache for the lines of a's record and of its state that its next run reads first
 * (a hint: nothing is read but the state's address). next: a runs on this thread as soon as
 * its waker leaves; see make_runnable. */
static inline void warm_actor(smarm_runtime *rt, actor *a, int next)
{
    if (!next) {
#pragma GCC unroll 16
        for (size_t off = 0; off < offsetof(actor, ex); off += 64)
            __builtin_prefetch((const char *)a + off, 1);
    }
    if (rt->hooks.warm)
        rt->hooks.warm(a, next);
}

/* Whether idx ran here just before the actor running now (the one that wakes it): its lines
 * are likely still in this core's cache (the two sides of a ping-pong), where asking for
 * them again would only cost the instructions. */
static inline int ran_lately(const sched *s, uint32_t idx) { return s->ran_last == idx + 1; }

static void make_runnable(smarm_runtime *rt, uint32_t idx)
{
    sched *s = sched_current();
    /* a pool thread (smarm.blocking) has no runnext: nothing would ever take it */
    if (s && s->rt == rt && s->kind == SCHED_LOOP &&
        (atomic_load_explicit(&s->cur, memory_order_relaxed) || s->finalizing)) {
        /* it runs here as soon as its waker leaves: unless it ran here lately, its lines
         * come in meanwhile. Only those that cannot wait: its state's and its wait's call
         * site's. A core keeps about a dozen misses in flight, and the whole set (its
         * record's 13 lines, the state's and the site's dozen, the dispatch table's 13) held
         * the waker up on the prefetches themselves (luavm_warm, 40 ns per hop of a ring of
         * 1,000); the record's lines are read at once when it runs, where their misses
         * overlap, and the dispatch table's behind the branch predictor */
        if (!ran_lately(s, idx))
            warm_actor(rt, &rt->actors[idx], 1);
        int64_t prev = swap_runnext(s, idx, 0);
        if (prev < 0)
            return;
        idx = (uint32_t)prev;
    }
    enqueue(rt, idx);
}

/* Out of line: the wake path stays as short as it was while tracing is off. */
static __attribute__((noinline)) void trace_wake(smarm_runtime *rt, uint64_t pid)
{
    sched *s = sched_current();
    actor *by = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    trace_rec(s, TRACE_WAKE, pid, by ? by->pid : 0, 0, 0);
}

/* A wake's first half, for every waker: 1 if it unparked pid's actor (traced), which the
 * caller then places (make_runnable, place_polled); 0 for a stale pid, an actor not parked,
 * or a host actor, whose slot stays RUNNING and whose thread sleeps on its own parker
 * (core/host.h): woken here. */
static inline int wake_unpark(smarm_runtime *rt, uint64_t pid)
{
    slot *sl = slot_of(&rt->slots, pid);
    if (!sl)
        return 0;
    if (slot_unpark(sl, pid_gen(pid))) {
        if (TRACE_ON(rt))
            trace_wake(rt, pid);
        return 1;
    }
    host *h = atomic_load_explicit(&rt->actors[pid_index(pid)].run.host, memory_order_acquire);
    if (h)
        host_wake(h);
    return 0;
}

void sched_wake(smarm_runtime *rt, uint64_t pid)
{
    if (wake_unpark(rt, pid))
        make_runnable(rt, pid_index(pid));
}

void sched_arm_wake(actor *a, uint64_t deadline)
{
    /* a host thread bounds its own sleep by the deadline (vm/body.c) */
    if (atomic_load_explicit(&a->run.host, memory_order_relaxed))
        return;
    uint64_t armed = atomic_load_explicit(&a->run.wake_armed, memory_order_acquire);
    /* an armed wake no later than this one is in the heap or firing: its wake
     * comes in time, and the wait re-checks and re-arms after it (wait_rearm) */
    if (armed && armed <= deadline)
        return;
    /* published before the entry exists, so a fire that pops it at once finds
     * its deadline here and clears it */
    atomic_store_explicit(&a->run.wake_armed, deadline, memory_order_seq_cst);
    int r = timers_arm(&a->rt->tm, deadline, a->pid);
    if (r < 0) {
        uint64_t d = deadline;
        atomic_compare_exchange_strong(&a->run.wake_armed, &d, 0);
    } else if (r == 1) {
        sched_nudge_timekeeper(a->rt);
    }
}

void sched_rearm_wake(actor *a)
{
    if (a->run.deadline)
        sched_arm_wake(a, a->run.deadline);
}

void sched_nudge_timekeeper(smarm_runtime *rt)
{
    /* a new earliest deadline: whoever sleeps on the old one must re-arm.
     * seq_cst pairs with the fence after a scheduler claims the timekeeper role */
    atomic_thread_fence(memory_order_seq_cst);
    int tk = atomic_load_explicit(&rt->timekeeper, memory_order_relaxed);
    if (tk < 0 || !park_set_wake(&rt->parks, tk))
        park_set_wake_one(&rt->parks);
}

/* A wake timer fired: the actor's armed deadline, if it is this one, is no
 * longer in the heap (cleared before the wake, which the woken wait follows by
 * re-arming); an entry of an earlier tenant of the slot clears nothing that
 * matters (at worst the tenant arms once more). */
static void fire_wake(smarm_runtime *rt, timer_entry *e)
{
    actor *a = &rt->actors[pid_index(e->pid)];
    uint64_t d = e->deadline;
    atomic_compare_exchange_strong(&a->run.wake_armed, &d, 0);
    /* a batch of timers wakes actors that then run one after the other, each cold after its
     * sleep: their records' lines (the mailbox, the run, vm and stats fields) and what the
     * vm layer knows of their state are asked for now, while the ones before them run */
    warm_actor(rt, a, 0);
    sched_wake(rt, e->pid);
}

/* A send_after timer fired: its message goes to the destination as it is now (a name
 * follows whoever holds it at the fire); a dead or unheld destination drops it. */
static void fire_send(smarm_runtime *rt, timer_entry *e)
{
    msg *m = e->msg;
    uint64_t pid = e->pid;
    if (m->extra) {
        pid = registry_whereis(rt, m->data + m->len);
        m->extra = 0;
        if (!pid) {
            msg_free(m);
            return;
        }
    }
    sched_send(rt, pid, m);
}

static __attribute__((noinline)) void fire_timers(smarm_runtime *rt, uint64_t earliest);

/* Checked before every run: the test inline, the firing (with its batch on the stack) out of
 * line, so a run with no timer armed pays no frame for it. */
static inline void fire_due_timers(smarm_runtime *rt)
{
    uint64_t earliest = timers_earliest(&rt->tm);
    if (earliest != UINT64_MAX)
        fire_timers(rt, earliest);
}

static void fire_timers(smarm_runtime *rt, uint64_t earliest)
{
    uint64_t now = park_now_ns();
    if (earliest > now)
        return;
    timer_entry due[64];
    uint32_t n;
    while ((n = timers_due(&rt->tm, now, due, 64)) > 0) {
        for (uint32_t i = 0; i < n; i++) {
            if (due[i].msg)
                fire_send(rt, &due[i]);
            else
                fire_wake(rt, &due[i]);
        }
        if (n < 64)
            break;
    }
}

/* ---- spawn and send ---- */

/* The calling scheduler's cache of free slots (NULL on other threads: a host's, a pool's):
 * a slot an actor's death freed here is claimed by the next spawn here, with its record in
 * this core's cache, and the table's lock is seldom taken (base/slot.h). */
static __attribute__((noinline)) slot_cache *own_slot_cache(smarm_runtime *rt)
{
    /* the thread's own sched, read here: noinline, so no caller keeps the TLS address across
     * a switch (see sched_current) */
    sched *s = tls_sched;
    return s && s->rt == rt && s->kind == SCHED_LOOP ? slot_cache_at(&rt->slots, s->id) : NULL;
}

int64_t sched_reserve_slot(smarm_runtime *rt)
{
    return slot_claim_cached(&rt->slots, own_slot_cache(rt));
}

void sched_unreserve_slot(smarm_runtime *rt, int64_t idx)
{
    slot_release(&rt->slots, (uint32_t)idx);
}

int sched_spawn(smarm_runtime *rt, int boot_kind, char *payload, size_t len, spawn_opts *opts,
                uint64_t parent, uint64_t *pid_out)
{
    int64_t idx = slot_claim_cached(&rt->slots, own_slot_cache(rt));
    if (idx < 0)
        return SMARM_ECAPACITY; /* the payload stays the caller's */
    return sched_spawn_reserved(rt, idx, boot_kind, payload, len, opts, parent, pid_out);
}

int sched_spawn_reserved(smarm_runtime *rt, int64_t idx, int boot_kind, char *payload, size_t len,
                         spawn_opts *opts, uint64_t parent, uint64_t *pid_out)
{
    /* embedding: smarm_stop has swept, the schedulers are ending */
    if (atomic_load_explicit(&rt->stopping, memory_order_acquire)) {
        slot_release(&rt->slots, (uint32_t)idx);
        return SMARM_ESTOPPED;
    }
    slot *sl = slot_at(&rt->slots, (uint32_t)idx);
    uint32_t gen = slot_word_gen(atomic_load_explicit(&sl->word, memory_order_acquire));
    actor *a = &rt->actors[idx];
    a->rt = rt;
    exit_reset(a, pid_make((uint32_t)idx, gen), opts && opts->owned ? parent : 0);
    a->parent = parent;
    actor_run_reset(&a->run, opts ? opts->stack_size : 0, opts ? opts->stack_guard : 0);
    actor_vm_reset(&a->vm, boot_kind, payload, len,
                   opts && opts->max_heap ? opts->max_heap : rt->cfg.max_heap);
    actor_warm_clear(&a->warm);
    memset(&a->stats, 0, sizeof a->stats);
    atomic_fetch_add_explicit(&rt->spawned, 1, memory_order_relaxed);
    if (TRACE_ON(rt))
        trace_rec(sched_current(), TRACE_SPAWN, pid_make((uint32_t)idx, gen), parent, 0, 0);
    mailbox_open(&a->inbox, gen);
    sl->actor = a;
    if (opts && opts->name) {
        /* the name is the contract: it is held before the actor can run, and an
         * actor that cannot have it never runs (nothing links or watches it yet) */
        int rc = registry_register_spawning(rt, opts->name, a);
        if (rc != REG_OK) {
            mailbox_close(&a->inbox);
            exit_retire_unborn(a);
            slot_release(&rt->slots, (uint32_t)idx);
            return rc == REG_TAKEN ? SMARM_ETAKEN : SMARM_ENOMEM;
        }
    }
    /* links and monitors asked for at spawn are in place before it can run or
     * die, so none of them can see "noproc" */
    if (opts && opts->link && exit_link_child(rt, sched_actor(rt, parent), a) != 0)
        opts->link = -1;
    if (opts && opts->monitor)
        opts->monitor_id = exit_monitor(rt, a->pid, opts->monitor);
    *pid_out = a->pid;
    if (opts && opts->host) {
        /* a host thread is the body: the slot runs at once and is never queued; it is not
         * counted in live (the schedulers end without waiting for hosts) */
        atomic_store_explicit(&a->run.host, opts->host, memory_order_release);
        slot_publish(sl, gen);
        slot_begin_run(sl, gen);
        return 0;
    }
    atomic_fetch_add_explicit(&rt->live, 1, memory_order_relaxed);
    /* release (in the CAS): the actor's fields are visible to whoever claims it */
    slot_publish(sl, gen);
    /* a new actor queues with the woken ones, ahead of those that used up their slice: its
     * first slice is short when others wait (run_actor), so a storm of new actors that
     * never block cannot hold up the rest for long. The spawner is marked: it keeps its
     * place ahead of them too (it makes the work; behind the actors it spawned it would
     * wait a round of all of them per slice) */
    sched *cs = sched_current();
    actor *spawner =
        cs && cs->rt == rt ? atomic_load_explicit(&cs->cur, memory_order_relaxed) : NULL;
    if (spawner)
        spawner->run.spawned = 1;
    /* the newest runs next where it was spawned (its runnext), as a woken actor does: what
     * a spawner makes last is what it waits for first (a reply, an init ack); the one it
     * displaces joins the new queue */
    if (spawner && cs->kind == SCHED_LOOP) {
        a->run.last_sched = cs->id; /* where it was spawned (spawns_moved) */
        if ((idx = swap_runnext(cs, (uint32_t)idx, RUNNEXT_NEW)) >= 0)
            push_spawned(cs, (uint32_t)idx);
        return 0;
    }
    enqueue_new(rt, (uint32_t)idx);
    return 0;
}

void sched_drop_payload(actor *a, heap_cache *cache)
{
    if (!a->vm.boot)
        return;
    if (a->vm.boot_kind == BOOT_FUNC)
        heap_free(&a->rt->heap, cache, a->vm.boot, a->vm.boot_len);
    else
        free(a->vm.boot);
    a->vm.boot = NULL;
}

int sched_send(smarm_runtime *rt, uint64_t pid, msg *m)
{
    actor *a = sched_actor(rt, pid);
    if (!a) {
        msg_free(m);
        return -1;
    }
    /* the line of the warm hints, which the wake's warm hook reads (make_runnable): asked for
     * now, its miss overlaps the push's on the inbox instead of following it */
    __builtin_prefetch(&a->warm);
    if (mailbox_push(&a->inbox, pid_gen(pid), m) < 0) {
        msg_free(m);
        return -1;
    }
    sched_wake(rt, pid);
    return 0;
}

void sched_stop(smarm_runtime *rt, uint64_t pid, int how)
{
    actor *a = sched_actor(rt, pid);
    slot *sl = slot_of(&rt->slots, pid);
    if (!a || !sl || !slot_is_live(sl, pid_gen(pid)))
        return;
    int expected = 0;
    /* the first stop decides the reason */
    atomic_compare_exchange_strong_explicit(&a->run.stop, &expected, how, memory_order_acq_rel,
                                            memory_order_acquire);
    sched_wake(rt, pid);
    /* running: make it leave its scheduler now, whatever code it runs */
    for (int i = 0; rt->scheds && i < sched_total(rt); i++) {
        sched *s = &rt->scheds[i];
        if (atomic_load_explicit(&s->cur, memory_order_acquire) == a)
            preempt_signal(s);
    }
}

/* ---- the actor side ---- */

void sched_leave(actor *a, enum actor_leave how)
{
    a->run.leave = how;
    switch_out(a);
}

void sched_abandon_overflowed(actor *a)
{
    a->run.overflowed = 1;
    int expected = 0;
    atomic_compare_exchange_strong_explicit(&a->run.stop, &expected, STOP_KILL,
                                            memory_order_acq_rel, memory_order_acquire);
    /* run_actor sees the stop and ends it on a fresh context on the same stack: the frames
     * below the fault, this handler's on the alternate stack included, are dropped */
    sched_leave(a, LEAVE_YIELD);
    abort(); /* never switched back in */
}

void sched_yield_actor(actor *a)
{
    /* on a pool thread (smarm.blocking) nobody waits for this thread */
    if (a->run.blocking)
        return;
    a->stats.yields++;
    if (atomic_load_explicit(&a->run.host, memory_order_relaxed)) {
        sched_yield(); /* a host thread is no scheduler's */
        return;
    }
    sched_leave(a, LEAVE_YIELD);
}

/* ---- the scheduler side ---- */

const char *const exit_class_names[ENDED_CLASSES] = {
    [ENDED_NORMAL] = "normal",
    [ENDED_ERROR] = "error",
    [ENDED_KILLED] = "killed",
    [ENDED_SHUTDOWN] = "shutdown",
    [ENDED_MEMORY] = "memory",
    [ENDED_NOPROC] = "noproc",
    [ENDED_STACK_OVERFLOW] = "stack_overflow",
    [ENDED_NO_STACK] = "no_stack",
    [ENDED_OTHER] = "other",
};

/* Which of the runtime's reasons an actor ended with (its reason's wire bytes). */
static enum exit_class exit_class_of(const actor *a)
{
    const char *const *names = exit_class_names;
    if (!a->ex.reason_abnormal)
        return ENDED_NORMAL;
    if (a->ex.err_msg)
        return ENDED_ERROR;
    const char *r = a->ex.reason;
    if (r && a->ex.reason_len > 1 && (unsigned char)r[0] == WIRE_SSTR + a->ex.reason_len - 1)
        for (int c = ENDED_KILLED; c < ENDED_OTHER; c++)
            if (strlen(names[c]) == a->ex.reason_len - 1 &&
                memcmp(r + 1, names[c], a->ex.reason_len - 1) == 0)
                return c;
    return ENDED_OTHER;
}

void (*sched_finalize_test_hook)(smarm_runtime *rt, actor *a);

static void finalize(smarm_runtime *rt, actor *a)
{
    enum exit_class why = exit_class_of(a);
    atomic_fetch_add_explicit(&rt->exits[why], 1, memory_order_relaxed);
    if (TRACE_ON(rt)) {
        trace_rec(sched_current(), TRACE_EXIT, a->pid, 0, 0, why);
        /* copied under the registry's lock: another actor may unregister it meanwhile (a
         * slice title keeps its first 255 bytes) */
        char name[256];
        registry_name_of(rt, a, name, sizeof name);
        if (name[0])
            trace_keep_name(rt, a->pid, name);
    }
    uint32_t idx = pid_index(a->pid), gen = pid_gen(a->pid);
    slot *sl = slot_at(&rt->slots, idx);
    /* the order matters to whoever a notice wakes: by the time a monitor or a
     * link hears of the death, sends to the pid fail, its name and groups are
     * free and the slot reads DONE; the slot is reused only after all of it.
     * The name and groups go after DONE, past a full fence: a registration or a
     * join of this pid that began before then either is seen here or sees DONE
     * and undoes itself (core/registry.c), and an actor with neither takes no lock */
    mailbox_close(&a->inbox);
    if (__builtin_expect(sched_finalize_test_hook != NULL, 0))
        sched_finalize_test_hook(rt, a);
    slot_set_done(sl, gen);
    atomic_thread_fence(memory_order_seq_cst);
    registry_finalize(rt, a);
    pg_finalize(rt, a);
    stab_finalize(rt, a);
    exit_finalize(rt, a);
    /* the cache of whichever thread this is may not be the actor's last: the depot's */
    sched_drop_payload(a, NULL);
#if defined(SMARM_TSAN)
    if (a->run.fiber) {
        __tsan_destroy_fiber(a->run.fiber);
        a->run.fiber = NULL;
    }
#endif
    int was_root = a->pid == rt->root_pid;
    int was_host = atomic_load_explicit(&a->run.host, memory_order_relaxed) != NULL;
    /* a waker that read the pointer before this still finds the host (freed with the runtime) */
    atomic_store_explicit(&a->run.host, NULL, memory_order_release);
    slot_release_cached(&rt->slots, own_slot_cache(rt), idx);
    if (was_host)
        return;
    if (was_root)
        atomic_store_explicit(&rt->root_done, 1, memory_order_release);
    /* release: everything this actor did (its enqueues) happens before a
     * scheduler that reads live == 0 and stops */
    if (atomic_fetch_sub_explicit(&rt->live, 1, memory_order_acq_rel) == 1)
        park_set_wake_all(&rt->parks);
    else if (was_root)
        park_set_wake_all(&rt->parks); /* idle schedulers must look at the sweep */
}

/* An actor preempted inside a LuaJIT hook waits here for this thread. */
static void pin(sched *s, actor *a)
{
    a->run.pin_next = NULL;
    if (s->pinned_tail)
        s->pinned_tail->run.pin_next = a;
    else
        s->pinned = a;
    s->pinned_tail = a;
    atomic_fetch_add_explicit(&s->npinned, 1, memory_order_relaxed);
}

static int unpin(sched *s, uint32_t *idx)
{
    actor *a = s->pinned;
    if (!a)
        return 0;
    s->pinned = a->run.pin_next;
    if (!s->pinned)
        s->pinned_tail = NULL;
    atomic_fetch_sub_explicit(&s->npinned, 1, memory_order_relaxed);
    a->run.pinned = 0;
    *idx = pid_index(a->pid);
    return 1;
}

/* Adds `by` to s's share votes, within 0..SHARE_VOTES; wakes a sibling if they came back
 * from none while new actors wait. The owner, its thieves and the watchdog all vote. */
static void vote_share(sched *s, int by)
{
    int v = atomic_load_explicit(&s->share_votes, memory_order_relaxed), w;
    do {
        w = v + by < 0 ? 0 : v + by > SHARE_VOTES ? SHARE_VOTES : v + by;
        if (w == v)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&s->share_votes, &v, w, memory_order_relaxed,
                                                    memory_order_relaxed));
    if (v == 0 && new_waiting(s) > 0)
        wake_for_work(s->rt);
}

/* The first run of a new actor a, spawned on scheduler `from` (-1: not by a scheduler's
 * actor), ended on s after it began at `began`: whether the new actors of `from` are worth an
 * idle sibling's steal. On this project's 2-core VM, a short actor moved to the other core
 * cost more than it runs: spawn.lua (each child sends one number to the root and ends) took
 * 1.3-1.6 us per child at -S 1 and 1.7-3.0 at -S 2, where the sibling, woken at every spawn,
 * ran half of them, and fetched across cores the lines their spawner had just written (the
 * slot, the actor record, the arguments) and its mailbox, slot cache and malloc arena. A
 * tree is the opposite: skynet at -S 2 gains from a sibling that takes a subtree's root, whose
 * children then run on the thief's core. So a scheduler keeps its new actors to itself
 * (runs them newest first, wakes no sibling for them) while the ones moved proved not worth
 * it: a thief that ran a stolen actor whose first run was short and spawned nothing takes a
 * vote away from its spawner's scheduler; one that ran long (a computation: preempted at the
 * end of its short first slice) gives one back, and so does a long first run on the
 * spawner's own scheduler; one that spawned gives them all back (a subtree moved: the thief
 * may take eight more leaves at a tree's end before it stops). (A long first run there gave all the
 * votes at first, but some hundreds of spawn.lua's 100,000 children ran 20 us or more on a loaded
 * machine, each letting the sibling take eight.) The watchdog lends a scheduler whose votes fell to
 * none one back every few ticks (the workload may have changed), and shares a spawn stack whose
 * owner has not come back to it for a tick (sched_share_backlog). With this, spawn.lua moves
 * 0.3-3% of its children at -S 2 (300-3,000 of 100,000, the most on a loaded machine), and
 * skynet a dozen subtrees. */
static void note_first_run(sched *s, actor *a, int from, int is_long)
{
    if (from < 0 || from == s->id) {
        if (is_long)
            vote_share(s, 1);
    } else if (from < sched_total(s->rt)) {
        vote_share(&s->rt->scheds[from], a->run.spawned ? SHARE_VOTES : is_long ? 1 : -1);
    }
}

/* Hot parks. A wait that could yield its coroutine (a coroutine park, which gives the stack
 * back) parks in place instead, holding its stack, when the actor's last run began at most
 * HOT_SWITCHES switches after the one before it on the same scheduler: the two sides of a
 * ping-pong, a call and its server. Its wake then switches back into the wait, where a
 * coroutine park's took a stack, made a context and ran the continuation in a protected call
 * before resuming the coroutine (some 200 instructions a message). Each scheduler counts the
 * hot parks it granted that have not ended (hot_parked less hot_returned: one that ends on
 * another scheduler is counted in the granter's atomic hot_returned), and grants one only
 * below HOT_PARKED_MAX, so no more than that many per scheduler hold a stack this way,
 * however long they then wait. A ring of more members than that, any actor woken after a longer
 * while or on another scheduler, and an actor spawned with a stack of its own shape (whose
 * stack is no pool's, and may be large) park as before. The shape is read last: the other
 * tests fail first for a member of a large ring, whose record's later lines stay cold. */
#define HOT_SWITCHES 4
#define HOT_PARKED_MAX 4

/* 1 if s may grant one more hot park. */
static inline int hot_parks_left(sched *s)
{
    return s->hot_parked - (int)atomic_load_explicit(&s->hot_returned, memory_order_relaxed) <
           HOT_PARKED_MAX;
}

/* a, parked hot, is resumed or stopped on s: it holds no grant any more (its frames continue,
 * or are dropped). The grant was its last scheduler's, where it parked. */
static void hot_park_ended(sched *s, actor *a)
{
    sched *granted = &s->rt->scheds[a->run.last_sched];
    a->run.hot = 0;
    if (granted == s)
        s->hot_parked--;
    else
        atomic_fetch_add_explicit(&granted->hot_returned, 1, memory_order_relaxed);
}

static void run_actor(sched *s, uint32_t idx)
{
    smarm_runtime *rt = s->rt;
    slot *sl = slot_at(&rt->slots, idx);
    uint32_t gen = slot_word_gen(atomic_load_explicit(&sl->word, memory_order_acquire));
    if (!slot_begin_run(sl, gen)) {
        fprintf(stderr, "smarm: internal error: queued slot %u not claimable\n", idx);
        abort();
    }
    actor *a = &rt->actors[idx];
    for (;;) {
        int hot = a->run.hot;
        if (hot)
            hot_park_ended(s, a);
        int stop = atomic_load_explicit(&a->run.stop, memory_order_acquire);
        /* an actor parked hot could have yielded its coroutine: switched back into its wait,
         * it does so now (vm/body.c) and leaves as a coroutine park, whose stop below keeps
         * its state whole for the pool, where dropping its frames would leave the state
         * inside a C call, to be closed */
        if (stop && !a->run.stopping && !hot) {
            /* its own stack, if it holds one, is free to reuse: its frames are dropped */
            if (!a->run.stk) {
                a->run.stk = stop == STOP_NO_STACK ? NULL : take_stack(s, a);
                if (!a->run.stk)
                    a->run.stk = stack_get_reserve(rt->stacks);
                if (!a->run.stk) {
                    /* every reserve stack is ending another actor. Not expected: a stop
                     * entry runs to its end within one run_actor (it is not preempted and
                     * cannot wait), and there is a reserve stack per scheduler */
                    slot_requeue(sl, gen);
                    enqueue_yielded(rt, idx);
                    return;
                }
            }
            a->run.stopping = 1;
            SANITIZE_UNPOISON(a->run.stk->base, a->run.stk->size);
            a->run.sp = ctx_make(stack_top(a->run.stk), actor_stop_start, a);
        }
        if (!a->run.stk) {
            a->run.stk = take_stack(s, a);
            if (!a->run.stk) {
                no_stack(s, a, errno);
                continue; /* the stop above ends it */
            }
            /* frames left on it by whoever used it last never returned */
            SANITIZE_UNPOISON(a->run.stk->base, a->run.stk->size);
            a->run.sp = ctx_make(stack_top(a->run.stk), actor_start, a);
        }
        if (a->run.polled) {
            a->run.polled = 0;
            s->polled_runs++;
            s->polled_moved += a->run.last_sched != s->id;
        }
        int from = a->run.last_sched;
        int first = a->stats.slices++ == 0;
        if (from != s->id) {
            a->stats.migrations += !first;
            s->spawns_moved += first && from >= 0;
            a->run.last_sched = s->id;
        }
        /* a first slice ends early if others wait (the watchdog checks it, preempt.c), and so
         * does the slice of one taken from the yielded queue ahead of woken ones */
        int short_slice = s->short_slice;
        s->short_slice = 0;
        uint64_t began = 0;
        if (first || short_slice) {
            began = park_now_ns();
            atomic_store_explicit(&s->probation_until, began + rt->probation_ns,
                                  memory_order_relaxed);
        } else if (atomic_load_explicit(&s->probation_until, memory_order_relaxed))
            atomic_store_explicit(&s->probation_until, 0, memory_order_relaxed);
        a->run.spawned = 0;
        /* the actor allocates only while it runs, and only on this thread */
        a->run.heap_cache = &s->heap_cache;
        /* relaxed: the watchdog only needs to see the counter move */
        uint64_t sw = atomic_load_explicit(&s->switches, memory_order_relaxed) + 1;
        atomic_store_explicit(&s->switches, sw, memory_order_relaxed);
        a->run.hot_ok = from == s->id && (uint16_t)(sw - a->run.park_sw) <= HOT_SWITCHES &&
                        hot_parks_left(s) && !a->run.stack_size && !a->run.stack_guard;
        a->run.park_sw = (uint16_t)sw;
        atomic_store_explicit(&s->cur, a, memory_order_relaxed);
        if (TRACE_ON(rt))
            trace_rec(s, TRACE_BEGIN, a->pid, 0, 0, 0);
        switch_in(s, a);
        if (TRACE_ON(rt))
            trace_rec(s, TRACE_END, a->pid, 0, 0, a->run.leave);
        if (first) {
            uint64_t now = park_now_ns();
            if (rt->nsched > 1) /* no sibling to share with at -S 1 */
                note_first_run(s, a, from, now - began >= SHARE_NS);
            held_after_run(s, 1, from >= 0 && computes(a, now));
        } else if (__builtin_expect(atomic_load_explicit(&s->nheld, memory_order_relaxed), 0)) {
            held_after_run(s, 0, 0);
        }
        atomic_store_explicit(&s->cur, NULL, memory_order_relaxed);
        s->ran_last = idx + 1;
        stackwatch_sample(a, a->run.sp);
        a->run.preempt_pending = 0;
        if (a->run.leave == LEAVE_PARK_HOT) {
            a->run.hot = 1;
            s->hot_parked++;
            s->hot_parks++;
        }
        if (a->run.leave != LEAVE_DONE &&
            atomic_load_explicit(&a->run.stop, memory_order_acquire)) {
            /* stopped while it ran: end it now rather than queue it again */
            if (a->run.leave == LEAVE_PARK_CO || a->run.leave == LEAVE_YIELD_CO) {
                give_stack(s, a->run.stk);
                a->run.stk = NULL;
            }
            continue;
        }
        switch (a->run.leave) {
        case LEAVE_YIELD:
            slot_requeue(sl, gen);
            if (a->run.pinned)
                pin(s, a);
            else
                requeue(s, a, idx);
            return;
        case LEAVE_YIELD_CO:
            give_stack(s, a->run.stk);
            a->run.stk = NULL;
            slot_requeue(sl, gen);
            requeue(s, a, idx);
            return;
        case LEAVE_PARK_CO:
            stackwatch_parked(a, 0);
            give_stack(s, a->run.stk);
            a->run.stk = NULL;
            /* fall through */
        case LEAVE_PARK_HOT:
        case LEAVE_PARK_STACK:
            if (a->run.stk)
                stackwatch_parked(a, (size_t)((char *)stack_top(a->run.stk) - (char *)a->run.sp));
            /* the park is settled only now that the actor is off its stack,
             * so a waker can never run it on two threads at once */
            if (slot_park(sl, gen))
                return;
            continue; /* woken meanwhile: look again at once */
        case LEAVE_DONE:
            give_stack(s, a->run.stk);
            a->run.stk = NULL;
            /* whom its death wakes runs next here, where this scheduler is about to look
             * for work anyway: through the shared queue an idle sibling took it, and a
             * spawn_link-and-wait loop moved cores at every cycle */
            s->finalizing = 1;
            finalize(s->rt, a);
            s->finalizing = 0;
            return;
        case LEAVE_BLOCKING:
            /* off to a pool thread, holding its stack; the slot stays RUNNING, so wakes
             * only mark it NOTIFIED, and the pool thread queues it again when it is done */
            blocking_submit(rt, a);
            return;
        }
    }
}

void sched_sweep(smarm_runtime *rt, int how)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&rt->sweeping, &expected, 1))
        return;
    uint32_t hwm = rt->slots.hwm;
    for (uint32_t i = 0; i < hwm; i++) {
        slot *sl = slot_at(&rt->slots, i);
        uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
        enum slot_state st = slot_word_state(w);
        if (st == SLOT_VACANT || st == SLOT_DONE)
            continue;
        sched_stop(rt, pid_make(i, slot_word_gen(w)), how);
    }
    atomic_store(&rt->sweeping, 0);
}

/* The next actor of s's home queue. While the siblings share it (sched_share_backlog),
 * surplus wakes one as the chain rule does, and its spin takes from here (steal_home). Until
 * then s serves its home queue alone: see place_polled. */
static inline int pop_home(sched *s, uint32_t *idx)
{
    if (!runq_pop(s->homeq, idx))
        return 0;
    if (atomic_load_explicit(&s->home_shared, memory_order_relaxed) &&
        runq_size_approx(s->homeq) > 0)
        wake_for_work(s->rt);
    return 1;
}

/* The owner's take of its runnext: the actor in it into *idx (1), or none (0). An exchange,
 * since a thief or the watchdog may empty the word meanwhile. */
static inline int take_own_runnext(sched *s, uint32_t *idx)
{
    uint32_t n = atomic_exchange_explicit(&s->runnext, 0, memory_order_acq_rel);
    if (!n)
        return 0;
    s->runnext_runs++;
    *idx = runnext_idx(n);
    return 1;
}

/* next_runnable past its own runnext: the home queue and the shared queues in turns. Out of
 * line: the queues' cases made every pick save six registers, a fifth of a ping-pong's pick
 * from its runnext. */
static __attribute__((noinline)) int next_runnable_queued(sched *s, uint32_t *idx)
{
    smarm_runtime *rt = s->rt;
    s->streak = 0;
    /* pinned actors take turns with the shared queue */
    if (s->pinned && (s->fair++ & 1) && unpin(s, idx))
        return 1;
    /* one pick in YIELDED_SHARE goes to the yielded queue first; while woken or new actors
     * wait, that actor's slice is short (run_actor), so the share is in picks, not time */
    int yielded_first = (++s->picks % YIELDED_SHARE) == 0;
    int yielded = yielded_first && runq_pop(rt->rq_yield, idx);
    if (yielded)
        s->short_slice = fresh_queued(s);
    /* the home queue holds woken actors: it takes turns with the woken queue (neither starves
     * the other), ahead of the spawning, new and yielded ones */
    int home_first = !yielded && s->homeq && (++s->home_turn & 1);
    if (home_first && pop_home(s, idx))
        return 1;
    int got = yielded || runq_pop(rt->rq, idx);
    if (!got && !home_first && s->homeq && pop_home(s, idx))
        return 1;
    if (got || pop_shared(s, idx)) {
        /* chain rule: surplus work wakes a sibling so it runs in parallel; new actors only
         * while they are worth moving (shares_new) */
        if (queued_ran(rt) > 0 || (shares_new(s) && new_waiting(s) > 0))
            wake_for_work(rt);
        return 1;
    }
    return take_own_runnext(s, idx) || unpin(s, idx) || take_held(s, idx) ||
           steal_spawned(s, idx) || steal_held(s, idx);
}

/* Own runnext first (but not forever: a pair of actors waking each other
 * would starve the shared queue), then the queues (next_runnable_queued). */
static inline int next_runnable(sched *s, uint32_t *idx)
{
    if (s->streak < RUNNEXT_STREAK && take_own_runnext(s, idx)) {
        s->streak++;
        return 1;
    }
    return next_runnable_queued(s, idx);
}

/* Takes one actor from o's home queue if o shares it (it has not run out of work for a
 * watchdog tick: sched_share_backlog) or is busy: it has run the same actor since its switch
 * counter read `seen` (a whole spin), so it cannot take the actor itself soon. The actor's
 * home is then s (run_actor records it): a core that idles while another has a backlog takes
 * connections over one by one. */
static int steal_home(sched *s, sched *o, uint64_t seen, uint32_t *idx)
{
    if (o == s || !o->homeq || runq_size_approx(o->homeq) == 0)
        return 0;
    if (!atomic_load_explicit(&o->home_shared, memory_order_relaxed) &&
        (!atomic_load_explicit(&o->cur, memory_order_relaxed) ||
         atomic_load_explicit(&o->switches, memory_order_relaxed) != seen))
        return 0;
    return runq_pop(o->homeq, idx);
}

/* Before sleeping, an idle scheduler polls for a little while: work that shows
 * up meanwhile costs no futex wake on either side. At the end it takes what
 * sits in another scheduler's runnext (its owner is busy with something else). */
static int spin_for_work(sched *s, uint32_t *idx)
{
    smarm_runtime *rt = s->rt;
    atomic_fetch_add_explicit(&rt->spinning, 1, memory_order_relaxed);
    uint64_t until = park_now_ns() + (SPIN_NS >> s->spin_shift);
    /* the siblings' switch counters: a home queue is taken from only if its scheduler ran
     * one actor for this whole spin */
    uint64_t seen[PARK_MAX];
    for (int i = 0; i < rt->nsched; i++)
        seen[i] = atomic_load_explicit(&rt->scheds[i].switches, memory_order_relaxed);
    int found = 0;
    for (int i = 0; !found; i++) {
        if (pop_shared(s, idx) || (s->homeq && runq_pop(s->homeq, idx)) || steal_spawned(s, idx)) {
            found = 1;
            break;
        }
        if ((i & 63) == 63 && park_now_ns() >= until)
            break;
        cpu_relax();
    }
    /* a spin shorter than RUNNEXT_STEAL_SPIN_NS takes no runnext */
    if (!found && (SPIN_NS >> s->spin_shift) >= RUNNEXT_STEAL_SPIN_NS) {
        for (int i = 0; i < sched_total(rt) && !found; i++) {
            sched *o = &rt->scheds[i];
            /* only from a scheduler held up in one actor for this whole spin: one that
             * switches is about to run it (spawn.lua's root, woken into its runnext by each
             * child, moved cores every few hundred children at -S 2 when taken from one that
             * was only finishing the child) */
            uint32_t n = atomic_load_explicit(&o->runnext, memory_order_relaxed);
            if (o == s || !n ||
                (i < rt->nsched &&
                 atomic_load_explicit(&o->switches, memory_order_relaxed) != seen[i]))
                continue;
            /* a new one only under the share rule (its spawner is busy spawning: spawn.lua's
             * root between batches, whose newest child a spin took every 20 us) */
            if ((n & RUNNEXT_NEW) && !shares_new(o))
                continue;
            n = atomic_exchange_explicit(&o->runnext, 0, memory_order_acq_rel);
            if (n) {
                *idx = runnext_idx(n);
                s->runnext_stolen++;
                found = 1;
            }
        }
    }
    if (!found) {
        for (int i = 0; i < rt->nsched && !found; i++)
            found = steal_home(s, &rt->scheds[i], seen[i], idx);
    }
    /* A spin that finds nothing took its time from whatever else the machine runs (the
     * client of a network server on the same cores, say): the next one is shorter. Work
     * that comes while the spin is short wakes this scheduler soon after it sleeps, and
     * that restores it (sched_loop). Ready fds do not show in the queues a spin watches,
     * so a server's schedulers mostly spin in vain. */
    if (!found && s->spin_shift < SPIN_SHIFT_MAX)
        s->spin_shift++;
    atomic_fetch_sub_explicit(&rt->spinning, 1, memory_order_relaxed);
    /* pairs with wake_for_work's fence: the caller looks at the queue once
     * more after this before it sleeps */
    atomic_thread_fence(memory_order_seq_cst);
    return found;
}

sched *sched_alloc(int n) { return zalloc_aligned(alignof(sched), (size_t)n * sizeof(sched)); }

void sched_thread_begin(sched *s)
{
    tls_sched = s;
    /* named for top -H, gdb and /proc: which threads sit in calls, which stand in */
    char name[16];
    if (s->kind == SCHED_POOL)
        snprintf(name, sizeof name, "smarm-blk%u", (uint16_t)(-1 - s->id));
    else if (s->id >= s->rt->nsched)
        snprintf(name, sizeof name, "smarm-spare%u", (uint8_t)(s->id - s->rt->nsched));
    else
        snprintf(name, sizeof name, "smarm-sched%u", (uint8_t)s->id);
    pthread_setname_np(pthread_self(), name);
    s->altstack = signal_diag_thread_init();
#if defined(SMARM_TSAN)
    s->fiber = __tsan_get_current_fiber();
#endif
#if defined(SMARM_ASAN)
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &s->stack_lo, &s->stack_size);
        pthread_attr_destroy(&attr);
    }
#endif
}

void sched_thread_end(sched *s)
{
    if (s->spare) {
        stack_put(s->rt->stacks, s->spare);
        s->spare = NULL;
    }
    signal_diag_thread_fini(s->altstack);
    heap_cache_flush(&s->rt->heap, &s->heap_cache);
    tls_sched = NULL;
}

enum actor_leave sched_run_held(sched *s, actor *a)
{
    a->run.heap_cache = &s->heap_cache;
    atomic_store_explicit(&s->cur, a, memory_order_relaxed);
    switch_in(s, a);
    atomic_store_explicit(&s->cur, NULL, memory_order_relaxed);
    return a->run.leave;
}

void sched_requeue_held(smarm_runtime *rt, actor *a)
{
    slot_requeue(slot_at(&rt->slots, pid_index(a->pid)), pid_gen(a->pid));
    enqueue(rt, pid_index(a->pid));
}

/* ---- spares: Go's hand-off of a processor whose thread sits in a system call ---- */

/* spares at least, whatever the schedulers (within PARK_MAX) */
#define SPARES_MIN 4
/* while a spare stands in, it looks this often whether the stuck scheduler moved on */
#define SPARE_RECHECK_NS 1000000

/* Whether the spare s may stop standing in: the scheduler it covers has switched since it was
 * found stuck, or left its actor (so it is back in its loop), and no actor is pinned to s's
 * thread (those resume on it only). */
static int spare_done(sched *s)
{
    if (s->pinned)
        return 0;
    sched *c = &s->rt->scheds[s->cover];
    return !atomic_load_explicit(&c->cur, memory_order_relaxed) ||
           atomic_load_explicit(&c->switches, memory_order_relaxed) != s->cover_switches;
}

/* The spare stops standing in: what it holds goes back to the shared queues, and work or a
 * timer it may have been woken for wakes someone else (a wake that picked it is not lost). */
static void spare_retire(sched *s)
{
    smarm_runtime *rt = s->rt;
    atomic_store(&rt->scheds[s->cover].covered, 0);
    fire_due_timers(rt);
    sched_release_runnext(s);
    move_spawned(s, NULL);
    if (queued(rt) > 0)
        wake_for_work(rt);
    if (timers_earliest(&rt->tm) != UINT64_MAX)
        sched_nudge_timekeeper(rt);
    /* while it slept in the poller's set, schedulers that went idle parked on their futexes;
     * one of them must take up watching the network, or a ready fd wakes no one */
    if (netpoll_ready(&rt->np))
        park_set_wake_one(&rt->parks);
    atomic_store_explicit(&s->spare_state, SPARE_IDLE, memory_order_release);
}

/* ---- the network poller (base/netpoll.c): Go's netpoller ---- */

/* a busy scheduler polls the network every this many picks while none sleeps in the set */
#define POLL_PICKS 16
#define POLL_BATCH 64

/* Where an actor a ready fd woke runs. A scheduler that polls because it has nothing else to
 * run (idle: before its spin, or woken in the set) runs the first itself (its runnext) and
 * keeps the rest in its home queue, waking no sibling: what one poll finds is mostly a few
 * short runs (a request each), and a wake costs the two threads more than such a run, and
 * takes its time from the core the client may need (an HTTP server at -S 2 under wrk on
 * the same two cores spent about 1.5 us more CPU per request on the sibling's wakes and spins
 * than with them kept). A backlog that outlasts a watchdog tick is shared
 * (sched_share_backlog); until then, or for a spare (no home queue), the rest go to the
 * shared queue, whose push wakes a sibling. A poll made while every
 * scheduler is busy (a busy scheduler's every POLL_PICKS picks, the watchdog's tick) puts each
 * actor in the home queue of the scheduler it last ran on, if that one is awake: its cache
 * holds the actor's state, C stack and socket, and it takes the actor at its next pick, with
 * no thread woken. A home that sleeps, or that a spare stands in for, is not used. The home
 * is read after the unpark, which orders it after the actor's last run. */
static void place_polled(smarm_runtime *rt, sched *s, uint32_t idx, int busy)
{
    actor *a = &rt->actors[idx];
    a->run.polled = 1;
    int home = a->run.last_sched;
    if (busy && home >= 0 && home < rt->nsched) {
        sched *h = &rt->scheds[home];
        /* a home with a longer backlog than the poller's gives this one up to the poller */
        if (s && s->homeq && h != s && runq_size_approx(h->homeq) > runq_size_approx(s->homeq))
            h = s;
        if (h == s ||
            (!(atomic_load_explicit(&rt->parks.idle, memory_order_relaxed) & (1ull << home)) &&
             !atomic_load_explicit(&h->covered, memory_order_relaxed))) {
            runq_push(h->homeq, idx);
            /* it went idle since: its re-check of its queues and this look at its bit are
             * Dekker's pair (park_set_wake fences), so one of them sees the other */
            if (h != s)
                park_set_wake(&rt->parks, h->id);
            return;
        }
    }
    if (s && s->kind == SCHED_LOOP && fill_empty_runnext(s, idx + 1))
        return;
    if (s && s->homeq && !atomic_load_explicit(&s->home_shared, memory_order_relaxed))
        runq_push(s->homeq, idx);
    else
        enqueue(rt, idx);
}

/* s ran out of work: whatever it kept in its home queue is done, and what it polls next it
 * keeps again (place_polled) */
static void note_drained(sched *s)
{
    count_own(&s->drains); /* only s writes it */
    if (atomic_load_explicit(&s->home_shared, memory_order_relaxed))
        atomic_store_explicit(&s->home_shared, 0, memory_order_relaxed);
}

/* Whether the machine has a CPU for each scheduler thread that would work once a backlog is
 * shared: those proper that are awake and the idle one the share wakes (if any). The room
 * other programs left this process at the watchdog's last sample (base/cpuroom.c) must be at
 * least that many CPUs less a half. Without it (a load generator on the same cores,
 * a build), a woken sibling only time-slices with them: an HTTP server at -S 2 under
 * `wrk -t1 -c32` on the same two cores shared its backlog at nearly every tick, its two
 * threads each ran half the requests, and it answered fewer requests than with the backlog
 * kept (see docs/DESIGN.md). Unknown room (no /proc/stat) shares as before. */
static int room_for_sibling(smarm_runtime *rt)
{
    int64_t room = atomic_load_explicit(&rt->cpu_room, memory_order_relaxed);
    if (room < 0)
        return 1;
    uint64_t idle =
        atomic_load_explicit(&rt->parks.idle, memory_order_relaxed) & sched_proper_mask(rt);
    int threads = rt->nsched - __builtin_popcountll(idle) + (idle != 0);
    return (int64_t)threads * 1000 <= room + 500;
}

int sched_share_backlog(smarm_runtime *rt)
{
    /* every SHARE_PROBE_TICKS of the watchdog's ticks (it counts them before it calls) */
    int probe = atomic_load_explicit(&rt->wd_ticks, memory_order_relaxed) % SHARE_PROBE_TICKS == 0;
    int room = -1, pending = 0;
    for (int i = 0; i < rt->nsched; i++) {
        sched *s = &rt->scheds[i];
        uint64_t d = atomic_load_explicit(&s->drains, memory_order_relaxed);
        int backlog = s->homeq && runq_size_approx(s->homeq) > 0 &&
                      !atomic_load_explicit(&s->home_shared, memory_order_relaxed);
        if (backlog && room < 0)
            room = room_for_sibling(rt);
        /* a backlog the next tick may share, or new actors it may hand over (whose first
         * slices are short while others wait) */
        pending |= (backlog && room) || sched_own_new(s) > 0;
        /* busy since the last tick without running out of work, and work still waits here:
         * a sibling's spin takes from this home queue from now on (steal_home) */
        if (d == s->drains_seen && backlog) {
            if (room) {
                atomic_store_explicit(&s->home_shared, 1, memory_order_relaxed);
                count_own(&rt->backlogs_shared); /* only the watchdog writes them */
                wake_for_work(rt);
            } else {
                count_own(&rt->backlogs_kept);
            }
        }
        s->drains_seen = d;
        /* new actors its owner has neither pushed to nor popped from since the last tick: it
         * is held up in one actor (a computation after its spawns), so a sibling takes them */
        uint64_t t = atomic_load_explicit(&s->new_touches, memory_order_relaxed);
        if (t == s->touches_seen && sched_own_new(s) > 0 && !shares_new(s)) {
            atomic_store_explicit(&s->share_stale, 1, memory_order_relaxed);
            wake_for_work(rt);
        }
        s->touches_seen = t;
        if (probe && sched_own_new(s) > 0)
            vote_share(s, 1);
    }
    /* (and actors whose first slice, or slice ahead of woken ones, is short: run_actor) */
    return pending || runq_size_approx(rt->rq_new) > 0 || runq_size_approx(rt->rq_yield) > 0;
}

void sched_wake_polled(smarm_runtime *rt, sched *s, const uint64_t *pids, int n, int busy)
{
    for (int k = 0; k < n; k++)
        if (wake_unpark(rt, pids[k]))
            place_polled(rt, s, pid_index(pids[k]), busy);
}

/* Polls the set without waiting; whether it made an actor runnable. */
static int poll_network(sched *s, int busy)
{
    uint64_t pids[POLL_BATCH];
    s->since_poll = 0;
    if (!netpoll_ready(&s->rt->np))
        return 0;
    count_own(&s->net_polls); /* only s writes it */
    int n = netpoll_wait(&s->rt->np, 0, pids, POLL_BATCH);
    sched_wake_polled(s->rt, s, pids, n, busy);
    return n > 0;
}

/* Sleeps until woken or deadline (0 = none): in the poller's set if no other scheduler
 * sleeps there, so a ready fd wakes this thread directly. */
static void park_or_poll(sched *s, uint64_t deadline)
{
    uint64_t pids[POLL_BATCH];
    uint64_t slept = s->spin_shift ? park_now_ns() : 0;
    int n = park_set_wait_poll(&s->rt->parks, s->id, deadline, pids, POLL_BATCH);
    s->since_poll = 0;
    sched_wake_polled(s->rt, s, pids, n, 0);
    /* woken for work (not by an fd, not by the deadline) sooner than a full spin would
     * have lasted: the full spin would have found it without the sleep and the wake */
    if (slept && n == 0) {
        uint64_t now = park_now_ns();
        if (now - slept < SPIN_NS && (!deadline || now < deadline))
            s->spin_shift = 0;
    }
}

/* The scheduler loop. Returns 1 when the run is over, 0 when a spare may retire. */
static int sched_loop(sched *s)
{
    smarm_runtime *rt = s->rt;
    int spare = s->id >= rt->nsched;
    uint32_t idx;
    for (;;) {
        if (spare && spare_done(s))
            return 0;
        fire_due_timers(rt);
        /* fds must not starve while no scheduler idles (one that sleeps in the set sees them) */
        if (++s->since_poll >= POLL_PICKS &&
            atomic_load_explicit(&rt->np.poller, memory_order_relaxed) < 0)
            poll_network(s, 1);
        if (next_runnable(s, &idx)) {
            run_actor(s, idx);
            continue;
        }
        /* every actor has ended; or one stays inside a C call after the root-exit
         * sweep (preempt.c) and the run ends without it */
        if (atomic_load_explicit(&rt->live, memory_order_acquire) == 0 ||
            atomic_load_explicit(&rt->stuck, memory_order_acquire))
            return 1;
        note_drained(s);
        if (poll_network(s, 0))
            continue;
        if (spin_for_work(s, &idx)) {
            run_actor(s, idx);
            continue;
        }
        park_set_idle_begin(&rt->parks, s->id);
        if (next_runnable(s, &idx)) {
            park_set_idle_cancel(&rt->parks, s->id);
            preempt_busy(rt);
            run_actor(s, idx);
            continue;
        }
        if (atomic_load_explicit(&rt->live, memory_order_acquire) == 0) {
            park_set_idle_cancel(&rt->parks, s->id);
            return 1;
        }
        uint64_t deadline = 0;
        if (atomic_load_explicit(&rt->root_done, memory_order_acquire)) {
            /* the root has ended and nothing is runnable: stop what it left,
             * and look again shortly in case something caught the stop */
            sched_sweep(rt, STOP_SWEEP);
            deadline = park_now_ns() + 1000000;
            /* what is left sits inside smarm.blocking calls that do not return */
            if (blocking_abandon(rt, park_now_ns())) {
                park_set_idle_cancel(&rt->parks, s->id);
                return 1;
            }
        }
        /* an idle spare wakes to see whether it may retire */
        if (spare) {
            uint64_t recheck = park_now_ns() + SPARE_RECHECK_NS;
            if (!deadline || recheck < deadline)
                deadline = recheck;
        }
        int keeper = 0, none = -1;
        if (timers_earliest(&rt->tm) != UINT64_MAX &&
            atomic_compare_exchange_strong(&rt->timekeeper, &none, s->id)) {
            keeper = 1;
            /* pairs with the fence in sched_nudge_timekeeper: either it sees us as the
             * keeper and wakes us, or we see its earlier deadline here */
            atomic_thread_fence(memory_order_seq_cst);
            uint64_t t = timers_earliest(&rt->tm);
            if (t != UINT64_MAX && (!deadline || t < deadline))
                deadline = t;
        }
        if (deadline && deadline <= park_now_ns()) {
            park_set_idle_cancel(&rt->parks, s->id);
        } else {
            /* an idle scheduler holds no free slots: they are the next spawns' anywhere */
            slot_cache_flush(&rt->slots, slot_cache_at(&rt->slots, s->id));
            park_or_poll(s, deadline);
        }
        preempt_busy(rt);
        if (keeper)
            atomic_store(&rt->timekeeper, -1);
    }
}

/* A thread leaves its loop: the last touch of the runtime, sched_run may return once it sees
 * the exited bit. */
static void sched_thread_exit(sched *s)
{
    smarm_runtime *rt = s->rt;
    park_set_wake_all(&rt->parks);
    sched_thread_end(s);
    atomic_fetch_or(&rt->sched_exited, 1ull << s->id);
    sched_note_exit(rt);
}

static void *sched_main(void *arg)
{
    sched *s = arg;
    sched_thread_begin(s);
    sched_loop(s);
    sched_thread_exit(s);
    return NULL;
}

/* A spare's thread: it sleeps until the watchdog activates it, runs the loop while the
 * scheduler it covers is stuck, and sleeps again, outside the idle mask (no wake-one picks a
 * retired spare, and the watchdog does not count it). */
static void *spare_main(void *arg)
{
    sched *s = arg;
    smarm_runtime *rt = s->rt;
    sched_thread_begin(s);
    for (;;) {
        uint32_t st;
        while ((st = atomic_load_explicit(&s->spare_state, memory_order_acquire)) != SPARE_ACTIVE &&
               !atomic_load_explicit(&rt->spares_stop, memory_order_acquire))
            futex_wait(&s->spare_state, st, NULL);
        if (st != SPARE_ACTIVE || sched_loop(s))
            break;
        spare_retire(s);
    }
    sched_thread_exit(s);
    return NULL;
}

static int start_thread(sched *s, void *(*fn)(void *))
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    int rc = pthread_create(&s->thread, &attr, fn, s);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

int sched_cover_stuck(smarm_runtime *rt, int i, uint64_t sw)
{
    sched *pick = NULL;
    for (int j = rt->nsched; j < sched_total(rt); j++) {
        sched *s = &rt->scheds[j];
        uint32_t st = atomic_load_explicit(&s->spare_state, memory_order_acquire);
        if (st == SPARE_ACTIVE && s->cover == i)
            return 0; /* covered; whether it retired since, it looks again at its next turn */
        if (st != SPARE_ACTIVE && (!pick || (pick->spare_state == SPARE_OFF && st == SPARE_IDLE)))
            pick = s;
    }
    if (!pick)
        return 0;
    /* only the watchdog activates spares, and a spare only retires itself: the fields are
     * the watchdog's while the spare is not active, published by the store below */
    pick->cover = i;
    pick->cover_switches = sw;
    /* before the release: what the poller places after it goes elsewhere */
    atomic_store(&rt->scheds[i].covered, 1);
    sched_release_runnext(&rt->scheds[i]);
    move_spawned(&rt->scheds[i], pick);
    uint32_t was = atomic_exchange_explicit(&pick->spare_state, SPARE_ACTIVE, memory_order_acq_rel);
    if (was == SPARE_OFF) {
        if (start_thread(pick, spare_main) != 0) {
            atomic_store(&pick->spare_state, SPARE_OFF);
            return -1;
        }
        atomic_fetch_or(&rt->spares_started, 1ull << pick->id);
    } else {
        futex_wake(&pick->spare_state, 1);
    }
    return 1;
}

void sched_note_exit(smarm_runtime *rt)
{
    atomic_fetch_add(&rt->exit_seq, 1);
    futex_wake(&rt->exit_seq, INT_MAX);
}

/* Waits until every thread of `all` (a mask of sched ids) has left its loop, or is stuck
 * inside a C call after the root-exit sweep; joins the former and detaches the latter.
 * Returns how many were left running. */
static int join_schedulers(smarm_runtime *rt, uint64_t all)
{
    for (;;) {
        /* the sequence before the masks: a change after this load makes the wait return */
        uint32_t seq = atomic_load(&rt->exit_seq);
        uint64_t done = atomic_load(&rt->sched_exited) | atomic_load(&rt->stuck);
        if ((done & all) == all)
            break;
        futex_wait(&rt->exit_seq, seq, NULL);
    }
    uint64_t exited = atomic_load(&rt->sched_exited);
    int left = 0;
    for (int i = 0; i < PARK_MAX; i++) {
        if (!(all & (1ull << i)))
            continue;
        if (exited & (1ull << i)) {
            pthread_join(rt->scheds[i].thread, NULL);
        } else {
            pthread_detach(rt->scheds[i].thread);
            left++;
        }
    }
    return left;
}

int sched_start(smarm_runtime *rt)
{
    int n = rt->nsched;
    rt->started = 0;
    /* as many spares as schedulers, and at least SPARES_MIN (a few actors of a -S 1 run may
     * sit in C calls at once), within the idle mask's 64 bits */
    rt->nspare = n > SPARES_MIN ? n : SPARES_MIN;
    if (rt->nspare > PARK_MAX - n)
        rt->nspare = PARK_MAX - n;
    int total = sched_total(rt);
    /* one stack per scheduler kept apart, to end actors that cannot have their own */
    if (stack_pool_reserve(rt->stacks, (unsigned)total) != 0) {
        fprintf(stderr, "smarm: cannot map the reserve C stacks: %s\n", strerror(errno));
        return SMARM_ENOMEM;
    }
    rt->scheds = sched_alloc(total);
    int homes =
        rt->scheds != NULL && (rt->slots.caches || slot_caches_init(&rt->slots, total) == 0);
    for (int i = 0; homes && i < n; i++)
        homes = (rt->scheds[i].homeq = runq_new(rt->cfg.max_actors)) != NULL &&
                (rt->scheds[i].spillq = runq_new(rt->cfg.max_actors)) != NULL;
    /* sharing new actors starts allowed: the first moved ones vote (note_first_run) */
    for (int i = 0; rt->scheds && i < total; i++)
        atomic_init(&rt->scheds[i].share_votes, SHARE_VOTES / 2);
    if (!homes || blocking_pool_init(rt) != 0) {
        for (int i = 0; rt->scheds && i < n; i++) {
            runq_free(rt->scheds[i].homeq);
            runq_free(rt->scheds[i].spillq);
        }
        free(rt->scheds);
        rt->scheds = NULL;
        return SMARM_ENOMEM;
    }
    atomic_store(&rt->timekeeper, -1);
    /* a short slice (run_actor) is a sixteenth of a timeslice, no shorter than the watchdog
     * can time */
    rt->probation_ns = (uint64_t)(rt->cfg.timeslice_ms * 1e6 / 16);
    if (rt->probation_ns < PROBATION_MIN_NS)
        rt->probation_ns = PROBATION_MIN_NS;
    atomic_store(&rt->stuck, 0);
    atomic_store(&rt->sched_exited, 0);
    atomic_store(&rt->spares_started, 0);
    atomic_store(&rt->spares_stop, 0);
    park_set_init(&rt->parks, total, &rt->np);
    for (int i = n; i < total; i++) {
        sched *s = &rt->scheds[i];
        s->rt = rt;
        s->id = i;
        wire_buf_init(&s->enc);
    }
    if (rt->cfg.trace && !rt->trace)
        trace_start(rt, rt->cfg.trace);
    int started = 0, err = 0;
    preempt_install();
    signal_diag_install();
    rt->sigs_on = rt->cfg.handle_signals && signal_shutdown_start(rt, &rt->sig_saved) == 0;
    for (int i = 0; i < n; i++) {
        sched *s = &rt->scheds[i];
        s->rt = rt;
        s->id = i;
        wire_buf_init(&s->enc);
        if (start_thread(s, sched_main) != 0) {
            err = SMARM_ETHREAD;
            break;
        }
        started++;
    }
    if (err) {
        /* the threads already started still finish the work */
        fprintf(stderr, "smarm: could only start %d of %d schedulers\n", started, n);
    }
    rt->started = started;
    rt->watchdog_on = started && preempt_start(rt) == 0;
    return started ? 0 : err;
}

int sched_join(smarm_runtime *rt)
{
    int n = rt->nsched, started = rt->started, total = sched_total(rt);
    rt->abandoned = join_schedulers(rt, started >= 64 ? ~0ull : (1ull << started) - 1);
    if (rt->watchdog_on)
        preempt_stop(rt); /* no spare is activated after this */
    rt->watchdog_on = 0;
    /* the spares: those asleep wake to leave, those in their loop have seen the end */
    atomic_store(&rt->spares_stop, 1);
    uint64_t spares = atomic_load(&rt->spares_started);
    for (int i = n; i < total; i++)
        if (spares & (1ull << i))
            futex_wake(&rt->scheds[i].spare_state, 1);
    rt->abandoned += join_schedulers(rt, spares);
    if (rt->sigs_on)
        signal_shutdown_stop(rt, &rt->sig_saved);
    rt->sigs_on = 0;
    rt->abandoned += blocking_pool_stop(rt);
    if (rt->abandoned) {
        trace_flush(rt); /* the rings stay: threads left inside C calls may still write */
        return 0;        /* the threads left inside C calls still use their scheds */
    }
    trace_stop(rt);
    for (int i = 0; i < total; i++) {
        wire_buf_free(&rt->scheds[i].enc);
        runq_free(rt->scheds[i].homeq);
        runq_free(rt->scheds[i].spillq);
    }
    free(rt->scheds);
    rt->scheds = NULL;
    rt->started = 0;
    return 0;
}

int sched_run(smarm_runtime *rt)
{
    int rc = sched_start(rt);
    if (!rt->scheds)
        return rc;
    int jr = sched_join(rt);
    return rc ? rc : jr;
}

void sched_finalize_host(smarm_runtime *rt, actor *a) { finalize(rt, a); }
