/* Tests of the network poller (base/netpoll.c), first through a test thread that polls it
 * as the old reactor thread did, with a recording wake function: an armed fd wakes its
 * pid when data comes and not before, data that came before the first arm still wakes (the
 * registration reports the level as an edge), an edge with no waiter leaves READY for the
 * next arm to take (and try again), a woken waiter takes its edge, a re-arm names the new
 * waiter, a peer's half-close reaches readers but not a writer waiting for room, a close
 * racing a wait is harmless, a reused fd starts without the old marks, edges nobody waits
 * for do not end a poller's sleep, a reader racing a writer and two pollers loses no edge,
 * and a thousand fds all wake. Then the poller inside parking (base/park.c): one scheduler
 * sleeps in the set, a ready fd or a wake interrupts it, wake-one still wakes exactly one,
 * a deadline still ends its sleep. Then the real runtime, which has no thread for the
 * network: actors echo over TCP, a ready fd wakes a parked scheduler, timers fire while the
 * only scheduler sleeps in the set, and an accept out of fds returns the error and backs off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/netpoll.h"
#include "base/park.h"
#include "smarm.h"

#define MAX_PID 4096

/* The wakes the reactor made, per pid. */
typedef struct recorder {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int wakes[MAX_PID];
    int total;
} recorder;

static void record(void *ctx, uint64_t pid)
{
    recorder *r = ctx;
    pthread_mutex_lock(&r->lock);
    if (pid < MAX_PID)
        r->wakes[pid]++;
    r->total++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

static recorder *recorder_new(void)
{
    recorder *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    return r;
}

static void recorder_free(recorder *r)
{
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
}

/* Waits up to ms for the total number of wakes to reach n; returns the total. */
static int wait_total(recorder *r, int n, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    while (r->total < n && pthread_cond_timedwait(&r->cond, &r->lock, &dl) == 0) {
    }
    int t = r->total;
    pthread_mutex_unlock(&r->lock);
    return t;
}

static int wakes_of(recorder *r, uint64_t pid)
{
    pthread_mutex_lock(&r->lock);
    int n = r->wakes[pid];
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* A thread blocked in netpoll_wait that records every pid it gets, started by the first arm
 * (the set exists from then on). */
typedef void (*reactor_wake_fn)(void *ctx, uint64_t pid);
enum { REACTOR_READ = NETPOLL_READ, REACTOR_WRITE = NETPOLL_WRITE };

typedef struct reactor {
    netpoll np;
    reactor_wake_fn wake;
    void *ctx;
    int started;
    _Atomic int stop;
    pthread_t thread;
} reactor;

static void *reactor_main(void *arg)
{
    reactor *r = arg;
    uint64_t pids[64];
    while (!atomic_load(&r->stop)) {
        int n = netpoll_wait(&r->np, UINT64_MAX, pids, 64);
        for (int i = 0; i < n; i++)
            r->wake(r->ctx, pids[i]);
    }
    return NULL;
}

static reactor *reactor_new(reactor_wake_fn wake, void *ctx)
{
    reactor *r = calloc(1, sizeof *r);
    netpoll_init(&r->np);
    r->wake = wake;
    r->ctx = ctx;
    return r;
}

static int reactor_arm(reactor *r, int fd, unsigned events, uint64_t pid, int *added)
{
    int rc = netpoll_arm(&r->np, fd, events, pid, added);
    if (rc == 0 && !r->started) {
        r->started = 1;
        assert_int_equal(pthread_create(&r->thread, NULL, reactor_main, r), 0);
    }
    return rc;
}

static void reactor_free(reactor *r)
{
    if (r->started) {
        atomic_store(&r->stop, 1);
        netpoll_interrupt(&r->np);
        pthread_join(r->thread, NULL);
    }
    netpoll_destroy(&r->np);
    free(r);
}

/* Waits up to 5 s for fd's waiter word (0 reading, 1 writing) to say READY. */
static int wait_marked(netpoll *np, int fd, int dir)
{
    netpoll_fd *c = atomic_load(&np->fds[fd / NETPOLL_FD_CHUNK]);
    for (int i = 0; i < 5000; i++) {
        if (c && atomic_load(&c[fd % NETPOLL_FD_CHUNK].waiter[dir]) == UINT64_MAX)
            return 1;
        usleep(1000);
        c = atomic_load(&np->fds[fd / NETPOLL_FD_CHUNK]);
    }
    return 0;
}

static void wakes_the_armed_pid_when_data_comes(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 7, &added), 0);
    assert_int_equal(added, 1);
    /* nothing to read: no wake */
    assert_int_equal(wait_total(rec, 1, 50), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(wait_total(rec, 1, 5000), 1);
    assert_int_equal(wakes_of(rec, 7), 1);
    /* no waiter now: more data marks the fd READY and wakes nobody */
    assert_int_equal(write(sv[1], "y", 1), 1);
    assert_true(wait_marked(&r->np, sv[0], 0));
    assert_int_equal(wait_total(rec, 2, 50), 1);
    /* the next arm takes the mark instead of parking: the caller tries again */
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 9, &added), 1);
    /* it reads to EAGAIN and arms: parked now, and the next edge names the new waiter */
    char buf[8];
    assert_int_equal(read(sv[0], buf, sizeof buf), 2);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 9, &added), 0);
    assert_int_equal(wait_total(rec, 2, 50), 1);
    assert_int_equal(write(sv[1], "z", 1), 1);
    assert_int_equal(wait_total(rec, 2, 5000), 2);
    assert_int_equal(wakes_of(rec, 9), 1);
    assert_int_equal(wakes_of(rec, 7), 1);
    /* the woken waiter takes the edge before its try, so its next arm parks */
    assert_int_equal(netpoll_take_ready(&r->np, sv[0], NETPOLL_READ), 1);
    assert_int_equal(netpoll_take_ready(&r->np, sv[0], NETPOLL_READ), 0);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 9, &added), 0);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    recorder_free(rec);
}

