/* The network poller: one epoll set per runtime whose events name the actors to wake. There
 * is no thread of its own: the schedulers poll it (core/scheduler.c), without blocking at the
 * top of their loop and before they go idle, and at most one idle scheduler sleeps in it
 * (base/park.c), so a ready fd wakes a scheduler directly.
 *
 * Every fd is registered once, edge-triggered for reading and writing, with the fd as the
 * event's data. Each fd has a waiter word per direction: 0, the pid of the actor waiting, or
 * READY (an edge came since a waiter last took it). An event stores READY and wakes the pid
 * it replaced; a waiter takes READY (and tries its operation again) or stores its pid and
 * parks. A stale pid is harmless (the slot's generation check), and so is a spurious wake
 * (every wait re-checks its condition after every wake). */
#ifndef SMARM_BASE_NETPOLL_H
#define SMARM_BASE_NETPOLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum { NETPOLL_READ = 1, NETPOLL_WRITE = 2 };

/* the fds' waiter words live in chunks made on first use and kept until the set closes, so
 * a poller never reads freed memory, however late its event */
#define NETPOLL_FD_CHUNK 1024
#define NETPOLL_FD_CHUNKS 4096 /* fds up to 4M */

typedef struct netpoll_fd {
    /* [0] reading, [1] writing: 0, a pid, or the READY mark (UINT64_MAX; a pid is below 2^53) */
    _Atomic uint64_t waiter[2];
    /* an event said the peer hung up or half-closed, or an error: no edge will follow, so a
     * reader must not wait for one (io_sock_fill). Set by the poller before it marks the
     * words, cleared when the fd is added to the set again. */
    _Atomic uint32_t hup;
} netpoll_fd;

typedef struct netpoll {
    pthread_mutex_t lock; /* guards the lazy start and the making of chunks */
    _Atomic int started;  /* 1 once epfd and evfd exist */
    int epfd, evfd;       /* the set, and an eventfd in it that interrupts a sleeping poller */
    _Atomic int poller;   /* the id of the scheduler sleeping in the set, or -1 */
    netpoll_fd *_Atomic fds[NETPOLL_FD_CHUNKS];
} netpoll;

void netpoll_init(netpoll *np);
/* Closes the set (after every scheduler has left it). */
void netpoll_destroy(netpoll *np);
/* Whether the set exists: until the first arm nothing is worth polling. */
static inline int netpoll_ready(netpoll *np)
{
    return atomic_load_explicit(&np->started, memory_order_acquire) > 0;
}
/* Makes pid the waiter of fd for events (NETPOLL_READ/WRITE; a hang-up or an error counts
 * as ready for both, the peer's half-close for a reader). *added says whether fd is in the
 * set already: if not it is registered here (and *added set) with pid waiting, and its
 * readiness then counts as an edge that wakes pid. Makes the set on the first arm. Returns 0: pid
 * is woken by the next edge; 1: an edge came since the last take, taken now: the caller must try
 * its operation again (with a real system call) instead of parking; or -errno (the set could not be
 * made, fd is past the table, or epoll_ctl failed: ENOSPC past max_user_watches). The caller's
 * failed try must come before the arm: an edge after it is never lost. */
int netpoll_arm(netpoll *np, int fd, unsigned events, uint64_t pid, int *added);
/* Takes the READY marks of fd for events: whether there was one. A woken waiter calls it
 * before its try, so the edge that woke it does not make its next arm retry in vain; a
 * taker must try with a real system call next. */
int netpoll_take_ready(netpoll *np, int fd, unsigned events);
/* The waiter words of an fd that was armed (they stay where they are until the set closes,
 * so a socket handle can keep the pointer), or NULL. */
netpoll_fd *netpoll_words(netpoll *np, int fd);
/* netpoll_take_ready on fd's words. A plain load first: the word of a direction nobody waits
 * on stays READY, and the common case (nothing to take) writes nothing. */
static inline int netpoll_take_word(_Atomic uint64_t *w)
{
    uint64_t old = UINT64_MAX; /* READY */
    return atomic_load_explicit(w, memory_order_relaxed) == UINT64_MAX &&
           atomic_compare_exchange_strong_explicit(w, &old, 0, memory_order_seq_cst,
                                                   memory_order_relaxed);
}
/* Whether an event of the fd said the peer hung up, half-closed or failed (see hup). */
static inline int netpoll_hung_up(netpoll_fd *d)
{
    return atomic_load_explicit(&d->hup, memory_order_relaxed) != 0;
}
static inline int netpoll_take(netpoll_fd *d, unsigned events)
{
    int got = 0;
    if (events & NETPOLL_READ)
        got |= netpoll_take_word(&d->waiter[0]);
    if (events & NETPOLL_WRITE)
        got |= netpoll_take_word(&d->waiter[1]);
    return got;
}
/* Forgets fd before it is closed (a no-op if it was never added); only needed when the fd
 * might live on in another process or duplicate, since close removes it from the set. */
void netpoll_forget(netpoll *np, int fd, int *added);
/* Collects up to max (at least 2) pids whose fds are ready, waiting until deadline_ns
 * (CLOCK_MONOTONIC): 0 polls without waiting, UINT64_MAX waits until an event or an interrupt.
 * Returns how many (0 on a timeout, an interrupt, a signal, or events that found no waiter). Only a
 * call that may wait consumes an interrupt. */
int netpoll_wait(netpoll *np, uint64_t deadline_ns, uint64_t *pids, int max);
/* Makes the sleeper in netpoll_wait (if any, or the next one) return. */
void netpoll_interrupt(netpoll *np);

#endif
