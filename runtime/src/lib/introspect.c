/* Introspection: snapshots of actors for smarm.info/smarm.snapshot (the FFI
 * surface of bindings/smarm_ffi.h). Reads are racy by design, like ps: each
 * field is what the actor had at some instant, checked against its generation. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "smarm_ffi.h"
#include "core/host.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/scheduler.h"
#include "core/stable.h"
#include "vm/dispatch_share.h"
#include "vm/collect.h"
#include "vm/luavm.h"

/* An actor's scheduler's runtime, or on a host thread its handle's (embedding) */
static smarm_runtime *current_runtime(void)
{
    sched *s = sched_current();
    return s ? s->rt : host_thread_runtime();
}

/* A text another thread may be rewriting: copied byte by byte, always terminated. */
RACY_READS static void copy_text(char *dst, const volatile char *src, size_t n)
{
    size_t i = 0;
    for (; i + 1 < n && src[i]; i++)
        dst[i] = src[i];
    dst[i] = 0;
}

/* The live actor of pid in the caller's runtime, or NULL. */
static actor *live_actor(smarm_runtime *rt, uint64_t pid)
{
    slot *sl = rt ? slot_of(&rt->slots, pid) : NULL;
    if (!sl)
        return NULL;
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    enum slot_state st = slot_word_state(w);
    if (slot_word_gen(w) != pid_gen(pid) || st == SLOT_VACANT || st == SLOT_DONE)
        return NULL;
    return &rt->actors[pid_index(pid)];
}

RACY_READS int smarm_ffi_set_child(uint64_t pid, const char *id, int32_t kind)
{
    actor *a = live_actor(current_runtime(), pid);
    if (!a)
        return -1;
    if (id) {
        volatile char *dst = a->stats.child_id;
        size_t i = 0;
        for (; i + 1 < sizeof a->stats.child_id && id[i]; i++)
            dst[i] = id[i];
        dst[i] = 0;
    }
    a->stats.kind = (uint8_t)kind;
    return 0;
}

RACY_READS void smarm_ffi_runtime_stats(smarm_runtime_stats *out)
{
    memset(out, 0, sizeof *out);
    smarm_runtime *rt = current_runtime();
    if (!rt)
        return;
    out->alive = atomic_load_explicit(&rt->live, memory_order_relaxed);
    out->spawned = atomic_load_explicit(&rt->spawned, memory_order_relaxed);
    for (int c = 0; c < ENDED_CLASSES && c < 9; c++)
        out->exits[c] = atomic_load_explicit(&rt->exits[c], memory_order_relaxed);
    for (int i = 0; i < sched_total(rt); i++) {
        out->messages_sent += rt->scheds[i].msgs_sent;
        out->polled_runs += rt->scheds[i].polled_runs;
        out->polled_moved += rt->scheds[i].polled_moved;
        out->runnext_runs += rt->scheds[i].runnext_runs;
        out->runnext_stolen += rt->scheds[i].runnext_stolen;
        out->hot_parks += rt->scheds[i].hot_parks;
        out->hot_parked +=
            *(volatile int *)&rt->scheds[i].hot_parked -
            (int)atomic_load_explicit(&rt->scheds[i].hot_returned, memory_order_relaxed);
        out->spawns_moved += rt->scheds[i].spawns_moved;
        out->runnext_released +=
            atomic_load_explicit(&rt->scheds[i].runnext_released, memory_order_relaxed);
        if (rt->scheds[i].homeq)
            out->run_queue += runq_size_approx(rt->scheds[i].homeq);
        out->run_queue += sched_own_new(&rt->scheds[i]);
    }
    out->run_queue +=
        runq_size_approx(rt->rq) + runq_size_approx(rt->rq_new) + runq_size_approx(rt->rq_yield);
    out->timers = timers_pending(&rt->tm);
    out->watchdog_ticks = atomic_load_explicit(&rt->wd_ticks, memory_order_relaxed);
    out->watchdog_polls = atomic_load_explicit(&rt->wd_polls, memory_order_relaxed);
    out->backlogs_shared = atomic_load_explicit(&rt->backlogs_shared, memory_order_relaxed);
    out->backlogs_kept = atomic_load_explicit(&rt->backlogs_kept, memory_order_relaxed);
    out->cpu_room = atomic_load_explicit(&rt->cpu_room, memory_order_relaxed);
    /* a plain read (spawns write it under the free-list lock): its value at some instant */
    uint32_t hwm = *(volatile uint32_t *)&rt->slots.hwm;
    for (uint32_t i = 0; i < hwm; i++) {
        uint64_t w = atomic_load_explicit(&slot_at(&rt->slots, i)->word, memory_order_acquire);
        enum slot_state st = slot_word_state(w);
        if (st != SLOT_VACANT && st != SLOT_DONE)
            out->heap_bytes += rt->actors[i].vm.mem;
    }
    out->schedulers = rt->nsched;
    out->states_recycled = atomic_load_explicit(&rt->vm->states_recycled, memory_order_relaxed);
    uint64_t pooled, dirty, trimmed;
    luavm_pool_counts(rt->vm, &pooled, &dirty, &trimmed);
    out->states_pooled = (int64_t)pooled;
    out->states_dirty = (int64_t)dirty;
    out->states_trimmed = trimmed;
    out->states_restored = atomic_load_explicit(&rt->vm->states_restored, memory_order_relaxed);
    out->resume_collections =
        atomic_load_explicit(&rt->vm->resume_collections, memory_order_relaxed);
    out->collect_budget = collect_room_budget();
}

