/* The runtime's one spinlock, for critical sections of a few instructions that never
 * switch (mailbox, channel, timer heap, an actor's exit record), and cpu_relax for spin
 * loops. A waiter spins with the CPU's pause hint, then yields its OS thread. */
#ifndef SMARM_BASE_SPIN_H
#define SMARM_BASE_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/critical.h"

/* Tells the CPU this is a spin-wait loop (lower power, no memory-order mis-speculation). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

#define SPIN_PAUSES 100 /* pauses before a waiter yields its thread instead */

/* One step of a wait loop's backoff: the CPU's pause hint, then, past SPIN_PAUSES steps,
 * yielding the thread (spin_lock's waiters and core/stable.c's reader-group locks). */
static inline void spin_backoff(int *spins)
{
    if (++*spins > SPIN_PAUSES)
        sched_yield();
    else
        cpu_relax();
}

/* A spinlock is a zero-initialised _Atomic uint32_t. */
static inline void spin_lock(_Atomic uint32_t *l)
{
    int spins = 0;
    crit_enter();
    /* acquire: what the last holder wrote under the lock is visible */
    while (atomic_exchange_explicit(l, 1, memory_order_acquire)) {
        while (atomic_load_explicit(l, memory_order_relaxed))
            spin_backoff(&spins);
    }
}

/* release: publishes what was written under the lock to the next holder */
static inline void spin_unlock(_Atomic uint32_t *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
    crit_exit();
}

#endif
