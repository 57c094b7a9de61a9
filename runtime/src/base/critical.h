/* Runtime critical sections: a count, per thread, of the runtime's locks held and of
 * allocator updates in progress. The fault handler reads it to decide whether an actor
 * that overflowed its C stack can be abandoned alone (nothing of the runtime was half
 * done on that stack) or the process must die. Every lock of the runtime is taken through
 * spin_lock or mutex_lock, which keep the count. */
#ifndef SMARM_BASE_CRITICAL_H
#define SMARM_BASE_CRITICAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <stdint.h>

/* initial-exec: one %fs-relative access, no call (the runtime is never dlopen'd late) */
extern __thread int crit_held __attribute__((tls_model("initial-exec")));
/* While an actor runs on this thread: the lowest frame address at which a critical section
 * may begin (CRIT_STACK_MARGIN above its guard); 0 otherwise. The scheduler sets it. */
extern __thread uintptr_t crit_stack_floor __attribute__((tls_model("initial-exec")));

/* Stack a critical section may need below where it begins: a lock, the allocator's slow
 * path with malloc under the heap's mutex, a report through stdio. */
#define CRIT_STACK_MARGIN (8 * 1024)

/* A critical section about to begin too close to the actor's guard: touches the guard, so
 * the overflow is taken here, outside the section (and the actor can end alone). */
void crit_stack_exhausted(void) __attribute__((noinline, cold));

/* The signal fences keep the count's updates on their side of the section for a handler
 * running on this thread; no other thread reads it. */
/* The stack pointer, without making the caller set up a frame as __builtin_frame_address
 * would (the allocator's fast path has none). */
static inline uintptr_t crit_sp(void)
{
#if defined(__x86_64__)
    uintptr_t sp;
    __asm__("mov %%rsp, %0" : "=r"(sp));
    return sp;
#else
    return (uintptr_t)__builtin_frame_address(0);
#endif
}

static inline void crit_enter(void)
{
    if (__builtin_expect(crit_sp() < crit_stack_floor, 0))
        crit_stack_exhausted();
    crit_held++;
    atomic_signal_fence(memory_order_seq_cst);
}

static inline void crit_exit(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    crit_held--;
}

/* Whether the calling thread is inside a critical section (async-signal-safe). */
static inline int crit_inside(void) { return crit_held != 0; }

static inline void mutex_lock(pthread_mutex_t *m)
{
    crit_enter();
    pthread_mutex_lock(m);
}

static inline void mutex_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
    crit_exit();
}

#endif
