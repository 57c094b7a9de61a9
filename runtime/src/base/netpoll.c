/* The network poller's epoll set. Every fd is registered once, on its first wait, with
 * EPOLLET for reading and writing and the fd as data; the waits after that make no system
 * call of their own: a waiter word per fd and direction says who waits (see netpoll.h).
 *
 * No edge is lost. A waiter's try fails (EAGAIN) and then it arms: it swaps its pid into the
 * word, unless the word says READY, which it takes and tries again. An edge after the failed
 * try is harvested after it too, and its event swaps READY into the word: if that comes
 * before the waiter's swap, the waiter sees READY; if after, the event finds the waiter's
 * pid and wakes it. READY is taken only right before a real try, so a mark that stays after
 * a wake (the woken actor read its data, nobody took the mark) costs at most one futile try.
 * Edges on an fd nobody waits for just leave READY, where the one-shot arming of an earlier
 * design re-armed with an epoll_ctl per wait. The eventfd's data is 0, never an fd's. */
#include "base/netpoll.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/critical.h"
#include "base/park.h"

#define INTERRUPT_TOKEN 0
#define EVENTS_PER_WAIT 64
/* a waiter word's mark for an edge not taken yet (a pid is below 2^53) */
#define READY UINT64_MAX

void netpoll_init(netpoll *np)
{
    pthread_mutex_init(&np->lock, NULL);
    atomic_init(&np->started, 0);
    atomic_init(&np->poller, -1);
    np->epfd = np->evfd = -1;
    for (int i = 0; i < NETPOLL_FD_CHUNKS; i++)
        atomic_init(&np->fds[i], NULL);
}