static void data_before_the_arm_still_wakes(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    /* the waiter saw EAGAIN, then data came, then it armed */
    char c;
    assert_int_equal(read(sv[0], &c, 1), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 3, &added), 0);
    assert_int_equal(wait_total(rec, 1, 5000), 1);
    assert_int_equal(wakes_of(rec, 3), 1);
    /* writable is ready at once too; a peer's close (hang-up) wakes a reader */
    int sv2[2], added2 = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv2), 0);
    assert_int_equal(reactor_arm(r, sv2[0], REACTOR_WRITE, 4, &added2), 0);
    assert_int_equal(wait_total(rec, 2, 5000), 2);
    assert_int_equal(reactor_arm(r, sv2[0], REACTOR_READ, 5, &added2), 0);
    assert_int_equal(wait_total(rec, 3, 50), 2);
    close(sv2[1]);
    assert_int_equal(wait_total(rec, 3, 5000), 3);
    assert_int_equal(wakes_of(rec, 5), 1);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    close(sv2[0]);
    recorder_free(rec);
}

/* A writer waiting for room on a socket whose peer half-closed (shut its sending side, and
 * still reads) is not woken until there is room: the half-close is a reader's event, and it
 * stays set, so it would wake every arm of the writer at once (a busy loop). */
static void a_half_close_does_not_wake_a_writer(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(shutdown(sv[1], SHUT_WR), 0);
    static char buf[65536];
    while (send(sv[0], buf, sizeof buf, MSG_NOSIGNAL) > 0) {
    }
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_WRITE, 21, &added), 0);
    assert_int_equal(wait_total(rec, 1, 100), 0);
    /* a reader finds it: the registration reported it as an edge (READY) */
    assert_true(wait_marked(&r->np, sv[0], 0));
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 22, &added), 1);
    /* and room wakes the writer */
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_WRITE, 23, &added), 0);
    while (recv(sv[1], buf, sizeof buf, 0) > 0) {
    }
    assert_int_equal(wait_total(rec, 1, 5000), 1);
    assert_int_equal(wakes_of(rec, 23), 1);
    assert_int_equal(wakes_of(rec, 21), 0);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    recorder_free(rec);
}

/* The owner closes an fd while the reactor thread may be delivering its event: a late
 * event only names a pid (the reactor touches no socket), so nothing breaks; and a new fd
 * with the closed one's number is armed afresh and wakes its own waiter. */
