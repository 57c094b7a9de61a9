/* Scheduler parking: a futex-backed permit per scheduler and the idle bit mask through
 * which producers wake exactly one sleeping scheduler. */
#include "base/park.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/futex.h"

enum { PARKER_EMPTY = 0, PARKER_NOTIFIED = 1, PARKER_PARKED = 2 };

uint64_t park_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void parker_init(parker *p) { atomic_init(&p->state, PARKER_EMPTY); }

/* FUTEX_WAIT_BITSET takes an absolute deadline on CLOCK_MONOTONIC (without
 * FUTEX_CLOCK_REALTIME); 0 means none. Returns 0 or an errno (ETIMEDOUT, EINTR, EAGAIN). */
static int parker_futex_wait(parker *p, uint64_t deadline_ns)
{
    struct timespec ts, *tp = NULL;
    if (deadline_ns) {
        ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
        ts.tv_nsec = (long)(deadline_ns % 1000000000u);
        tp = &ts;
    }
    long r = syscall(SYS_futex, &p->state, FUTEX_WAIT_BITSET_PRIVATE, PARKER_PARKED, tp, NULL,
                     FUTEX_BITSET_MATCH_ANY);
    return r == 0 ? 0 : errno;
}

void parker_park(parker *p, uint64_t deadline_ns)
{
    /* Every step that leaves NOTIFIED is a read-modify-write, so it reads the newest unpark
     * and acquires from it: an unpark that found NOTIFIED (and skipped the futex wake) is
     * still ordered before our return. On entry the state is EMPTY or NOTIFIED. */
    uint32_t s = PARKER_EMPTY;
    if (!atomic_compare_exchange_strong_explicit(&p->state, &s, PARKER_PARKED, memory_order_relaxed,
                                                 memory_order_relaxed)) {
        /* A pending permit: consume it (only we leave NOTIFIED, so this is NOTIFIED). */
        atomic_exchange_explicit(&p->state, PARKER_EMPTY, memory_order_acquire);
        return;
    }
    for (;;) {
        int err = parker_futex_wait(p, deadline_ns);
        s = PARKER_NOTIFIED;
        if (atomic_compare_exchange_strong_explicit(&p->state, &s, PARKER_EMPTY,
                                                    memory_order_acquire, memory_order_relaxed))
            return;
        if (err == ETIMEDOUT || (deadline_ns && park_now_ns() >= deadline_ns)) {
            /* Give up: PARKED -> EMPTY, unless an unpark raced in, whose permit we take. */
            atomic_exchange_explicit(&p->state, PARKER_EMPTY, memory_order_acquire);
            return;
        }
        /* EINTR, or a stale futex wake: sleep again */
    }
}

void parker_unpark(parker *p)
{
    /* release: what we wrote before the unpark is visible to the parker when it returns;
     * seq_cst: the poller's half of a Dekker pair (park_set_wait_poll) */
    if (atomic_exchange_explicit(&p->state, PARKER_NOTIFIED, memory_order_seq_cst) == PARKER_PARKED)
        futex_wake(&p->state, 1);
}

/* Unparks scheduler i, wherever it sleeps. The scheduler sleeping in the poller's set
 * publishes its id and then looks at its permit; we publish the permit and then look at the
 * id (seq_cst both sides, a plain load on x86): either it sees the permit and does not sleep,
 * or we see it there and interrupt it. */
static void unpark(park_set *ps, int i)
{
    parker_unpark(&ps->parkers[i]);
    if (ps->np && atomic_load_explicit(&ps->np->poller, memory_order_seq_cst) == i)
        netpoll_interrupt(ps->np);
}

void park_set_init(park_set *ps, int n, netpoll *np)
{
    atomic_init(&ps->idle, 0);
    ps->n = n;
    ps->np = np;
    for (int i = 0; i < PARK_MAX; i++)
        parker_init(&ps->parkers[i]);
}

