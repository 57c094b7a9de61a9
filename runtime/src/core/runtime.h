/* The runtime object: everything a running smarm owns hangs off it (no hidden globals). */
#ifndef SMARM_RUNTIME_H
#define SMARM_RUNTIME_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "core/actor.h"
#include "base/heap.h"
#include "base/park.h"
#include "base/runq.h"
#include "base/slot.h"
#include "smarm.h"
#include "base/stack.h"
#include "base/timer.h"

struct sched;
struct luavm_shared;
struct blocking_pool;

/* How the core reaches the actors' code, which lives in the layers above it: the runtime
 * installs these (runtime.c), as libuv's users install callbacks. */
typedef struct actor_hooks {
    /* Runs on the actor's C stack when it is switched in on a fresh context (first run,
     * or resume after a coroutine park or yield). Never returns: it leaves through
     * sched_leave. */
    void (*entry)(actor *a);
    /* The same for an actor that was stopped: closes it and leaves with LEAVE_DONE. */
    void (*stop_entry)(actor *a);
    /* From the preemption signal handler (async-signal-safe): 1 when pc is in the actor's
     * compiled code and may_switch, and the handler switches it out; else it arms what
     * makes the actor yield soon and returns 0. sp is the interrupted stack pointer; the
     * context (pc, sp) is trusted only when may_switch. */
    int (*preempt)(actor *a, uintptr_t pc, uintptr_t sp, int may_switch);
    /* From the same handler, for a signal that asks for no preemption: the actor has run a
     * whole timeslice and its retune_due is set (async-signal-safe). */
    void (*retune)(actor *a);
    /* At most once a second, from the watchdog while every scheduler sleeps: give back what
     * the actors' code keeps for reuse and did not use since the last call. */
    void (*trim)(struct smarm_runtime *rt);
    /* A parked actor is being woken: asks the cache for the lines its next run reads first.
     * next 0: its timer fired, and it is queued behind others (a batch of timers wakes many
     * actors, which then run one after the other, each cold after its sleep); next 1: it goes
     * to the waker's runnext and runs on this thread as soon as the waker leaves, so only
     * what cannot wait is asked for (see core/scheduler.c's make_runnable). From the waking
     * thread, which may find the actor running elsewhere by then: it reads nothing the actor
     * writes but actor_vm's warm fields. NULL: nothing to ask for. */
    void (*warm)(actor *a, int next);
} actor_hooks;

/* How actors ended, for metrics: the reasons the runtime gives, then any other. */
enum exit_class {
    ENDED_NORMAL = 0,
    ENDED_ERROR,
    ENDED_KILLED,
    ENDED_SHUTDOWN,
    ENDED_MEMORY,
    ENDED_NOPROC,
    ENDED_STACK_OVERFLOW,
    ENDED_NO_STACK,
    ENDED_OTHER,
    ENDED_CLASSES
};
/* Their names, as the reasons read ("normal", "error", ..., "other"): scheduler.c */
extern const char *const exit_class_names[ENDED_CLASSES];

struct smarm_runtime {
    smarm_config cfg;
    slot_table slots;
    actor *actors;    /* parallel to slots.slots, reserved, touched lazily */
    runq *rq;         /* woken and new actors */
    runq *rq_spawner; /* actors preempted in a slice in which they spawned */
    runq *rq_new;     /* new actors */
    runq *rq_yield;   /* actors that used up their timeslice or yielded */
    /* the idle mask, written at each scheduler's idle begin and cancel, on lines apart from
     * the pointers above, which every send and wake reads */
    _Alignas(64) park_set parks;
    _Alignas(64) stack_pool *stacks;
    timers tm;
    struct luavm_shared *vm; /* the vm layer's runtime-wide part (module cache, template) */
    actor_hooks hooks;
    uint64_t probation_ns; /* the length of a short slice (scheduler.c) */
    heap heap;             /* actor states\' memory */
    /* apart from the heap's fields, which its slow paths write under its lock */
    _Alignas(64) struct sched *scheds; /* nsched schedulers, then nspare spares (scheduler.c) */
    int nsched;
    int nspare; /* stand in for a scheduler stuck inside a C call (sched_cover_stuck) */
    _Atomic int spares_stop;
    _Atomic uint64_t spares_started; /* ids of the spares whose thread runs */
    struct blocking_pool *blocking;  /* blocking.c: threads for smarm.blocking */
    /* every spawn and death changes it, on any thread: apart from the scheduler array */
    _Alignas(64) _Atomic int64_t live; /* actors spawned and not yet finalized */
    pthread_t watchdog;                /* preempt.c */
    pthread_t sig_thread;              /* signal.c: SIGINT/SIGTERM waiter */
    _Atomic int sig_stop, sig_caught;
    _Atomic int wd_stop, wd_sleeping;
    /* the watchdog's ticks, and those that polled the network (runtime stats) */
    _Atomic uint64_t wd_ticks, wd_polls;
    /* the CPUs other programs left this process at the watchdog's last sample, in
     * thousandths (base/cpuroom.c; -1 unknown), and the polled backlogs it shared with an
     * idle sibling or kept on their scheduler for want of a CPU (sched_share_backlog) */
    _Atomic int64_t cpu_room;
    _Atomic uint64_t backlogs_shared, backlogs_kept;
    _Atomic uint64_t next_monitor; /* exit.c: monitor ids */
    /* apart from the watchdog's and the monitors' counters above */
    _Alignas(64) struct registry *registry; /* registry.c: names */
    struct pg *pg;                          /* pg.c: process groups */
    struct stab_names *tables;              /* stable.c: shared tables by name */
    netpoll np;                             /* base/netpoll.c: fd readiness to actor wakes */
    _Atomic int spinning;                   /* schedulers polling for work before they sleep */
    _Atomic int timekeeper; /* scheduler parked holding the earliest deadline, or -1 */
    _Atomic int root_done;
    _Atomic int sweeping;
    /* schedulers that stay inside a C call after the root-exit sweep (preempt.c's watchdog
     * finds them), and those whose thread has left its loop: sched_run waits on exit_seq
     * until every scheduler is one or the other, and leaves the stuck ones running */
    _Atomic uint64_t stuck, sched_exited;
    _Atomic uint32_t exit_seq;
    int abandoned; /* scheduler threads a run left inside C calls: the runtime is never freed */
    uint64_t root_pid;
    int root_status;            /* 0 normal, 1 crashed */
    pthread_mutex_t err_lock;   /* serialises crash reports on stderr */
    _Atomic uint32_t log_flags; /* logsink.c: LOG_STDERR_OFF, LOG_FORWARD */
    /* sched_start/sched_join (scheduler.c) */
    int started, watchdog_on, sigs_on;
    sigset_t sig_saved;
    _Atomic int stopping; /* embedding: smarm_stop has swept; spawns are refused */
    /* embedding (embed.c): every host handle made, freed with the runtime */
    pthread_mutex_t hosts_lock;
    struct smarm_host *hosts;
    struct embed_preload *preloads;
    _Atomic int embed_running; /* smarm_start ran and smarm_stop has not */
    struct watch *watch;       /* smarm_watch's thread (watch.c), or NULL */
    /* runtime-wide counters for metrics (relaxed; a spawn or a death is rare enough) */
    _Atomic uint64_t spawned;
    _Atomic uint64_t exits[ENDED_CLASSES]; /* by enum exit_class */
    /* read at every run and wake (TRACE_ON): apart from the counters above */
    _Alignas(64) struct trace *trace; /* trace.c: --trace, NULL when off */
};

#endif
