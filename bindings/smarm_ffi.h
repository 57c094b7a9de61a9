/* The C functions Lua reaches through the LuaJIT FFI. scripts/gen-cdef turns
 * this header into the cdefs that lua/smarm/ffi.lua loads: edit only here.
 * Plain declarations only (ffi.cdef does not expand macros): constants shared
 * with Lua are enum members, which Lua reads as require("smarm.ffi").NAME. */
#ifndef SMARM_FFI_H
#define SMARM_FFI_H

#include <stdint.h>

typedef struct smarm_actor_info {
    uint64_t pid;
    uint64_t parent;
    int32_t state;         /* 1 queued, 2 running, 3 running (woken), 4 parked,
                              5 inside smarm.blocking */
    uint32_t mailbox;      /* queued messages */
    uint64_t memory;       /* bytes held by its Lua state */
    uint64_t parks;        /* times it waited */
    uint64_t yields;       /* times it yielded */
    uint64_t messages_in;  /* messages received */
    uint64_t stack_reserve;/* bytes of the C stack it runs on (its spawn's or the default) */
    uint64_t stack_guard;
    uint64_t timeslices;    /* times it was switched in */
    uint64_t migrations;    /* times it resumed on another scheduler thread */
    uint64_t preempt_hook;  /* preempted in interpreted code (count hook) */
    uint64_t preempt_jit;   /* preempted in JIT-compiled code (signal-driven switch) */
    uint64_t preempt_safe;  /* preempted at a runtime safe point */
    uint64_t preempt_cret;  /* preempted as a C function called from Lua returned */
    uint64_t max_heap;      /* 0 = unlimited */
    uint32_t links;         /* linked actors */
    uint32_t monitors;      /* monitors watching it */
    int32_t trapping;       /* 1 if it traps exits */
    char name[64];          /* its registered name, "" if none (truncated) */
    uint64_t messages_out;  /* messages it sent */
    uint64_t stack_high_water; /* deepest its C stack was seen (sampled), bytes */
    uint64_t stack_shrinks;    /* times pages of its stack were given back after a spike */
    uint64_t stack_released;   /* bytes given back so */
    char current[64];       /* "file:line" of its last wait or preemption in Lua, "" if none */
    char child_id[40];      /* its id in its supervisor's children, "" if none */
    int32_t kind;           /* 0 not supervised, 1 worker, 2 supervisor */
    int32_t arena;          /* 1 once its heap grew large enough for an arena of its own */
    int32_t recycled;       /* 1 if its state is an ended actor's, reset (the state pool) */
    int32_t stack_held;     /* 1 while it holds a C stack: running, or parked in place (inside
                               a C call that cannot yield, or a hot park) */
} smarm_actor_info;

/* Marks pid as a supervised child: id as in its child spec (NULL keeps the one it has: a
 * supervisor marks itself so), kind 1 worker, 2 supervisor. 0, or -1 if pid is not alive. */
int smarm_ffi_set_child(uint64_t pid, const char *id, int32_t kind);

/* Runtime-wide figures for metrics. */
typedef struct smarm_runtime_stats {
    int64_t alive;          /* live actors */
    uint64_t spawned;       /* actors spawned so far */
    uint64_t exits[9];      /* by reason: normal, error, killed, shutdown, memory, noproc,
                               stack_overflow, no_stack, other */
    uint64_t messages_sent; /* smarm.send and tx:send that delivered */
    int64_t run_queue;      /* actors queued to run */
    int64_t timers;         /* entries in the timer heap */
    uint64_t heap_bytes;    /* bytes the actors' Lua states hold */
    int32_t schedulers;     /* scheduler threads */
    uint64_t states_recycled; /* spawns that booted an ended actor's reset state */
    int64_t states_pooled;    /* ended actors' states waiting for a spawn */
    uint64_t states_restored; /* resets that wrote back the image of a state's libraries */
    uint64_t polled_runs;     /* runs of actors a ready fd woke */
    uint64_t polled_moved;    /* of those, runs on another scheduler than the actor's last */
    uint64_t runnext_runs;     /* runs of woken or spawned actors where their waker ran */
    uint64_t runnext_stolen;   /* runs of such actors that another scheduler took over */
    uint64_t runnext_released; /* such actors moved to the shared queue by the watchdog */
    uint64_t resume_collections; /* GC cycles run whole as an actor resumed from a wait */
    uint64_t watchdog_ticks;     /* the watchdog's wake-ups while some scheduler was busy */
    uint64_t watchdog_polls;     /* of those, ticks that polled the network themselves */
    uint64_t spawns_moved;       /* first runs of actors on another scheduler than their
                                    spawner's (an idle one took them over) */
    uint64_t states_trimmed;     /* pooled states closed after lying unused for a second */
    uint64_t backlogs_shared; /* polled backlogs a busy scheduler's idle siblings took over */
    uint64_t backlogs_kept;   /* of such backlogs, ticks that kept one where it was: the
                                 machine's other programs left no CPU for a sibling */
    int64_t cpu_room; /* thousandths of the CPUs this process may use that other programs
                         left it, at the last sample (-1 unknown) */
    int64_t states_dirty; /* of the pooled states, those not reset yet: the spawn that
                             takes one resets it */
    uint64_t collect_budget; /* bytes of garbage the actors alive may make between their
                                cycles at resumes, split among them: half a core's
                                second-level cache */
    uint64_t hot_parks; /* waits that parked in place holding their stack: the actor's last
                           park was short (a ping-pong's sides, a call and its server) */
    int64_t hot_parked; /* actors parked so now (at most 4 per scheduler) */
} smarm_runtime_stats;
void smarm_ffi_runtime_stats(smarm_runtime_stats *out);
/* ns scheduler i (0 <= i < schedulers) ran actors, sampled; -1 past the last one. */
int64_t smarm_ffi_sched_busy_ns(int32_t i);

