/* Schedulers: OS threads running actors M:N; spawn, yield, park/unpark, termination. */
#ifndef SMARM_SCHED_H
#define SMARM_SCHED_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/actor.h"
#include "base/wire.h"
#include "base/heap.h"
#include "base/spawnstack.h"
#include "core/runtime.h"

/* What a thread with a sched runs: the scheduler loop, or actors inside smarm.blocking
 * (core/blocking.c), which never takes actors from the queues or holds a runnext. */
enum sched_kind { SCHED_LOOP = 0, SCHED_POOL };

/* Aligned to a cache line (and allocated so, sched_start): neighbours in rt->scheds are
 * different threads, and one's last counters sat on the line of the next one's saved stack
 * pointer, written at every switch. */
#define SCHED_HELD_MAX 8 /* spawners a scheduler may hold (scheduler.c, hold) */

typedef struct sched {
    alignas(64) smarm_runtime *rt;
    int id;
    int kind; /* enum sched_kind */
    pthread_t thread;
    void *sp;                    /* the scheduler's own context while an actor runs */
    _Atomic(actor *) cur;        /* the actor running on this thread, if any */
    _Atomic uint64_t switches;   /* actors switched in so far (the watchdog's clock) */
    _Atomic uint32_t runnext;    /* slot index + 1 of the actor to run next here, 0 = none */
    int streak;                  /* actors taken from runnext in a row */
    actor *pinned, *pinned_tail; /* preempted in a hook: they resume on this thread only */
    _Atomic uint32_t npinned;
    uint32_t fair;       /* alternates pinned actors with the shared queue */
    uint32_t picks;      /* shares picks between woken and yielded actors */
    uint32_t since_poll; /* loop turns since this scheduler last polled the network */
    /* actors a ready fd woke whose last run was here (a scheduler proper's; NULL for a
     * spare): they run here again, with their state, stack and socket in this core's cache */
    runq *homeq;
    uint32_t home_turn; /* alternates the home queue with the woken queue */
    /* the actor that ran here before the one running now (index + 1; 0: none): a wake
     * skips prefetching it (scheduler.c, ran_lately). In what was padding, so that the
     * fields after it keep their places */
    uint32_t ran_last;
    /* what an idle poll found stays here unless siblings share it (see sched_share_backlog):
     * the times this scheduler ran out of work, the count the watchdog saw at its last tick,
     * and whether it found the home queue undrained for a whole tick */
    _Atomic uint64_t drains;
    uint64_t drains_seen;
    /* the times it looked at the network (poll_network: the watchdog need not look while
     * the schedulers do) */
    _Atomic uint64_t net_polls;
    _Atomic int home_shared;
    _Atomic int covered; /* a spare stands in for this scheduler (it sits in a C call) */
    int spin_shift;      /* the idle spin lasts SPIN_NS >> spin_shift (see spin_for_work) */
    /* an actor that ended here is being finalized: an actor its death wakes (a link's exit
     * signal, a monitor's notice) runs here next, as if the dead one had woken it while it
     * ran (scheduler.c, make_runnable). In what was padding */
    int finalizing;
    /* CLOCK_MONOTONIC ns at which the actor running here, on its first slice, is preempted
     * if others wait (0 = none): the watchdog's short first slice (see run_actor) */
    _Atomic uint64_t probation_until;
    int short_slice; /* the next actor to run here gets a short slice */
    /* hot parks granted here (scheduler.c, hot parks) less those that ended here; the
     * ones that ended on another scheduler are counted in hot_returned */
    int hot_parked;
    /* when the watchdog last saw this scheduler switch, or idle (preempt.c) */
    _Atomic uint64_t quiet_since;
    stack *spare;          /* one warm stack kept across coroutine parks */
    wire_buf enc;          /* scratch buffer for encoding messages */
    heap_cache heap_cache; /* this thread\'s free blocks of actor heaps */
    void *altstack;        /* signal stack for the guard-page fault handler */
    void *fiber;           /* TSan: the scheduler thread's own fiber */
    void *stack_lo;        /* ASan: the scheduler thread's stack */
    size_t stack_size;
    /* a spare (id >= rt->nsched): runs the loop while `cover` stays stuck in one actor */
    _Atomic uint32_t spare_state; /* SPARE_OFF (no thread yet), SPARE_IDLE, SPARE_ACTIVE */
    int cover;                    /* the scheduler it stands in for */
    uint64_t cover_switches;      /* that one's switch counter when it was found stuck */
    /* for metrics: ns this scheduler ran an actor, sampled by the watchdog at its ticks */
    _Atomic uint64_t busy_ns;
    uint64_t msgs_sent; /* messages actors sent while running here (read racily) */
    /* runs here of actors the network poller woke, and how many of them had last run on
     * another scheduler (read racily, for the runtime stats) */
    uint64_t polled_runs, polled_moved;
    /* runs of actors taken from this scheduler's own runnext (put there by the actor that
     * woke or spawned them while it ran here), and from another scheduler's runnext (an idle
     * one's spin took it): the second is a woken actor that moved cores (read racily) */
    uint64_t runnext_runs, runnext_stolen;
    /* hot parks granted here (scheduler.c, hot parks) (read racily) */
    uint64_t hot_parks;
    /* of those, the ones that ended (a resume, a stop) on another scheduler: the actors
     * parked hot by this one are hot_parked - hot_returned */
    _Atomic uint32_t hot_returned;
    /* first runs here of actors spawned on another scheduler (a sibling's new actors this one
     * took: see share_votes) (read racily) */
    uint64_t spawns_moved;
    /* runnext actors the watchdog or a spare moved to the shared queue (this scheduler sat in
     * one actor for too long: a C call, or its thread waiting for a CPU) */
    _Atomic uint64_t runnext_released;
    struct trace_ring *trace; /* trace.c: this scheduler's events, NULL when off */
    /* actors spawned here that wait for their first run, the newest on top: this scheduler
     * runs the newest first, an idle sibling takes the oldest (scheduler.c, push_spawned) */
    spawnstack spawned;
    /* the oldest of them, moved on when the spawn stack was full (NULL for a spare: its go to
     * the shared new queue) */
    runq *spillq;
    /* counts new-actor picks: one in NEW_FIFO_TURN takes the shared new queue first */
    uint32_t new_turn;
    /* new actors this scheduler pushed or took so far (the watchdog compares it between its
     * ticks: whether it came back to its new actors) */
    _Atomic uint64_t new_touches;
    /* whether an idle sibling may take this scheduler's new actors, and is woken for them:
     * while it has votes (0..SHARE_VOTES; scheduler.c, note_first_run), or while the watchdog
     * finds them stale (their scheduler has not pushed or taken one for a tick). Read by
     * every sibling's look for work: on a line of their own, not on the one new_touches
     * dirties at each spawn */
    alignas(64) _Atomic int share_votes;
    _Atomic int share_stale;
    uint64_t touches_seen; /* new_touches at the watchdog's last tick */
    /* spawners held back behind the new actors queued here, oldest first (scheduler.c, hold;
     * under held_lock, nheld also read without it), and the quick first runs still to see
     * here before one is held again */
    _Atomic uint32_t held_lock;
    _Atomic uint32_t nheld;
    uint32_t held[SCHED_HELD_MAX];
    uint32_t quick_due;
} sched;