void netpoll_destroy(netpoll *np)
{
    if (netpoll_ready(np)) {
        close(np->evfd);
        close(np->epfd);
    }
    atomic_store(&np->started, 0);
    for (int i = 0; i < NETPOLL_FD_CHUNKS; i++)
        free(atomic_load_explicit(&np->fds[i], memory_order_relaxed));
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

/* The waiter words of fd, or NULL if its chunk was never made (make: make it; NULL then
 * only out of memory or past the table). */
static netpoll_fd *fd_words(netpoll *np, int fd, int make)
{
    unsigned u = (unsigned)fd;
    if (u >= (unsigned)NETPOLL_FD_CHUNK * NETPOLL_FD_CHUNKS)
        return NULL;
    _Atomic(netpoll_fd *) *cp = &np->fds[u / NETPOLL_FD_CHUNK];
    netpoll_fd *c = atomic_load_explicit(cp, memory_order_acquire);
    if (__builtin_expect(!c && make, 0)) {
        mutex_lock(&np->lock);
        c = atomic_load_explicit(cp, memory_order_relaxed);
        if (!c) {
            c = calloc(NETPOLL_FD_CHUNK, sizeof *c);
            if (c)
                atomic_store_explicit(cp, c, memory_order_release);
        }
        mutex_unlock(&np->lock);
    }
    return c ? &c[u % NETPOLL_FD_CHUNK] : NULL;
}

netpoll_fd *netpoll_words(netpoll *np, int fd) { return fd_words(np, fd, 0); }

/* Adds fd to the set with pid as the waiter for events: 0, or -errno. The words start with
 * the waiter in them before the registration's edge can come, so that edge wakes it (a late
 * event of an earlier fd of the same number may still mark them: a futile try at worst). */
static int add_fd(netpoll *np, int fd, netpoll_fd *d, unsigned events, uint64_t pid)
{
    atomic_store_explicit(&d->waiter[0], events & NETPOLL_READ ? pid : 0, memory_order_relaxed);
    atomic_store_explicit(&d->waiter[1], events & NETPOLL_WRITE ? pid : 0, memory_order_relaxed);
    atomic_store_explicit(&d->hup, 0, memory_order_relaxed);
    /* the peer's half-close is a reader's news (RDHUP); EPOLLOUT comes with every edge while
     * there is room, which only marks the writing word */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                             .data.u64 = (uint64_t)fd + 1};
    if (epoll_ctl(np->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
        return 0;
    /* the flag can be wrong across an fd's moves and reuse: registered already, MOD makes
     * the registration ours and reports the level as an edge */
    if (errno == EEXIST && epoll_ctl(np->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
        return 0;
    return -errno;
}

/* Makes pid the waiter of one word: 1 if it held READY (taken instead), else 0. */
static int wait_on(_Atomic uint64_t *w, uint64_t pid)
{
    uint64_t old = atomic_load_explicit(w, memory_order_relaxed);
    for (;;) {
        uint64_t want = old == READY ? 0 : pid;
        if (atomic_compare_exchange_weak_explicit(w, &old, want, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return old == READY;
    }
}

int netpoll_arm(netpoll *np, int fd, unsigned events, uint64_t pid, int *added)
{
    int st = ensure_started(np);
    if (st < 0)
        return st;
    netpoll_fd *d = fd_words(np, fd, 1);
    if (!d)
        return fd < 0 ? -EBADF : fd / NETPOLL_FD_CHUNK >= NETPOLL_FD_CHUNKS ? -EMFILE : -ENOMEM;
    if (!*added) {
        int rc = add_fd(np, fd, d, events, pid);
        if (rc == 0)
            *added = 1;
        return rc;
    }
    int ready = 0;
    if (events & NETPOLL_READ)
        ready |= wait_on(&d->waiter[0], pid);
    if (events & NETPOLL_WRITE)
        ready |= wait_on(&d->waiter[1], pid);
    return ready;
}

int netpoll_take_ready(netpoll *np, int fd, unsigned events)
{
    netpoll_fd *d = fd_words(np, fd, 0);
    return d ? netpoll_take(d, events) : 0;
}

void netpoll_forget(netpoll *np, int fd, int *added)
{
    if (*added && netpoll_ready(np))
        epoll_ctl(np->epfd, EPOLL_CTL_DEL, fd, NULL);
    *added = 0;
}

/* An edge on one word: marks it READY and returns the pid it replaced (0 if none). A word
 * that says READY already has nothing to learn (no write, so the writing word of a busy
 * connection stays shared between the cores' caches). */
static uint64_t edge(_Atomic uint64_t *w)
{
    if (atomic_load_explicit(w, memory_order_relaxed) == READY)
        return 0;
    uint64_t old = atomic_exchange_explicit(w, READY, memory_order_seq_cst);
    return old == READY ? 0 : old;
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
    /* an event taken must not be lost, and it may wake two pids (a reader and a writer) */
    max /= 2;
    if (max > EVENTS_PER_WAIT)
        max = EVENTS_PER_WAIT;
    if (max < 1)
        max = 1;
    int got = 0, interrupted = 0;
    do {
        int n = wait_until(np, ev, max, deadline_ns);
        if (n <= 0)
            break;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == INTERRUPT_TOKEN) {
                /* Only a sleeper drains it (the next sleeper then sleeps; a write after this
                 * wakes it, a spurious wake the scheduler loop tolerates). A poll that does
                 * not wait leaves it: drained there, the interrupt meant for the sleeper
                 * would be lost (the sleeper, woken, would find the eventfd empty and sleep
                 * on). */
                if (deadline_ns) {
                    uint64_t v;
                    ssize_t r = read(np->evfd, &v, sizeof v);
                    (void)r;
                }
                interrupted = 1;
                continue;
            }
            netpoll_fd *d = fd_words(np, (int)(ev[i].data.u64 - 1), 0);
            if (!d)
                continue;
            uint32_t e = ev[i].events;
            uint64_t pid;
            /* before the marks: the waiter that takes one sees it (their exchanges order it) */
            if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                atomic_store_explicit(&d->hup, 1, memory_order_relaxed);
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR) && (pid = edge(&d->waiter[0])))
                pids[got++] = pid;
            if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR) && (pid = edge(&d->waiter[1])))
                pids[got++] = pid;
        }
        /* edges nobody waited for (room to write on a connection that is not writing, the
         * readiness a registration reports) only marked words: a sleeper sleeps on */
    } while (got == 0 && !interrupted && deadline_ns);
    return got;
}

void netpoll_interrupt(netpoll *np)
{
    uint64_t one = 1;
    while (write(np->evfd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}
