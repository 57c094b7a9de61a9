/* The network poller: one epoll set per runtime whose events name the actors to wake. There
 * is no thread of its own: the schedulers poll it (core/scheduler.c), without blocking at the
 * top of their loop and before they go idle, and at most one idle scheduler sleeps in it
 * (base/park.c), so a ready fd wakes a scheduler directly.
 *
 * Every fd is armed one-shot with the waiting actor's pid as the event's data; a stale pid is
 * harmless (the slot's generation check), and so is a spurious wake (every wait re-checks its
 * condition after every wake). */
#ifndef SMARM_BASE_NETPOLL_H
#define SMARM_BASE_NETPOLL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

enum { NETPOLL_READ = 1, NETPOLL_WRITE = 2 };

typedef struct netpoll {
    pthread_mutex_t lock; /* guards the lazy start */
    _Atomic int started;  /* 1 once epfd and evfd exist */
    int epfd, evfd;       /* the set, and an eventfd in it that interrupts a sleeping poller */
    _Atomic int poller;   /* the id of the scheduler sleeping in the set, or -1 */
} netpoll;

void netpoll_init(netpoll *np);
/* Closes the set (after every scheduler has left it). */
void netpoll_destroy(netpoll *np);
/* Whether the set exists: until the first arm nothing is worth polling. */
static inline int netpoll_ready(netpoll *np)
{
    return atomic_load_explicit(&np->started, memory_order_acquire) > 0;
}
/* Arms fd to name pid once, when it is ready for events (NETPOLL_READ/WRITE; a hang-up or an
 * error counts as ready, and so does the peer's half-close for a reader). *added says whether
 * fd is in the set already (it is set here). The readiness is level: data that came before the
 * arm shows at once. Makes the set on the first arm. 0, or -errno (the set could not be made,
 * or epoll_ctl failed: ENOSPC past max_user_watches). */
int netpoll_arm(netpoll *np, int fd, unsigned events, uint64_t pid, int *added);
/* Forgets fd before it is closed (a no-op if it was never added); only needed when the fd
 * might live on in another process or duplicate, since close removes it from the set. */
void netpoll_forget(netpoll *np, int fd, int *added);
/* Collects up to max pids whose fds are ready, waiting until deadline_ns (CLOCK_MONOTONIC):
 * 0 polls without waiting, UINT64_MAX waits until an event or an interrupt. Returns how many
 * (0 on a timeout, an interrupt or a signal). Only a call that may wait consumes an
 * interrupt. */
int netpoll_wait(netpoll *np, uint64_t deadline_ns, uint64_t *pids, int max);
/* Makes the sleeper in netpoll_wait (if any, or the next one) return. */
void netpoll_interrupt(netpoll *np);

#endif
