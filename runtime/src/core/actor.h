/* The per-actor record: one per slot, in a slab beside the slot table. */
#ifndef SMARM_ACTOR_H
#define SMARM_ACTOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/mailbox.h"
#include "base/stack.h"

typedef struct lua_State lua_State;
struct sched;
struct actor;

/* How an actor left its scheduler. */
enum actor_leave {
    LEAVE_YIELD = 1,  /* still runnable; holds its stack */
    LEAVE_PARK_STACK, /* parked inside a C call that cannot yield; holds its stack */
    LEAVE_PARK_CO,    /* parked by yielding its Lua coroutine; holds no stack */
    LEAVE_DONE,       /* finished; its state is closed */
    LEAVE_YIELD_CO,   /* still runnable, left by yielding its coroutine (preempted); no stack */
    LEAVE_BLOCKING,   /* smarm.blocking: moves to a pool thread (or back); holds its stack,
                         its slot stays RUNNING (core/blocking.c) */
    LEAVE_PARK_HOT,   /* parked in place, holding its stack, where it could have yielded: its
                         last park was short (run.hot_ok; see scheduler.c, hot parks) */
};

/* Why an actor is stopped from outside; it never runs Lua code again. */
enum stop_kind {
    STOP_KILL = 1, /* smarm.kill, a second SIGINT/SIGTERM: reason "killed" */
    STOP_SHUTDOWN, /* smarm.shutdown of a non-trapping actor: "shutdown" */
    STOP_SWEEP,    /* the root-exit sweep: "shutdown" */
    STOP_LINKED,   /* a linked actor died abnormally: its reason */
    STOP_NO_STACK, /* no C stack could be had for it: "no_stack" */
};

struct chan;
struct host;

/* A monitor on this actor: the down notice goes to the watcher's channel. */
typedef struct monitor_ref {
    uint64_t id;
    struct chan *c; /* holds one tx reference */
    int shared;     /* c is shared by several monitors: the notice does not close it */
} monitor_ref;

/* BOOT_HOST: a host actor's state (embedding): no body, the host thread drives it */
enum boot_kind { BOOT_FUNC = 1, BOOT_FILE, BOOT_STRING, BOOT_HOST };

/* What a Lua-visible wait needs after a coroutine park: pushes its results
 * on the coroutine and returns their count, or -1 to park again. */
typedef int (*actor_cont)(struct actor *a, lua_State *co);

/* The scheduler's part (scheduler.c, preempt.c): where the actor runs and how it left. The
 * fields every message touches (a wake, a switch in, a park) come first, so that with the
 * inbox's and the vm part's they fill few cache lines: in a ring of a thousand actors each
 * line of a woken actor's record is a miss. */
typedef struct actor_run {
    stack *stk;                    /* its C stack while it holds one */
    void *sp;                      /* saved stack pointer while switched out holding its stack */
    struct heap_cache *heap_cache; /* its state allocates from this thread's cache */
    /* a host actor (embedding, core/host.h): a thread of the host is its body; its slot
     * stays RUNNING, and a wake signals this instead of queueing it */
    _Atomic(struct host *) host;
    uint64_t deadline; /* of the current wait, 0 = none */
    enum actor_leave leave;
    enum actor_leave yield_leave; /* how to leave when its coroutine yields to the entry */
    _Atomic int stop;             /* a stop was requested: STOP_* (0 = none) */
    int stopping;                 /* its stop entry has been set up */
    int last_sched;               /* the scheduler it last ran on (-1 = none yet) */
    int polled;                   /* made runnable by the network poller (counted at its run) */
    volatile int preempt_pending; /* its timeslice is over: leave at the next chance */
    int pinned;                   /* must resume on the OS thread it left (see preempt.c) */
    /* bytes, so that the record's stats begin on a cache line of their own (see actor) */
    unsigned char spawned;    /* it spawned an actor during its current slice */
    unsigned char blocking;   /* runs on a pool thread, inside smarm.blocking */
    unsigned char hot_ok;     /* this run may end in a hot park (set as it is switched in) */
    unsigned char overflowed; /* its C stack overflowed: abandoned, its state never touched */
    unsigned char hot; /* parked hot (LEAVE_PARK_HOT), on the grant of last_sched (core/scheduler.c,
                          hot parks) */
    uint16_t park_sw;  /* the low bits of its scheduler's switch count at its last run */
    /* the rest is seldom touched */
    size_t stack_size, stack_guard; /* per-spawn shape (0 = defaults) */
    _Atomic uint64_t wake_armed;    /* its earliest wake in the timer heap, 0 = none */
    struct actor *blocking_next;    /* link in the blocking pool's queue */
    struct actor *pin_next;         /* link in its scheduler's pinned list */
    void *fiber;                    /* TSan fiber */
} actor_run;

