/* The reactor thread: blocked in epoll_wait(-1), so an idle runtime with any number of idle
 * connections uses no CPU. Every fd is armed EPOLLONESHOT with the waiter's pid as data: after
 * one event the fd is disarmed until its next wait re-arms it (EPOLL_CTL_MOD), so an fd that
 * stays readable while its actor is busy does not wake it again and again. MOD re-evaluates
 * the fd's level, which closes the race of data coming between a wait's EAGAIN and its arm.
 * An eventfd with data 0 (never a pid: a pid's generation is never 0) stops the thread. */
#include "io/reactor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define STOP_TOKEN 0
#define EVENTS_PER_WAIT 256

struct reactor {
    reactor_wake_fn wake;
    void *ctx;
    pthread_mutex_t lock; /* guards the lazy start */
    _Atomic int started;  /* 1 once epfd, stopfd and the thread exist; -errno if that failed */
    int epfd, stopfd;
    pthread_t thread;
};

reactor *reactor_new(reactor_wake_fn wake, void *ctx)
{
    reactor *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->wake = wake;
    r->ctx = ctx;
    r->epfd = r->stopfd = -1;
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

static void *reactor_main(void *arg)
{
    reactor *r = arg;
    struct epoll_event ev[EVENTS_PER_WAIT];
    for (;;) {
        int n = epoll_wait(r->epfd, ev, EVENTS_PER_WAIT, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return NULL; /* EBADF/EINVAL: the set is gone; nothing can be waited on */
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == STOP_TOKEN)
                return NULL;
            r->wake(r->ctx, ev[i].data.u64);
        }
    }
}

/* Makes the epoll set, the stop eventfd and the thread: 1, or -errno. */
static int start(reactor *r)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return -errno;
    int stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (stopfd < 0) {
        int e = errno;
        close(epfd);
        return -e;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = STOP_TOKEN};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, stopfd, &ev) != 0) {
        int e = errno;
        close(stopfd);
        close(epfd);
        return -e;
    }
    r->epfd = epfd;
    r->stopfd = stopfd;
    /* every signal is for other threads: the preemption signal targets schedulers, the
     * stop signals go to the signal waiter */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    int rc = pthread_create(&r->thread, NULL, reactor_main, r);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc != 0) {
        close(stopfd);
        close(epfd);
        r->epfd = r->stopfd = -1;
        return -rc;
    }
    return 1;
}

static int ensure_started(reactor *r)
{
    int st = atomic_load_explicit(&r->started, memory_order_acquire);
    if (st != 0)
        return st;
    pthread_mutex_lock(&r->lock);
    st = atomic_load_explicit(&r->started, memory_order_relaxed);
    if (st == 0) {
        st = start(r);
        /* a failed start is tried again by the next arm (EMFILE may pass) */
        if (st > 0)
            atomic_store_explicit(&r->started, st, memory_order_release);
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

int reactor_arm(reactor *r, int fd, unsigned events, uint64_t pid, int *added)
{
    int st = ensure_started(r);
    if (st < 0)
        return st;
    struct epoll_event ev = {.events = EPOLLONESHOT, .data.u64 = pid};
    /* the peer's half-close is news to a reader only: it stays set, so a writer waiting
     * for room would be woken again at once by every arm */
    if (events & REACTOR_READ)
        ev.events |= EPOLLIN | EPOLLRDHUP;
    if (events & REACTOR_WRITE)
        ev.events |= EPOLLOUT;
    int op = *added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(r->epfd, op, fd, &ev) != 0) {
        /* the flag can be wrong across an fd's moves and reuse: the other op is right */
        int e = errno;
        if ((op == EPOLL_CTL_ADD && e == EEXIST) || (op == EPOLL_CTL_MOD && e == ENOENT)) {
            op = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
            if (epoll_ctl(r->epfd, op, fd, &ev) != 0)
                return -errno;
        } else {
            return -e;
        }
    }
    *added = 1;
    return 0;
}

void reactor_forget(reactor *r, int fd, int *added)
{
    if (*added && atomic_load_explicit(&r->started, memory_order_acquire) > 0)
        epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
    *added = 0;
}

void reactor_free(reactor *r)
{
    if (!r)
        return;
    if (atomic_load_explicit(&r->started, memory_order_acquire) > 0) {
        uint64_t one = 1;
        while (write(r->stopfd, &one, sizeof one) < 0 && errno == EINTR) {
        }
        pthread_join(r->thread, NULL);
        close(r->stopfd);
        close(r->epfd);
    }
    pthread_mutex_destroy(&r->lock);
    free(r);
}
