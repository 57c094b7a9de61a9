/* The network poller's epoll set. Every fd is armed EPOLLONESHOT with the waiter's pid as
 * data: after one event the fd is disarmed until its next wait re-arms it (EPOLL_CTL_MOD), so
 * an fd that stays readable while its actor is busy does not wake it again and again, and
 * schedulers polling the set at once never both get the same event. MOD re-evaluates the fd's
 * level, which closes the race of data coming between a wait's EAGAIN and its arm. The
 * eventfd's data is 0, never a pid (a pid's generation is never 0). */
#include "base/netpoll.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/park.h"

#define INTERRUPT_TOKEN 0
#define EVENTS_PER_WAIT 64

void netpoll_init(netpoll *np)
{
    pthread_mutex_init(&np->lock, NULL);
    atomic_init(&np->started, 0);
    atomic_init(&np->poller, -1);
    np->epfd = np->evfd = -1;
}

void netpoll_destroy(netpoll *np)
{
    if (netpoll_ready(np)) {
        close(np->evfd);
        close(np->epfd);
    }
    atomic_store(&np->started, 0);
    pthread_mutex_destroy(&np->lock);
}

/* Makes the epoll set and the eventfd: 1, or -errno. */
static int start(netpoll *np)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return -errno;
    int evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (evfd < 0) {
        int e = errno;
        close(epfd);
        return -e;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = INTERRUPT_TOKEN};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &ev) != 0) {
        int e = errno;
        close(evfd);
        close(epfd);
        return -e;
    }
    np->epfd = epfd;
    np->evfd = evfd;
    return 1;
}

static int ensure_started(netpoll *np)
{
    int st = atomic_load_explicit(&np->started, memory_order_acquire);
    if (st != 0)
        return st;
    mutex_lock(&np->lock);
    st = atomic_load_explicit(&np->started, memory_order_relaxed);
    if (st == 0) {
        st = start(np);
        /* a failed start is tried again by the next arm (EMFILE may pass) */
        if (st > 0)
            atomic_store_explicit(&np->started, st, memory_order_release);
    }
    mutex_unlock(&np->lock);
    return st;
}

int netpoll_arm(netpoll *np, int fd, unsigned events, uint64_t pid, int *added)
{
    int st = ensure_started(np);
    if (st < 0)
        return st;
    struct epoll_event ev = {.events = EPOLLONESHOT, .data.u64 = pid};
    /* the peer's half-close is news to a reader only: it stays set, so a writer waiting
     * for room would be woken again at once by every arm */
    if (events & NETPOLL_READ)
        ev.events |= EPOLLIN | EPOLLRDHUP;
    if (events & NETPOLL_WRITE)
        ev.events |= EPOLLOUT;
    int op = *added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(np->epfd, op, fd, &ev) != 0) {
        /* the flag can be wrong across an fd's moves and reuse: the other op is right */
        int e = errno;
        if ((op == EPOLL_CTL_ADD && e == EEXIST) || (op == EPOLL_CTL_MOD && e == ENOENT)) {
            op = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
            if (epoll_ctl(np->epfd, op, fd, &ev) != 0)
                return -errno;
        } else {
            return -e;
        }
    }
    *added = 1;
    return 0;
}

void netpoll_forget(netpoll *np, int fd, int *added)
{
    if (*added && netpoll_ready(np))
        epoll_ctl(np->epfd, EPOLL_CTL_DEL, fd, NULL);
    *added = 0;
}

/* epoll_pwait2 takes a timespec (a timer deadline is in ns; epoll_wait's ms would make every
 * timer up to a millisecond late); before Linux 5.11 the timeout is rounded up to a ms. */
static int wait_until(netpoll *np, struct epoll_event *ev, int max, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX)
        return epoll_wait(np->epfd, ev, max, -1);
    uint64_t now = deadline_ns ? park_now_ns() : 0;
    uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
    if (left == 0)
        return epoll_wait(np->epfd, ev, max, 0);
    struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    int n = epoll_pwait2(np->epfd, ev, max, &ts, NULL);
    if (n < 0 && errno == ENOSYS)
        n = epoll_wait(np->epfd, ev, max, (int)((left + 999999) / 1000000));
    return n;
}

int netpoll_wait(netpoll *np, uint64_t deadline_ns, uint64_t *pids, int max)
{
    struct epoll_event ev[EVENTS_PER_WAIT];
    if (max > EVENTS_PER_WAIT)
        max = EVENTS_PER_WAIT;
    /* no more events than pids: an event taken is disarmed (one-shot) and must not be lost */
    int n = wait_until(np, ev, max, deadline_ns);
    int got = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == INTERRUPT_TOKEN) {
            /* Only a sleeper drains it (the next sleeper then sleeps; a write after this
             * wakes it, a spurious wake the scheduler loop tolerates). A poll that does not
             * wait leaves it: drained there, the interrupt meant for the sleeper would be
             * lost (the sleeper, woken, would find the eventfd empty and sleep on). */
            if (deadline_ns) {
                uint64_t v;
                ssize_t r = read(np->evfd, &v, sizeof v);
                (void)r;
            }
        } else {
            pids[got++] = ev[i].data.u64;
        }
    }
    return got;
}

void netpoll_interrupt(netpoll *np)
{
    uint64_t one = 1;
    while (write(np->evfd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}