static void close_racing_a_wait_is_harmless(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    for (int i = 0; i < 200; i++) {
        int sv[2], added = 0;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
        assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 11, &added), 0);
        assert_int_equal(write(sv[1], "x", 1), 1); /* the event races the close */
        close(sv[0]);
        close(sv[1]);
    }
    int before = wait_total(rec, 0, 0);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 12, &added), 0);
    int reused = sv[0];
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(sv[0], reused); /* the lowest free number */
    added = 0;
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 13, &added), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_true(wait_total(rec, before + 1, 5000) > before);
    /* late events of the loop above may still land; the new fd's wake must */
    for (int k = 0; k < 500 && wakes_of(rec, 13) == 0; k++)
        usleep(10000);
    assert_int_equal(wakes_of(rec, 13), 1);
    assert_int_equal(wakes_of(rec, 12), 0);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    recorder_free(rec);
}

/* A closed fd's marks do not outlive it: a new fd of the same number parks its first waiter
 * (no stale READY) and wakes it on data. */
static void a_reused_fd_starts_without_the_old_marks(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 31, &added), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(wait_total(rec, 1, 5000), 1);
    assert_true(wait_marked(&r->np, sv[0], 0));
    assert_true(wait_marked(&r->np, sv[0], 1));
    int reused = sv[0];
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(sv[0], reused);
    added = 0;
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 32, &added), 0);
    assert_int_equal(wait_total(rec, 2, 50), 1);
    assert_int_equal(write(sv[1], "y", 1), 1);
    assert_int_equal(wait_total(rec, 2, 5000), 2);
    assert_int_equal(wakes_of(rec, 32), 1);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    recorder_free(rec);
}

/* A sleeping poller whose only events are edges nobody waits for (the writable edge that a
 * registration reports to a reader's fd) sleeps on until its deadline. */
static void edges_nobody_waits_for_do_not_end_a_sleep(void **state)
{
    (void)state;
    netpoll np;
    netpoll_init(&np);
    int sv[2], added = 0;
    uint64_t pids[4];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(netpoll_arm(&np, sv[0], NETPOLL_READ, 5, &added), 0);
    uint64_t t0 = park_now_ns();
    assert_int_equal(netpoll_wait(&np, t0 + 30000000, pids, 4), 0);
    assert_true(park_now_ns() >= t0 + 30000000);
    assert_true(wait_marked(&np, sv[0], 1)); /* the edge was seen, and only marked */
    netpoll_destroy(&np);
    close(sv[0]);
    close(sv[1]);
}

/* A writer thread; bytes go out at uneven moments so that they land anywhere between a
 * reader's failed read, its arm and its park. */
typedef struct race_writer {
    int fd, n;
} race_writer;

static void *race_writer_main(void *arg)
{
    race_writer *w = arg;
    unsigned seed = 12345;
    for (int i = 0; i < w->n; i++) {
        while (write(w->fd, "x", 1) != 1)
            sched_yield();
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 16) % 8;
        if (k == 0)
            usleep(50);
        else if (k < 4)
            sched_yield();
    }
    return NULL;
}

/* The arming protocol against a writer and two pollers (one sleeping in the set, one
 * polling without waiting): a reader that reads to EAGAIN, arms, and parks until woken
 * (taking the edge before its next read) gets every byte; a lost edge would leave it parked
 * with bytes unread (its wait would time out). */
static _Atomic int race_stop;
static void *race_busy_poller(void *arg)
{
    reactor *r = arg;
    uint64_t pids[8];
    while (!atomic_load(&race_stop)) {
        int n = netpoll_wait(&r->np, 0, pids, 8);
        for (int i = 0; i < n; i++)
            r->wake(r->ctx, pids[i]);
        sched_yield();
    }
    return NULL;
}