/* The idle protocol is Dekker's: the scheduler writes its idle bit and then reads the run
 * queue; a producer writes the run queue and then reads the idle mask (park_set_wake_one).
 * With a seq_cst fence between the write and the read on both sides, at least one of them
 * sees the other's write: either the re-check finds the work or the producer finds the bit. */
void park_set_idle_begin(park_set *ps, int i)
{
    atomic_fetch_or_explicit(&ps->idle, 1ull << i, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
}

void park_set_idle_cancel(park_set *ps, int i)
{
    /* A waker may already have cleared the bit and unparked us: that permit makes our
     * next park return at once, a spurious wake the scheduler loop tolerates. */
    atomic_fetch_and_explicit(&ps->idle, ~(1ull << i), memory_order_relaxed);
}

void park_set_wait(park_set *ps, int i, uint64_t deadline_ns)
{
    parker_park(&ps->parkers[i], deadline_ns);
    /* Woken by a waker, the bit is already clear; on a timeout or a spurious wake it is
     * still set and we clear it ourselves. */
    atomic_fetch_and_explicit(&ps->idle, ~(1ull << i), memory_order_relaxed);
}

int park_set_wait_poll(park_set *ps, int i, uint64_t deadline_ns, uint64_t *pids, int max)
{
    netpoll *np = ps->np;
    int none = -1;
    if (!np || !netpoll_ready(np) ||
        !atomic_compare_exchange_strong_explicit(&np->poller, &none, i, memory_order_seq_cst,
                                                 memory_order_relaxed)) {
        park_set_wait(ps, i, deadline_ns);
        return 0;
    }
    parker *p = &ps->parkers[i];
    int n = 0;
    /* a permit already there (an unpark that may have missed our id) means: do not sleep */
    if (atomic_load_explicit(&p->state, memory_order_seq_cst) != PARKER_NOTIFIED)
        n = netpoll_wait(np, deadline_ns ? deadline_ns : UINT64_MAX, pids, max);
    atomic_store_explicit(&np->poller, -1, memory_order_relaxed);
    /* consume a permit (as parker_park would); one that comes after this makes the next park
     * return at once, a spurious wake */
    atomic_exchange_explicit(&p->state, PARKER_EMPTY, memory_order_acquire);
    atomic_fetch_and_explicit(&ps->idle, ~(1ull << i), memory_order_relaxed);
    return n;
}

bool park_set_wake_one(park_set *ps)
{
    /* The producer's half of the Dekker fence (see park_set_idle_begin): orders the
     * caller's run-queue push before the read of the idle mask. */
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t m = atomic_load_explicit(&ps->idle, memory_order_relaxed);
    while (m) {
        /* one sleeping on its futex before the one sleeping in the poller's set, which then
         * goes on watching the network */
        uint64_t pick = m;
        int p = ps->np ? atomic_load_explicit(&ps->np->poller, memory_order_relaxed) : -1;
        if (p >= 0 && (m & ~(1ull << p)))
            pick = m & ~(1ull << p);
        int i = 63 - __builtin_clzll(pick);
        /* Clearing the bit first is what makes the wake exclusive: a second waker cannot
         * pick the same scheduler. */
        if (atomic_compare_exchange_weak_explicit(&ps->idle, &m, m & ~(1ull << i),
                                                  memory_order_relaxed, memory_order_relaxed)) {
            unpark(ps, i);
            return true;
        }
    }
    return false;
}

bool park_set_wake(park_set *ps, int i)
{
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t bit = 1ull << i;
    if (!(atomic_load_explicit(&ps->idle, memory_order_relaxed) & bit))
        return false;
    if (!(atomic_fetch_and_explicit(&ps->idle, ~bit, memory_order_relaxed) & bit))
        return false;
    unpark(ps, i);
    return true;
}

void park_set_wake_all(park_set *ps)
{
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t m = atomic_exchange_explicit(&ps->idle, 0, memory_order_relaxed);
    while (m) {
        int i = 63 - __builtin_clzll(m);
        m &= ~(1ull << i);
        unpark(ps, i);
    }
}