enum { SPARE_OFF = 0, SPARE_IDLE, SPARE_ACTIVE };

/* Every sched of the loop: the schedulers, then the spares. */
static inline int sched_total(const smarm_runtime *rt) { return rt->nsched + rt->nspare; }

/* The idle-mask bits of the schedulers proper (ids 0..nsched-1; spares come after). */
static inline uint64_t sched_proper_mask(const smarm_runtime *rt)
{
    return rt->nsched >= 64 ? ~0ull : (1ull << rt->nsched) - 1;
}

/* New actors waiting on s's spawn stack and in its spill queue (approximate). */
static inline uint32_t sched_own_new(sched *s)
{
    return spawnstack_size(&s->spawned) + (s->spillq ? runq_size_approx(s->spillq) : 0);
}

typedef struct spawn_opts {
    size_t stack_size;    /* 0 = runtime default */
    size_t stack_guard;   /* 0 = runtime default */
    size_t max_heap;      /* 0 = runtime default */
    int link;             /* link the new actor with its parent before it can run */
    int owned;            /* with link: it dies with its parent even if it traps exits */
    int want_monitor;     /* lualib: make a monitor channel for it (then `monitor` is set) */
    const char *name;     /* lualib: register it under this name */
    struct chan *monitor; /* register this channel (one tx reference handed over) for its down
                             notice before it can run; the id comes back in monitor_id */
    uint64_t monitor_id;
    struct host *host; /* embedding: a host actor, whose body is the calling thread */
} spawn_opts;