static void an_edge_racing_the_arm_is_never_lost(void **state)
{
    (void)state;
    enum { N = 5000 };
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    char buf[256];
    assert_int_equal(read(sv[0], buf, sizeof buf), -1);
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 77, &added), 0);
    atomic_store(&race_stop, 0);
    pthread_t busy, wt;
    assert_int_equal(pthread_create(&busy, NULL, race_busy_poller, r), 0);
    race_writer w = {sv[1], N};
    assert_int_equal(pthread_create(&wt, NULL, race_writer_main, &w), 0);
    int got = 0, parks = 0, retries = 0, seen = 0;
    while (got < N) {
        ssize_t n = read(sv[0], buf, sizeof buf);
        if (n > 0) {
            got += (int)n;
            continue;
        }
        assert_int_equal(errno, EAGAIN);
        /* now and then a pause between the EAGAIN and the arm, where bytes come */
        if (got % 7 == 3)
            usleep(20);
        int rc = reactor_arm(r, sv[0], REACTOR_READ, 77, &added);
        assert_true(rc >= 0);
        if (rc == 1) {
            retries++;
            continue;
        }
        parks++;
        int t = wait_total(rec, seen + 1, 5000);
        assert_true(t > seen); /* parked with an edge lost: never woken */
        seen = t;
        netpoll_take_ready(&r->np, sv[0], NETPOLL_READ);
    }
    assert_int_equal(got, N);
    assert_true(parks > 0);
    assert_true(retries > 0);
    atomic_store(&race_stop, 1);
    pthread_join(wt, NULL);
    pthread_join(busy, NULL);
    reactor_free(r);
    close(sv[0]);
    close(sv[1]);
    recorder_free(rec);
}

