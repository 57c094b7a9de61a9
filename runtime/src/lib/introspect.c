/* Introspection: snapshots of actors for smarm.info/smarm.snapshot (the FFI
 * surface of bindings/smarm_ffi.h). Reads are racy by design, like ps: each
 * field is what the actor had at some instant, checked against its generation. */
#include <stdatomic.h>
#include <string.h>

#include "smarm_ffi.h"
#include "core/host.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "base/sanitize.h"
#include "core/scheduler.h"

/* An actor's scheduler's runtime, or on a host thread its handle's (embedding) */
static smarm_runtime *current_runtime(void)
{
    sched *s = sched_current();
    return s ? s->rt : host_thread_runtime();
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
    out->mailbox = atomic_load_explicit(&a->inbox.depth, memory_order_relaxed);
    out->memory = a->vm.mem;
    out->parks = a->stats.parks;
    out->yields = a->stats.yields;
    out->messages_in = a->stats.msgs_in;
    out->stack_reserve = a->run.stack_size ? a->run.stack_size : rt->cfg.stack_size;
    out->stack_guard = a->run.stack_guard ? a->run.stack_guard : rt->cfg.stack_guard;
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