/* The vm layer's part: the Lua state, the boot payload, the heap accounting (per message
 * fields first, as in actor_run). */
typedef struct actor_vm {
    lua_State *L;  /* the actor's own state */
    lua_State *co; /* the coroutine its body runs in */
    actor_cont cont;
    size_t mem; /* bytes held by the Lua state */
    /* a message being decoded there; freed if decoding raises (vm/luavm.c). Here, not among
     * the colder fields below: every flat receive sets it, and a ring member's hop touched a
     * line of the record for it alone */
    struct msg *decoding;
    /* the addresses of its newest small blocks (a ring of COLLECT_LOG), kept once it has
     * collected at a resume (vm/collect.h); NULL until then */
    void **gc_log;
    uint32_t gc_log_n;
    uint32_t gc_strings;         /* its string count at the end of its last cycle (vm/ljx.h) */
    uint32_t code_epoch;         /* the module cache's reload epoch this state last looked at */
    unsigned char general;       /* an arena or a kept block: allocations take the general path */
    unsigned char in_cont;       /* a wait's continuation runs (protected, GC held: vm/body.c) */
    unsigned char closing;       /* the state is being closed: no more waiting */
    unsigned char boot_kind;     /* enum boot_kind */
    unsigned char heap_exceeded; /* an allocation was refused for max_heap */
    /* blocks malloc gave that LuaJIT now frees as small ones (a shrink kept in place when
     * every allocator refused): they are neither the heap's nor the arena's (kept[]) */
    unsigned char nkept;
    unsigned char recycled; /* its state was an ended actor's, reset (vm/luavm.c's pool) */
    /* its last cycle between waits ended with finalizers due: the room it gets after a
     * cycle (vm/collect.h) waits for the collector's pause */
    unsigned char room_owed;
    /* the key string of the one-key records it receives (vm/flat.c: a GCstr *), on the line
     * of the fields above, which a receive touches anyway */
    void *flat_key;
    size_t max_heap; /* 0 = unlimited */
    /* the heap size at which it asks for an arena (set at boot; asked on the allocation's
     * slow path only) */
    size_t arena_at;
    char *boot; /* spawn payload, freed once booted */
    size_t boot_len;
    char *exit_bytes; /* the reason smarm.exit was given, encoded at the call (or NULL) */
    size_t exit_len;
    /* a C call's return address that the preemption handler replaced (vm/body.c) */
    uintptr_t *volatile cret_slot;
    uintptr_t cret_orig;
    /* JIT parameters: a state starts with the runtime's (loops compile late, see vm/luavm.c);
     * the first time the watchdog sees it run a whole timeslice it asks for LuaJIT's own
     * (retune_due, set by the preemption handler at the watchdog's signal, on the actor's
     * thread), and its state switches at its next interpreted bytecode (vm/body.c);
     * jit_retuned once done (the watchdog reads it: until then it asks at every whole slice,
     * since a signal that finds the state booting or in a finalizer cannot retune it) */
    _Atomic int retune_due;
    int jit_retuned;
    /* a state whose heap grew large allocates its small blocks from an arena of its own
     * (vm/luavm.c: the collector's walks keep their locality); NULL until then */
    void *arena;
    void *arena_msp; /* its allocator's state (vm/ljx.c) */
    /* its reservation (base/arena_map.h): a block inside is the arena's; span 0 if none */
    uintptr_t arena_lo;
    size_t arena_span;
    void *kept[4];
    /* where its boot put the objects it made, when they came from one run of fresh memory
     * (boot_objs_len 0: they did not): a cycle prefetches them (vm/collect.h) */
    const char *boot_objs;
    uint32_t boot_objs_len;
    /* the image of its libraries it came with (vm/ljx.h's ljx_image; NULL: none, the boot
     * makes its tables) */
    void *image;
    unsigned image_libs; /* the standard libraries in that image (vm/luavm.c's lib bits) */
    unsigned libs_open;  /* the standard libraries this actor opened in its state */
    /* a digest of the last key that was not flat_key (vm/flat.c) */
    uint32_t flat_key_seen;
    uint64_t body_at; /* when its body began, after its boot (ns; 0 = not yet) */
    /* a check of its state's dispatch table is mapping a page over it (vm/dispatch_share.h):
     * the preemption handler arms no hook */
    volatile unsigned char remapping;
} actor_vm;