static void a_thousand_fds_all_wake(void **state)
{
    (void)state;
    enum { N = 1000 };
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2 * N + 64) {
        rlim_t want = 2 * N + 64;
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < 2 * N + 64)
            skip();
    }
    recorder *rec = recorder_new();
    reactor *r = reactor_new(record, rec);
    static int sv[N][2], added[N];
    for (int i = 0; i < N; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv[i]), 0);
        added[i] = 0;
        assert_int_equal(reactor_arm(r, sv[i][0], REACTOR_READ, (uint64_t)i + 1, &added[i]), 0);
    }
    assert_int_equal(wait_total(rec, 1, 20), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(write(sv[i][1], "x", 1), 1);
    assert_int_equal(wait_total(rec, N, 10000), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(wakes_of(rec, (uint64_t)i + 1), 1);
    reactor_free(r);
    for (int i = 0; i < N; i++) {
        close(sv[i][0]);
        close(sv[i][1]);
    }
    recorder_free(rec);
}

static void a_poller_never_armed_has_no_set(void **state)
{
    (void)state;
    netpoll np;
    netpoll_init(&np);
    assert_false(netpoll_ready(&np));
    netpoll_destroy(&np);
}

/* A sleep in the set ends at its deadline with no event, and at once on an interrupt (also
 * one that came before the sleep: the eventfd keeps it). */
static void a_poll_ends_at_its_deadline_or_an_interrupt(void **state)
{
    (void)state;
    netpoll np;
    netpoll_init(&np);
    int sv[2], added = 0;
    uint64_t pids[4];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(netpoll_arm(&np, sv[0], NETPOLL_READ, 5, &added), 0);
    assert_int_equal(netpoll_wait(&np, 0, pids, 4), 0);
    uint64_t t0 = park_now_ns();
    assert_int_equal(netpoll_wait(&np, t0 + 30000000, pids, 4), 0);
    assert_true(park_now_ns() >= t0 + 30000000);
    netpoll_interrupt(&np);
    t0 = park_now_ns();
    assert_int_equal(netpoll_wait(&np, UINT64_MAX, pids, 4), 0);
    assert_true(park_now_ns() - t0 < 2000000000ull);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(netpoll_wait(&np, UINT64_MAX, pids, 4), 1);
    assert_int_equal(pids[0], 5);
    netpoll_destroy(&np);
    close(sv[0]);
    close(sv[1]);
}

/* Two "schedulers" of a park set go idle; the first sleeps in the poller's set, the second
 * on its futex. */
typedef struct poll_sleeper {
    park_set *ps;
    int id;
    _Atomic int woke, npids;
    uint64_t pid;
    pthread_t t;
} poll_sleeper;

static void *poll_sleeper_main(void *arg)
{
    poll_sleeper *z = arg;
    uint64_t pids[8];
    park_set_idle_begin(z->ps, z->id);
    int n = park_set_wait_poll(z->ps, z->id, 0, pids, 8);
    if (n > 0)
        z->pid = pids[0];
    atomic_store(&z->npids, n);
    atomic_store(&z->woke, 1);
    return NULL;
}

static int wait_flag(_Atomic int *f, int ms)
{
    for (int i = 0; i < ms && !atomic_load(f); i++)
        usleep(1000);
    return atomic_load(f);
}

static void start_sleeper(poll_sleeper *z, park_set *ps, int id)
{
    z->ps = ps;
    z->id = id;
    atomic_store(&z->woke, 0);
    atomic_store(&z->npids, 0);
    assert_int_equal(pthread_create(&z->t, NULL, poll_sleeper_main, z), 0);
    /* asleep: its idle bit is set and it holds the poller role or is parked on its futex
     * (state 2, PARKED); then a little longer for the poller to enter epoll_wait */
    for (int i = 0; i < 5000; i++) {
        if ((atomic_load(&ps->idle) & (1ull << id)) &&
            (atomic_load(&ps->np->poller) == id || atomic_load(&ps->parkers[id].state) == 2))
            break;
        usleep(1000);
    }
    usleep(20000);
}

/* A ready fd wakes the scheduler sleeping in the set with the fd's pid, and no other; a
 * wake-one picks the futex sleeper first (the poller goes on watching) and wakes exactly one;
 * a second wake-one interrupts the poller. */
static void a_ready_fd_or_a_wake_interrupts_the_poller(void **state)
{
    (void)state;
    netpoll np;
    netpoll_init(&np);
    park_set ps;
    park_set_init(&ps, 2, &np);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(netpoll_arm(&np, sv[0], NETPOLL_READ, 42, &added), 0);

    poll_sleeper a, b;
    start_sleeper(&a, &ps, 0);
    assert_int_equal(atomic_load(&np.poller), 0);
    start_sleeper(&b, &ps, 1); /* the role is taken: it sleeps on its futex */
    assert_int_equal(atomic_load(&np.poller), 0);
    assert_int_equal(write(sv[1], "x", 1), 1);
    assert_int_equal(wait_flag(&a.woke, 5000), 1);
    pthread_join(a.t, NULL);
    assert_int_equal(atomic_load(&a.npids), 1);
    assert_int_equal(a.pid, 42);
    usleep(20000);
    assert_int_equal(atomic_load(&b.woke), 0);

    /* b still sleeps on its futex; a goes back into the set */
    start_sleeper(&a, &ps, 0);
    assert_int_equal(atomic_load(&np.poller), 0);
    assert_true(park_set_wake_one(&ps));
    assert_int_equal(wait_flag(&b.woke, 5000), 1);
    pthread_join(b.t, NULL);
    usleep(20000);
    assert_int_equal(atomic_load(&a.woke), 0); /* exactly one woke */
    assert_true(park_set_wake_one(&ps));
    assert_int_equal(wait_flag(&a.woke, 5000), 1);
    pthread_join(a.t, NULL);
    assert_int_equal(atomic_load(&a.npids), 0);
    assert_int_equal(atomic_load(&ps.idle), 0);
    assert_int_equal(atomic_load(&np.poller), -1);
    assert_false(park_set_wake_one(&ps));
    netpoll_destroy(&np);
    close(sv[0]);
    close(sv[1]);
}

/* A busy scheduler's poll that does not wait, over and over. */
static _Atomic int busy_stop;
static void *busy_poller(void *arg)
{
    netpoll *np = arg;
    uint64_t pids[8];
    while (!atomic_load(&busy_stop))
        netpoll_wait(np, 0, pids, 8);
    return NULL;
}

/* A wake that lands between the sleeper taking the role and sleeping is not lost: the permit
 * or the eventfd ends the sleep; nor is one whose eventfd event a busy scheduler's poll
 * takes. Many rounds of a sleeper against a waker and a busy poller. */
static void a_wake_racing_the_poller_is_not_lost(void **state)
{
    (void)state;
    netpoll np;
    netpoll_init(&np);
    park_set ps;
    park_set_init(&ps, 1, &np);
    int sv[2], added = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(netpoll_arm(&np, sv[0], NETPOLL_READ, 9, &added), 0);
    atomic_store(&busy_stop, 0);
    pthread_t busy;
    assert_int_equal(pthread_create(&busy, NULL, busy_poller, &np), 0);
    for (int i = 0; i < 300; i++) {
        poll_sleeper z = {.ps = &ps, .id = 0};
        assert_int_equal(pthread_create(&z.t, NULL, poll_sleeper_main, &z), 0);
        /* wake as soon as it is idle, whether or not it sleeps yet; a sleeper may also end
         * on its own (an interrupt a round before left in the eventfd: a spurious wake,
         * which the design allows), and then its idle bit is gone and nothing is to wake */
        while (!atomic_load(&z.woke) && !park_set_wake_one(&ps))
            sched_yield();
        assert_int_equal(wait_flag(&z.woke, 5000), 1);
        pthread_join(z.t, NULL);
    }
    atomic_store(&busy_stop, 1);
    pthread_join(busy, NULL);
    netpoll_destroy(&np);
    close(sv[0]);
    close(sv[1]);
}

/* Runs code as the root actor of a fresh runtime; returns its exit status. */
static int run_lua(const char *code, int schedulers)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = schedulers;
    cfg.max_actors = 1024;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    int status = -1;
    assert_int_equal(smarm_run_string(rt, code, 0, NULL, &status), 0);
    smarm_runtime_free(rt);
    return status;
}