/* The scheduler of the calling thread, or NULL off the runtime. Not inlined:
 * an actor may resume on another thread, so the TLS address must be re-read. */
sched *sched_current(void);
/* Starts the schedulers and blocks until every actor has ended. */
int sched_run(smarm_runtime *rt);
/* sched_run in two halves (embedding): starts the scheduler threads and returns; then waits
 * until every actor has ended and the threads are joined. */
int sched_start(smarm_runtime *rt);
int sched_join(smarm_runtime *rt);
/* A host actor ends (its thread closed the handle): finalized as an actor that ended, its
 * links and monitors told. Its state must be closed and its reason set already. */
void sched_finalize_host(smarm_runtime *rt, actor *a);
/* Claims a slot and queues a new actor that boots from payload (taken over,
 * freed once booted). Returns 0 and the pid, or SMARM_ECAPACITY (the payload
 * is still the caller's). */
int sched_spawn(smarm_runtime *rt, int boot_kind, char *payload, size_t len, spawn_opts *opts,
                uint64_t parent, uint64_t *pid_out);
/* The same in two steps, so a spawner can learn that the slab is full before it encodes the
 * arguments (encoding moves sockets and channel rx out of the spawner's objects): reserve a
 * slot (its index, or -1 at capacity), then spawn into it, or give it back unused. A
 * reserved slot is always consumed by sched_spawn_reserved, which fails only as sched_spawn
 * does past its claim (a name taken: the slot is released). */
int64_t sched_reserve_slot(smarm_runtime *rt);
void sched_unreserve_slot(smarm_runtime *rt, int64_t idx);
int sched_spawn_reserved(smarm_runtime *rt, int64_t idx, int boot_kind, char *payload, size_t len,
                         spawn_opts *opts, uint64_t parent, uint64_t *pid_out);
/* Frees a's spawn payload, if it still holds one: a BOOT_FUNC payload is a block of the
 * runtime's heap of exactly its length (lib/smarm_lua.c makes it), returned through cache
 * (the calling thread's, or NULL: the depot); the others are malloc's. */
void sched_drop_payload(actor *a, struct heap_cache *cache);
/* Delivers m to pid's inbox and wakes it. 0, or -1 if pid is dead (m freed). */
int sched_send(smarm_runtime *rt, uint64_t pid, msg *m);
/* Wakes pid if it is parked (enqueues it); a stale or running pid is left alone. */
void sched_wake(smarm_runtime *rt, uint64_t pid);
/* Makes sure the calling actor a is woken by deadline (CLOCK_MONOTONIC ns). An
 * actor keeps at most one wake it relies on in the timer heap (a->wake_armed): a
 * wait whose deadline is no earlier than that one arms nothing, and when that
 * wake fires first the wait re-checks and arms again. So a loop of waits with a
 * timeout that messages end early (recv(5), a gen_server call) leaves about one
 * entry per actor in the heap, not one per wait until each falls due. */
void sched_arm_wake(actor *a, uint64_t deadline);
/* A wait woken before it was satisfied parks again: the wake may have been its armed timer
 * firing early for it (an earlier wait's deadline), so it arms anew (a->deadline, if any). */
void sched_rearm_wake(actor *a);
/* After a timer became the earliest deadline: the parked timekeeper re-arms (or one wakes). */
void sched_nudge_timekeeper(smarm_runtime *rt);
/* Lets other actors run; the caller stays runnable. */
void sched_yield_actor(actor *a);
/* the shortest short slice (run_actor); a fourth of it is the watchdog's shortest sleep */
#define PROBATION_MIN_NS 80000

/* The actor running on s if it is stuck: told to stop, and s has not switched since
 * max(not_before, its last switch the watchdog saw) for grace ns or more; else NULL.
 * Racy reads, like ps. */