/* What a thread that wakes the actor asks the cache for (the vm layer's warm hook, and a
 * send before its push): its state and coroutine, and where its last wait returns to in its
 * Lua code (vm/ljx.h's LJX_SITE_HINTS addresses). Only prefetched, so a stale value does no
 * harm; atomic, since that thread may read them while the actor's own thread sets them (or
 * a stale timer of the slot's last tenant while a spawn clears them). */
#define ACTOR_WARM_SITES 6 /* with state and co: one cache line */
typedef struct actor_warm {
    _Atomic(void *) state;
    _Atomic(void *) co;
    _Atomic(const void *) site[ACTOR_WARM_SITES];
} actor_warm;

/* Counters for introspection (those every message touches first). */
typedef struct actor_stats {
    uint64_t parks, msgs_in;
    uint64_t msgs_out; /* messages it sent (smarm.send, tx:send) */
    uint64_t slices;   /* times it was switched in */
    /* its C stack, sampled at waits, switches and preemption signals (core/stackwatch.h) */
    size_t stack_hw;             /* the deepest it was seen */
    size_t stack_recent;         /* the deepest since its last shrink */
    const void *where_pc;        /* the wait's call site where_line was taken at (vm/ljx.c) */
    uint32_t parks_since_shrink; /* the cooldown before dirty pages below are released */
    int32_t where_line;
    uint64_t yields;
    uint64_t migrations; /* times it resumed on another scheduler than before */
    uint64_t preempt_hook, preempt_jit, preempt_safe; /* preemptions by tier */
    uint64_t preempt_cret;   /* switched out as a C function returned to Lua */
    uint64_t stack_shrinks;  /* times pages of its stack were given back */
    uint64_t stack_released; /* bytes given back */
    /* for introspection only, written by the actor or its supervisor, read racily */
    char where[56];          /* the chunk of its last wait or preemption in Lua code */
    const void *where_chunk; /* what where names (vm/ljx.c) */
    char child_id[40];       /* its id in its supervisor's child specs ("" = none) */
    uint8_t kind;            /* 0 not supervised, 1 worker, 2 supervisor */
} actor_stats;