/* 20 client actors, each echoing 50 lines through a server actor per connection: every
 * wait in between is a reactor wake. */
static const char *echo_code =
    "local s = require 'smarm'\n"
    "local net = require 'smarm.net'\n"
    "local srv = assert(net.listen('127.0.0.1', 0))\n"
    "local port = srv:port()\n"
    "local N = 20\n"
    "for i = 1, N do\n"
    "   s.spawn(function(p, root, i)\n"
    "      local net = require 'smarm.net'\n"
    "      local c = assert(net.connect('127.0.0.1', p, 5))\n"
    "      for k = 1, 50 do\n"
    "         assert(c:send(i .. ':' .. k .. '\\n'))\n"
    "         assert(c:recv('*l', 5) == i .. ':' .. k, 'bad echo')\n"
    "      end\n"
    "      c:close()\n"
    "      require('smarm').send(root, i)\n"
    "   end, port, s.self(), i)\n"
    "end\n"
    "for _ = 1, N do\n"
    "   local c = assert(srv:accept(5))\n"
    "   s.spawn(function(sock)\n"
    "      while true do\n"
    "         local l = sock:recv('*l', 5)\n"
    "         if not l then return end\n"
    "         assert(sock:send(l .. '\\n'))\n"
    "      end\n"
    "   end, c)\n"
    "end\n"
    "for _ = 1, N do assert(s.recv(10), 'a client did not finish') end\n";

static void actors_echo_through_the_network_poller(void **state)
{
    (void)state;
    assert_int_equal(run_lua(echo_code, 2), 0);
    assert_int_equal(run_lua(echo_code, 1), 0);
}

/* A thread outside the runtime (a plain pthread) writes to a socket an actor waits on, while
 * every scheduler sleeps: the scheduler sleeping in the set wakes for it; there is no thread
 * for the network in between. */
static void *ext_server(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    usleep(100000); /* every scheduler is parked by now */
    assert_int_equal(write(fd, "hi\n", 3), 3);
    char buf[8];
    assert_int_equal(read(fd, buf, 3), 3);
    assert_memory_equal(buf, "ok\n", 3);
    close(fd);
    return NULL;
}

static void a_ready_fd_wakes_a_parked_scheduler(void **state)
{
    (void)state;
    for (int S = 1; S <= 2; S++) {
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof sa;
        assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(lfd, 4), 0);
        assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
        char code[512];
        snprintf(code, sizeof code,
                 "local net = require 'smarm.net'\n"
                 "local c = assert(net.connect('127.0.0.1', %d, 5))\n"
                 "assert(c:recv('*l', 5) == 'hi', 'no line')\n"
                 "assert(c:send('ok\\n'))\n",
                 ntohs(sa.sin_port));
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, ext_server, &lfd), 0);
        assert_int_equal(run_lua(code, S), 0);
        pthread_join(t, NULL);
        close(lfd);
    }
}

/* The only scheduler sleeps in the set (an actor waits on a socket) and holds the timekeeper
 * role: timers still fire (sleeps end, a recv times out) while no fd is ready. */