actor *sched_stuck_actor(sched *s, uint64_t now, uint64_t not_before, uint64_t grace);
/* Says on stderr that a is left inside `where` (a C call, smarm.blocking) as the run ends
 * without it (one write: the caller may hold a lock, or race a stuck thread's stdio). */
void sched_report_left_behind(actor *a, const char *where);
/* Whether something other than what runs now waits for a scheduler. */
int sched_work_waiting(smarm_runtime *rt, uint64_t now);
/* The watchdog's tick: a scheduler whose home queue has stayed non-empty since the last tick,
 * without running out of work in between, shares it with the siblings (one is woken) if the
 * machine has a CPU for one. Whether the next tick may share a backlog or hand over new
 * actors (so it should come at the ticks' pace). */
int sched_share_backlog(smarm_runtime *rt);

/* The network poller's wakes, from the scheduler s that polled (NULL: the watchdog): each
 * parked actor named in pids becomes runnable. busy: the poll was made while every scheduler
 * was busy, and an actor goes to the home queue of the scheduler it last ran on if that one
 * is awake; otherwise the first runs next on s and the rest wait in s's home queue (in the
 * shared queue while s shares its backlog, or if s has no home queue). */
void sched_wake_polled(smarm_runtime *rt, sched *s, const uint64_t *pids, int n, int busy);
/* Moves the actor in s's runnext, if any, to the shared queue (s is stuck in a C call). */
void sched_release_runnext(sched *s);
/* From the watchdog: rt->scheds[i] has run one actor without a switch (counter sw) for so long
 * while work waits that it must sit inside a C call. A spare scheduler thread takes over the
 * shared queues and i's runnext until i switches again (or its actor leaves). 1 if one was
 * activated, 0 if i is already covered or every spare is busy, -1 if no thread could start. */
int sched_cover_stuck(smarm_runtime *rt, int i, uint64_t sw);
/* A scheduler thread left its loop, or was found stuck: wakes sched_run's wait. */
void sched_note_exit(smarm_runtime *rt);
/* Switches the running actor out; returns when it is switched back in (never, for DONE/PARK_CO). */
void sched_leave(actor *a, enum actor_leave how);
/* From the fault handler, on the thread running a, whose C stack overflowed into its guard
 * outside any critical section: a is switched out for good and stopped; it ends with reason
 * "stack_overflow" without its Lua state being touched again (the fault may have come in
 * the middle of any LuaJIT operation). Never returns. */
void sched_abandon_overflowed(actor *a);
/* Requests a stop of pid (root-exit sweep): it ends at its next wait, reported as killed. */
void sched_stop(smarm_runtime *rt, uint64_t pid, int how);
actor *sched_actor(smarm_runtime *rt, uint64_t pid); /* NULL if index out of range */
/* Tests only (NULL otherwise): called at an actor's death on the thread that ends it, after
 * its inbox closed and before its slot reads DONE, its name and its groups are released. */
extern void (*sched_finalize_test_hook)(smarm_runtime *rt, actor *a);
/* Stops every live actor with how: STOP_SWEEP at the root's exit (reason "shutdown"), STOP_KILL
 * for a second SIGINT/SIGTERM. */
void sched_sweep(smarm_runtime *rt, int how);

/* ---- for the threads of core/blocking.c, which run actors outside the scheduler loop ---- */

/* n zeroed scheds, aligned as the type asks (free() gives them back), or NULL. */
sched *sched_alloc(int n);
/* Makes s the calling thread's sched (sched_current) and readies its signal stack and
 * sanitizer state; sched_thread_end undoes it and gives back its cached memory. */
void sched_thread_begin(sched *s);
void sched_thread_end(sched *s);
/* Runs a (holding its stack, slot RUNNING) on s until it leaves again; returns how. */
enum actor_leave sched_run_held(sched *s, actor *a);
/* a, back from a pool thread, is runnable again: RUNNING/NOTIFIED -> QUEUED, woken queue. */
void sched_requeue_held(smarm_runtime *rt, actor *a);

/* Counts one more on a counter only the calling thread writes (others read it racily): a
 * load and a store, no locked add. */
static inline void count_own(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

#endif