/* exit.c: links, monitors, trap and reasons, under the cold lock (one actor at a time). */
typedef struct actor_exit {
    _Atomic uint32_t cold;
    int exited;     /* finalized: new links and monitors get noproc */
    uint64_t owner; /* spawned owned: dies with this actor even if it traps */
    uint64_t *links;
    uint32_t nlinks, caplinks;
    uint32_t *link_index; /* positions in links, once they are many (core/linkset.c) */
    uint32_t link_index_cap;
    monitor_ref *monitors;
    uint32_t nmonitors, capmonitors;
    struct chan *trap;   /* trap_exit channel (one tx reference), or NULL */
    char *exit_override; /* reason bytes a link death imposed (STOP_LINKED) */
    size_t exit_override_len;
    /* what notices about this actor name it as, as the wire bytes of a value (an interned
     * pid of another node, or a {name, node} tuple, whose link or monitor this actor stands
     * in for: core/exit.c), or NULL for its own pid */
    char *alias;
    size_t alias_len;
    /* how it ended, filled in by the body: wire bytes of the reason */
    char *reason;
    size_t reason_len;
    int reason_abnormal;
    char *err_msg, *err_tb; /* for reason "error" */
    /* the terminal record of the slot's last death (kept across tenancies) */
    uint32_t terminal_gen;
    char *terminal;
    size_t terminal_len;
} actor_exit;

/* registry.c and pg.c */
struct stab;
typedef struct actor_names {
    char *name;
    uint32_t pg_joins;
    struct stab *_Atomic tables; /* stable.c: the shared tables it owns */
} actor_names;

/* Aligned to cache lines, so the hot fields at the front of its parts (the inbox, run, vm,
 * stats) always fill the same few lines. The stats begin a line: their first 64 bytes are
 * what every park and switch writes (parks, messages, slices, the stack samples, the wait's
 * call site), which straddled two lines when they began 8 bytes into one. The warm hints
 * fill one line of their own: a waker reads them all, before anything of the record it
 * asked for has arrived (1,024 bytes in all). */
typedef struct actor {
    _Alignas(64) struct smarm_runtime *rt;
    uint64_t pid;
    mailbox inbox;
    actor_run run;
    actor_vm vm;
    _Alignas(64) actor_warm warm;
    _Alignas(64) actor_stats stats;
    actor_exit ex;
    actor_names names;
    uint64_t parent;
} actor;
_Static_assert(sizeof(actor) == 1024, "an actor record is 1,024 bytes (four to a page)");

/* A fresh tenancy's scheduling state, with its stack shape (0 = the defaults). */
static inline void actor_run_reset(actor_run *r, size_t stack_size, size_t stack_guard)
{
    r->stk = NULL;
    r->sp = NULL;
    r->stack_size = stack_size;
    r->stack_guard = stack_guard;
    r->leave = 0;
    r->yield_leave = 0;
    r->deadline = 0;
    /* atomics one by one: a stale timer of the slot's last tenant may still touch them */
    atomic_store_explicit(&r->wake_armed, 0, memory_order_relaxed);
    atomic_store_explicit(&r->stop, 0, memory_order_relaxed);
    r->stopping = 0;
    r->last_sched = -1;
    r->polled = 0;
    r->preempt_pending = 0;
    r->pinned = 0;
    r->spawned = 0;
    r->overflowed = 0;
    r->blocking = 0;
    r->blocking_next = NULL;
    r->pin_next = NULL;
    r->heap_cache = NULL;
    atomic_store_explicit(&r->host, NULL, memory_order_relaxed);
}

/* A fresh tenancy's vm part: not booted yet, booting from payload (taken over). */
static inline void actor_vm_reset(actor_vm *v, int boot_kind, char *payload, size_t len,
                                  size_t max_heap)
{
    memset(v, 0, sizeof *v);
    v->boot_kind = boot_kind;
    v->boot = payload;
    v->boot_len = len;
    v->max_heap = max_heap;
}

/* No hints (a fresh tenancy, a state closed): atomic stores, since a stale timer of the
 * slot's last tenant may fire and read them on another thread. */
static inline void actor_warm_clear(actor_warm *w)
{
    atomic_store_explicit(&w->state, NULL, memory_order_relaxed);
    atomic_store_explicit(&w->co, NULL, memory_order_relaxed);
    for (int i = 0; i < ACTOR_WARM_SITES; i++)
        atomic_store_explicit(&w->site[i], NULL, memory_order_relaxed);
}

#endif