static const char *timer_code =
    "local s = require 'smarm'\n"
    "local net = require 'smarm.net'\n"
    "local srv = assert(net.listen('127.0.0.1', 0))\n"
    "local c = assert(net.connect('127.0.0.1', srv:port(), 5))\n"
    "local peer = assert(srv:accept(5))\n"
    "s.spawn(function(sock) sock:recv('*l', 5) end, peer)\n"
    "for _ = 1, 5 do\n"
    "   local t0 = s.now()\n"
    "   s.sleep(0.02)\n"
    "   local dt = s.now() - t0\n"
    "   assert(dt >= 0.019 and dt < 2, 'sleep took ' .. dt)\n"
    "end\n"
    "local t0 = s.now()\n"
    "local l, err = c:recv('*l', 0.05)\n"
    "assert(l == nil and err == 'timeout', 'recv said ' .. tostring(err))\n"
    "assert(s.now() - t0 >= 0.049, 'timed out early')\n"
    "c:send('bye\\n')\n";

static void timers_fire_while_the_scheduler_sleeps_in_the_set(void **state)
{
    (void)state;
    assert_int_equal(run_lua(timer_code, 1), 0);
    assert_int_equal(run_lua(timer_code, 2), 0);
}

/* Out of fds: accept returns the OS's error, and the next accept first waits out the back-off
 * instead of failing again at once. Connections are made until no fd is left, then one
 * client closes: its fd goes to the last connect, and the pending accept finds none. */
static const char *emfile_code =
    "local s = require 'smarm'\n"
    "local net = require 'smarm.net'\n"
    "local srv = assert(net.listen('127.0.0.1', 0))\n"
    "local clients = {}\n"
    "while true do\n"
    "   local c, err = net.connect('127.0.0.1', srv:port(), 5)\n"
    "   if not c then\n"
    "      assert(err:find('open files'), 'connect said ' .. tostring(err))\n"
    "      break\n"
    "   end\n"
    "   clients[#clients + 1] = c\n"
    "   assert(#clients < 1000, 'the fd limit did not apply')\n"
    "end\n"
    "table.remove(clients):close()\n"
    "clients[#clients + 1] = assert(net.connect('127.0.0.1', srv:port(), 5))\n"
    "local sock, err = srv:accept(1)\n"
    "assert(sock == nil and err:find('open files'), 'accept said ' .. tostring(err))\n"
    "local t0 = s.now()\n"
    "sock, err = srv:accept(1)\n"
    "local dt = s.now() - t0\n"
    "assert(sock == nil and err:find('open files'), 'accept again said ' .. tostring(err))\n"
    "assert(dt >= 0.05, 'the second accept did not back off: ' .. dt)\n"
    "for i = 1, 4 do table.remove(clients):close() end\n"
    "s.sleep(0.15)\n"
    "assert(srv:accept(1), 'accept after fds came back')\n";

static void accept_out_of_fds_returns_the_error_and_backs_off(void **state)
{
    (void)state;
    struct rlimit saved, rl;
    getrlimit(RLIMIT_NOFILE, &saved);
    rl = saved;
    rl.rlim_cur = 64;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    int status = run_lua(emfile_code, 1);
    setrlimit(RLIMIT_NOFILE, &saved);
    assert_int_equal(status, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wakes_the_armed_pid_when_data_comes),
        cmocka_unit_test(data_before_the_arm_still_wakes),
        cmocka_unit_test(a_half_close_does_not_wake_a_writer),
        cmocka_unit_test(close_racing_a_wait_is_harmless),
        cmocka_unit_test(a_reused_fd_starts_without_the_old_marks),
        cmocka_unit_test(edges_nobody_waits_for_do_not_end_a_sleep),
        cmocka_unit_test(an_edge_racing_the_arm_is_never_lost),
        cmocka_unit_test(a_thousand_fds_all_wake),
        cmocka_unit_test(a_poller_never_armed_has_no_set),
        cmocka_unit_test(a_poll_ends_at_its_deadline_or_an_interrupt),
        cmocka_unit_test(a_ready_fd_or_a_wake_interrupts_the_poller),
        cmocka_unit_test(a_wake_racing_the_poller_is_not_lost),
        cmocka_unit_test(actors_echo_through_the_network_poller),
        cmocka_unit_test(a_ready_fd_wakes_a_parked_scheduler),
        cmocka_unit_test(timers_fire_while_the_scheduler_sleeps_in_the_set),
        cmocka_unit_test(accept_out_of_fds_returns_the_error_and_backs_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
