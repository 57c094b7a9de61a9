/* Tests of the reactor (io/reactor.c) with a recording wake function: an armed fd wakes its
 * pid when data comes and not before, data that came before the arm still wakes (the arm
 * reports the level), one arm is one wake, a re-arm names the new waiter, a peer's
 * half-close wakes readers but not a writer waiting for room, a close racing a wait is harmless,
 * and a thousand fds all wake. Then the real runtime: actors echo over TCP through the reactor, and
 * an accept out of fds returns the error and backs off. */
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/reactor.h"
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
    /* one-shot: more data does not wake again until the next arm */
    assert_int_equal(write(sv[1], "y", 1), 1);
    assert_int_equal(wait_total(rec, 2, 50), 1);
    /* a re-arm names the new waiter, and the level (unread data) wakes it at once */
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 9, &added), 0);
    assert_int_equal(wait_total(rec, 2, 5000), 2);
    assert_int_equal(wakes_of(rec, 9), 1);
    assert_int_equal(wakes_of(rec, 7), 1);
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
    /* a reader is woken by it */
    int added1 = 1;
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_READ, 22, &added1), 0);
    assert_int_equal(wait_total(rec, 1, 5000), 1);
    assert_int_equal(wakes_of(rec, 22), 1);
    /* and room wakes the writer */
    assert_int_equal(reactor_arm(r, sv[0], REACTOR_WRITE, 23, &added), 0);
    while (recv(sv[1], buf, sizeof buf, 0) > 0) {
    }
    assert_int_equal(wait_total(rec, 2, 5000), 2);
    assert_int_equal(wakes_of(rec, 23), 1);
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

static void a_reactor_never_armed_frees_without_a_thread(void **state)
{
    (void)state;
    recorder *rec = recorder_new();
    reactor_free(reactor_new(record, rec));
    recorder_free(rec);
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

static void actors_echo_through_the_reactor(void **state)
{
    (void)state;
    assert_int_equal(run_lua(echo_code, 2), 0);
    assert_int_equal(run_lua(echo_code, 1), 0);
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
        cmocka_unit_test(a_thousand_fds_all_wake),
        cmocka_unit_test(a_reactor_never_armed_frees_without_a_thread),
        cmocka_unit_test(actors_echo_through_the_reactor),
        cmocka_unit_test(accept_out_of_fds_returns_the_error_and_backs_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