/* Fills out for a live pid of the caller's runtime; 0, or -1 if pid is not alive. */
int smarm_ffi_actor_info(uint64_t pid, smarm_actor_info *out);
/* Bytes held by the shared tables (smarm.table) that pid owns. */
uint64_t smarm_ffi_table_memory(uint64_t pid);
/* smarm.logger: where the runtime's own reports go (1: not on stderr, 2: also to the
 * logger actor), and the wall clock (seconds since the epoch) of event timestamps. */
void smarm_ffi_log_flags(uint32_t flags);
double smarm_ffi_wall_time(void);
/* Writes up to max live pids into out; returns how many were written. */
uint32_t smarm_ffi_pids(uint64_t *out, uint32_t max);
/* 1 if the calling actor's state reads the dispatch table all the runtime's message loops
 * share (runtime/src/vm/dispatch_share.h), else 0. */
int smarm_ffi_dispatch_shared(void);
/* Live actors of the caller's runtime. */
int64_t smarm_ffi_actor_count(void);
/* Entries in the caller's runtime's timer heap (armed wakes and sends). */
int64_t smarm_ffi_timers_pending(void);

/* ---- supervisors (runtime/src/supervisor.c) ----
 * The bookkeeping of one supervisor: its children in start order, restart
 * decisions and the restart-intensity cap. Owned by the supervisor's own state
 * (one thread at a time); children are named by keys > 0 that are never reused. */
typedef struct smarm_sup smarm_sup;

/* Restart strategies. */
enum smarm_sup_strategy {
    SMARM_SUP_ONE_FOR_ONE = 0,
    SMARM_SUP_ONE_FOR_ALL = 1,
    SMARM_SUP_REST_FOR_ONE = 2
};
/* Restart types of a child. */
enum smarm_sup_restart {
    SMARM_SUP_PERMANENT = 0,
    SMARM_SUP_TRANSIENT = 1,
    SMARM_SUP_TEMPORARY = 2
};
/* A child's shutdown is seconds of grace (>= 0) or one of these. */
enum smarm_sup_shutdown {
    SMARM_SUP_BRUTAL_KILL = -1,
    SMARM_SUP_INFINITY = -2
};

/* strategy: an smarm_sup_strategy. More than intensity restarts within period
 * seconds trip the cap. NULL if out of memory. */
smarm_sup *smarm_ffi_sup_new(int32_t strategy, int32_t intensity, double period);
void smarm_ffi_sup_free(smarm_sup *s);
/* Appends a child at the end of the start order; restart: an smarm_sup_restart;
 * shutdown: seconds, or an smarm_sup_shutdown value. Returns its key, or -1 if out
 * of memory. */
int32_t smarm_ffi_sup_add_child(smarm_sup *s, int32_t restart, double shutdown, int32_t is_sup);
/* Removes a child that is not running: 0, -1 unknown key, -2 running. */
int32_t smarm_ffi_sup_delete_child(smarm_sup *s, int32_t key);
/* Records key's new pid (0 = not running). 0, or -1 for an unknown key. */
int32_t smarm_ffi_sup_set_pid(smarm_sup *s, int32_t key, uint64_t pid);
/* The key of the child running as pid, or 0. */
int32_t smarm_ffi_sup_key_of(smarm_sup *s, uint64_t pid);
/* A child's pid (0 if not running), restart type, shutdown and kind. */
uint64_t smarm_ffi_sup_pid(smarm_sup *s, int32_t key);
int32_t smarm_ffi_sup_restart_type(smarm_sup *s, int32_t key);
double smarm_ffi_sup_shutdown(smarm_sup *s, int32_t key);
int32_t smarm_ffi_sup_is_sup(smarm_sup *s, int32_t key);
/* pid, a child, exited (abnormal: reason other than normal and shutdown). Its
 * pid is cleared; a temporary child is removed. Writes into out (room for max)
 * the keys to restart in start order — the failed child alone (one_for_one),
 * every child (one_for_all), or it and those started after it (rest_for_one) —
 * and returns how many: 0 if its restart type says no restart, -1 if pid is
 * not a child. The caller stops the running ones in reverse order first. */
int32_t smarm_ffi_sup_child_exited(smarm_sup *s, uint64_t pid, int32_t abnormal, int32_t *out,
                                   int32_t max);
/* Records a restart at time now (seconds); 1 if allowed, 0 if it exceeds the
 * intensity within the period (the supervisor must give up). O(1). */
int32_t smarm_ffi_sup_restart_allowed(smarm_sup *s, double now);
/* Writes up to max keys into out in start order (reverse: 1 for reverse
 * order); returns the number of children. */
int32_t smarm_ffi_sup_children(smarm_sup *s, int32_t *out, int32_t max, int32_t reverse);
/* out[0..3] = specs, active (running), supervisors, workers. */
void smarm_ffi_sup_count(smarm_sup *s, int32_t *out);

#endif