int64_t smarm_ffi_sched_busy_ns(int32_t i)
{
    smarm_runtime *rt = current_runtime();
    if (!rt || i < 0 || i >= rt->nsched)
        return -1;
    return (int64_t)atomic_load_explicit(&rt->scheds[i].busy_ns, memory_order_relaxed);
}

RACY_READS int smarm_ffi_actor_info(uint64_t pid, smarm_actor_info *out)
{
    smarm_runtime *rt = current_runtime();
    slot *sl = rt ? slot_of(&rt->slots, pid) : NULL;
    if (!sl)
        return -1;
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    enum slot_state st = slot_word_state(w);
    if (slot_word_gen(w) != pid_gen(pid) || st == SLOT_VACANT || st == SLOT_DONE)
        return -1;
    actor *a = &rt->actors[pid_index(pid)];
    memset(out, 0, sizeof *out);
    out->pid = pid;
    /* plain reads, each of a word the actor writes while it runs (see RACY_READS) */
    out->parent = a->parent;
    out->state = st == SLOT_QUEUED     ? 1
                 : a->run.blocking     ? 5
                 : st == SLOT_RUNNING  ? 2
                 : st == SLOT_NOTIFIED ? 3
                                       : 4;
    out->mailbox = mailbox_depth(&a->inbox);
    out->memory = a->vm.mem;
    out->arena = a->vm.arena != NULL;
    out->parks = a->stats.parks;
    out->yields = a->stats.yields;
    out->messages_in = a->stats.msgs_in;
    out->stack_reserve = a->run.stack_size ? a->run.stack_size : rt->cfg.stack_size;
    out->stack_guard = a->run.stack_guard ? a->run.stack_guard : rt->cfg.stack_guard;
    out->stack_held = *(stack *volatile *)&a->run.stk != NULL;
    out->timeslices = a->stats.slices;
    out->migrations = a->stats.migrations;
    out->preempt_hook = a->stats.preempt_hook;
    out->preempt_jit = a->stats.preempt_jit;
    out->preempt_safe = a->stats.preempt_safe;
    out->preempt_cret = a->stats.preempt_cret;
    out->max_heap = a->vm.max_heap;
    out->links = a->ex.nlinks;
    out->monitors = a->ex.nmonitors;
    out->trapping = a->ex.trap != NULL;
    registry_name_of(rt, a, out->name, sizeof out->name);
    out->messages_out = a->stats.msgs_out;
    out->recycled = a->vm.recycled;
    out->stack_high_water = a->stats.stack_hw;
    out->stack_shrinks = a->stats.stack_shrinks;
    out->stack_released = a->stats.stack_released;
    copy_text(out->current, a->stats.where, sizeof out->current - 12);
    if (out->current[0]) {
        size_t len = strlen(out->current);
        snprintf(out->current + len, sizeof out->current - len, ":%d", (int)a->stats.where_line);
    }
    copy_text(out->child_id, a->stats.child_id, sizeof out->child_id);
    out->kind = a->stats.kind;
    /* the tenancy may have ended while we read */
    w = atomic_load_explicit(&sl->word, memory_order_acquire);
    return slot_word_gen(w) == pid_gen(pid) ? 0 : -1;
}

uint32_t smarm_ffi_pids(uint64_t *out, uint32_t max)
{
    smarm_runtime *rt = current_runtime();
    if (!rt)
        return 0;
    uint32_t n = 0, hwm = __atomic_load_n(&rt->slots.hwm, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < hwm && n < max; i++) {
        uint64_t w = atomic_load_explicit(&slot_at(&rt->slots, i)->word, memory_order_acquire);
        enum slot_state st = slot_word_state(w);
        if (st != SLOT_VACANT && st != SLOT_DONE)
            out[n++] = pid_make(i, slot_word_gen(w));
    }
    return n;
}

int smarm_ffi_dispatch_shared(void)
{
    sched *s = sched_current();
    actor *a = s ? atomic_load_explicit(&s->cur, memory_order_relaxed) : NULL;
    return a && a->vm.L ? dshare_page_shared(a->vm.L) : 0;
}

int64_t smarm_ffi_actor_count(void)
{
    smarm_runtime *rt = current_runtime();
    return rt ? atomic_load_explicit(&rt->live, memory_order_relaxed) : 0;
}

int64_t smarm_ffi_timers_pending(void)
{
    smarm_runtime *rt = current_runtime();
    return rt ? timers_pending(&rt->tm) : 0;
}

uint64_t smarm_ffi_table_memory(uint64_t pid)
{
    smarm_runtime *rt = current_runtime();
    slot *sl = rt ? slot_of(&rt->slots, pid) : NULL;
    if (!sl)
        return 0;
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    if (slot_word_gen(w) != pid_gen(pid) || slot_word_state(w) == SLOT_DONE)
        return 0;
    return stab_owned_memory(rt, &rt->actors[pid_index(pid)]);
}
