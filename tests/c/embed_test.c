/* Embedding: a host program starts the runtime, its threads become actors through host
 * handles, and it stops the runtime. The Lua run on a host state checks its own results
 * with assert; a failure fails the test with the Lua error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "smarm.h"

/* A runtime of 2 schedulers and 4096 actors whose modules are found in dir (NULL: the
 * default); started_rt also starts it, stop_rt stops and frees it. */
static smarm_runtime *new_rt_in(const char *dir)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 2;
    cfg.max_actors = 4096;
    if (dir)
        cfg.app_dir = dir;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    return rt;
}

static smarm_runtime *new_rt(void) { return new_rt_in(NULL); }

static smarm_runtime *started_rt(void)
{
    smarm_runtime *rt = new_rt();
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    return rt;
}

static void stop_rt(smarm_runtime *rt)
{
    assert_int_equal(smarm_stop(rt, 1, NULL), 0);
    smarm_runtime_free(rt);
}

/* Runs code on L with the given pid argument as ...; fails the test with its error. */
static void lua_ok(lua_State *L, const char *code, double arg)
{
    int top = lua_gettop(L);
    if (luaL_loadstring(L, code) != 0)
        fail_msg("load: %s", lua_tostring(L, -1));
    lua_pushnumber(L, arg);
    if (lua_pcall(L, 1, 0, 0) != 0)
        fail_msg("lua: %s", lua_tostring(L, -1));
    lua_settop(L, top);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- a host module for actors: probe.add(a, b), probe.mark(n) ---- */

static _Atomic int probe_marks;

static int probe_add(lua_State *L)
{
    lua_pushnumber(L, luaL_checknumber(L, 1) + luaL_checknumber(L, 2));
    return 1;
}

static int probe_mark(lua_State *L)
{
    atomic_fetch_add(&probe_marks, (int)luaL_checkinteger(L, 1));
    return 0;
}

static int open_probe(lua_State *L)
{
    lua_createtable(L, 0, 2);
    lua_pushcfunction(L, probe_add);
    lua_setfield(L, -2, "add");
    lua_pushcfunction(L, probe_mark);
    lua_setfield(L, -2, "mark");
    return 1;
}

/* a gen_server callback module offered by the host */
static int open_counter(lua_State *L)
{
    const char *src = "local M = {}\n"
                      "function M.init(n) return n end\n"
                      "function M.handle_call(req, from, n)\n"
                      "   n = n + req\n"
                      "   return 'reply', n, n\n"
                      "end\n"
                      "return M\n";
    if (luaL_loadstring(L, src) != 0)
        return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

/* probe.seq(id): records the order in which workers finished */
static _Atomic int seq_log[8], seq_n;

static int probe_seq(lua_State *L)
{
    int i = atomic_fetch_add(&seq_n, 1);
    if (i < 8)
        atomic_store(&seq_log[i], (int)luaL_checkinteger(L, 1));
    return 0;
}

/* a supervised worker that traps exits and records when it is shut down */
static int open_tworker(lua_State *L)
{
    const char *src = "local M = {}\n"
                      "function M.run(id)\n"
                      "   local s = require 'smarm'\n"
                      "   local rx = s.trap_exit(true)\n"
                      "   s.register('w' .. id)\n"
                      "   while true do\n"
                      "      local sig = rx:recv()\n"
                      "      if sig.reason == 'shutdown' then\n"
                      "         require('seqprobe').seq(id)\n"
                      "         return\n"
                      "      end\n"
                      "   end\n"
                      "end\n"
                      "return M\n";
    if (luaL_loadstring(L, src) != 0)
        return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

static int open_seqprobe(lua_State *L)
{
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, probe_seq);
    lua_setfield(L, -2, "seq");
    return 1;
}

/* opener.try(): what smarm_host_open_rc says when an actor's C function calls it */
static smarm_runtime *opener_rt;

static int opener_try(lua_State *L)
{
    smarm_host *h = NULL;
    lua_pushinteger(L, smarm_host_open_rc(opener_rt, &h));
    return 1;
}

static int open_opener(lua_State *L)
{
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, opener_try);
    lua_setfield(L, -2, "try");
    return 1;
}

/* ---- tests ---- */

static void host_and_actor_send_both_ways(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    assert_true(smarm_host_pid(h) != 0);
    lua_State *L = smarm_host_lua(h);
    assert_non_null(L);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local me = ...\n"
           "assert(s.self() == me)\n"
           "local echo = s.spawn(function()\n"
           "   local s = require 'smarm'\n"
           "   while true do\n"
           "      local m = s.recv()\n"
           "      if m == 'stop' then return end\n"
           "      s.send(m.from, {x = m.x * 2, by = s.self()})\n"
           "   end\n"
           "end)\n"
           "for i = 1, 100 do\n"
           "   assert(s.send(echo, {from = s.self(), x = i}))\n"
           "   local r = assert(s.recv(5), 'no reply')\n"
           "   assert(r.x == 2 * i and r.by == echo)\n"
           "end\n"
           "s.send(echo, 'stop')\n"
           "-- an actor that sends first\n"
           "s.spawn(function(to) require('smarm').send(to, 'hello host') end, s.self())\n"
           "assert(s.recv(5) == 'hello host')\n",
           (double)smarm_host_pid(h));
    assert_int_equal(smarm_host_close(h), 0);
    int status = -1;
    assert_int_equal(smarm_stop(rt, 1, &status), 0);
    assert_int_equal(status, 0);
    smarm_runtime_free(rt);
}

static void host_recv_timeout_and_poll(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_ok(smarm_host_lua(h),
           "local s = require 'smarm'\n"
           "local t0 = s.now()\n"
           "local v, why = s.recv(0)\n"
           "assert(v == nil and why == 'timeout')\n"
           "assert(s.now() - t0 < 0.5, 'a poll does not wait')\n"
           "t0 = s.now()\n"
           "v, why = s.recv(0.05)\n"
           "assert(v == nil and why == 'timeout')\n"
           "local dt = s.now() - t0\n"
           "assert(dt >= 0.045 and dt < 5, 'waited ' .. dt)\n"
           "s.sleep(0.01)\n"
           "-- a message sent later ends the wait\n"
           "s.spawn(function(to) local s = require 'smarm'; s.sleep(0.02); s.send(to, 7) end,"
           " s.self())\n"
           "assert(s.recv(5) == 7)\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static int readable(int fd, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, ms);
    return n == 1 && (p.revents & POLLIN);
}

static void host_fd_readable_while_inbox_nonempty(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    int fd = smarm_host_fd(h);
    assert_true(fd >= 0);
    assert_false(readable(fd, 0));
    uint64_t me = smarm_host_pid(h);
    assert_int_equal(smarm_send_string(rt, me, "one", 3), 0);
    assert_int_equal(smarm_send_string(rt, me, "two", 3), 0);
    assert_true(readable(fd, 5000));
    lua_State *L = smarm_host_lua(h);
    lua_ok(L, "assert(require('smarm').recv(0) == 'one')", 0);
    assert_true(readable(fd, 0)); /* one left */
    lua_ok(L, "assert(require('smarm').recv(0) == 'two')", 0);
    assert_false(readable(fd, 0));
    /* an actor's message makes it readable again, within the poll's timeout */
    lua_ok(L,
           "-- long enough that the poll below comes first, even on a loaded machine\n"
           "local s = require 'smarm'\n"
           "s.spawn(function(to) local s = require 'smarm'; s.sleep(0.3);"
           " s.send(to, {k = 1}) end, s.self())\n",
           0);
    assert_false(readable(fd, 0));
    assert_true(readable(fd, 5000));
    lua_ok(L, "assert(require('smarm').recv(0).k == 1)", 0);
    assert_false(readable(fd, 50));
    assert_int_equal(smarm_host_close(h), 0);
    assert_int_equal(smarm_host_fd(h), SMARM_ECLOSED);
    stop_rt(rt);
}

/* A poll loop against actors sending as fast as they can: every message is seen, the
 * loop never sleeps through one (each poll has a timeout), and the fd ends quiet. */
static void host_fd_poll_loop_under_load(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    int fd = smarm_host_fd(h);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "for a = 1, 4 do\n"
           "   s.spawn(function(to) local s = require 'smarm'\n"
           "      for i = 1, 1000 do s.send(to, i) end end, s.self())\n"
           "end\n",
           0);
    int got = 0;
    for (int round = 0; round < 100000 && got < 4000; round++) {
        assert_true(readable(fd, 5000));
        lua_getglobal(L, "require");
        lua_pushstring(L, "smarm");
        lua_call(L, 1, 1);
        for (;;) {
            lua_getfield(L, -1, "recv");
            lua_pushnumber(L, 0);
            lua_call(L, 1, 1);
            int has = !lua_isnil(L, -1);
            lua_pop(L, 1);
            if (!has)
                break;
            got++;
        }
        lua_pop(L, 1);
    }
    assert_int_equal(got, 4000);
    assert_false(readable(fd, 20));
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static void monitors_both_ways(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    smarm_host *h2 = smarm_host_open(rt);
    assert_non_null(h);
    assert_non_null(h2);
    lua_State *L = smarm_host_lua(h);
    /* the host watches an actor */
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local pid = s.spawn(function() require('smarm').recv() ; error('boom') end)\n"
           "local mon = s.monitor(pid)\n"
           "s.send(pid, 'go')\n"
           "local down = assert(mon:recv(5), 'no down notice')\n"
           "assert(down.pid == pid and down.reason == 'error', tostring(down.reason))\n",
           0);
    /* an actor watches the second host, which closes */
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local target = ...\n"
           "_G.watcher = s.spawn(function(target, to)\n"
           "   local s = require 'smarm'\n"
           "   local mon = s.monitor(target)\n"
           "   s.send(to, 'watching')\n"
           "   local d = mon:recv(10)\n"
           "   s.send(to, {reason = d and d.reason, pid = d and d.pid})\n"
           "end, target, s.self())\n"
           "assert(s.recv(5) == 'watching')\n",
           (double)smarm_host_pid(h2));
    uint64_t p2 = smarm_host_pid(h2);
    assert_int_equal(smarm_host_close(h2), 0);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local r = assert(s.recv(5), 'the watcher heard nothing')\n"
           "assert(r.reason == 'normal' and r.pid == ..., tostring(r.reason))\n",
           (double)p2);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

/* A link from a host: trapped, the exit signal arrives on its channel; not trapped, the
 * host is stopped (its waits raise) and its close reports the linked actor's reason. */
static void links_to_a_host(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt), *h2 = smarm_host_open(rt);
    assert_non_null(h);
    assert_non_null(h2);
    lua_ok(smarm_host_lua(h),
           "local s = require 'smarm'\n"
           "local rx = s.trap_exit(true)\n"
           "local pid = s.spawn_link(function() error('linked boom') end)\n"
           "local sig = assert(rx:recv(5), 'no exit signal')\n"
           "assert(sig.from == pid and sig.reason == 'error')\n"
           "s.trap_exit(false)\n"
           "-- a watcher of the second host\n"
           "_G.mon = s.monitor(...)\n",
           (double)smarm_host_pid(h2));
    lua_State *L2 = smarm_host_lua(h2);
    lua_ok(L2, "require('smarm').spawn_link(function() error('boom two') end)", 0);
    assert_int_not_equal(luaL_dostring(L2, "return require('smarm').recv(10)"), 0);
    assert_non_null(strstr(lua_tostring(L2, -1), "stopped"));
    lua_pop(L2, 1);
    assert_int_equal(smarm_host_close(h2), 0);
    lua_ok(smarm_host_lua(h),
           "local d = assert(_G.mon:recv(5), 'no down notice of the host')\n"
           "assert(d.reason == 'error', tostring(d.reason))\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static void gen_server_call_and_preload_from_host(void **state)
{
    (void)state;
    smarm_runtime *rt = new_rt();
    assert_int_equal(smarm_preload(rt, "probe", open_probe), 0);
    assert_int_equal(smarm_preload(rt, "counter", open_counter), 0);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_ok(smarm_host_lua(h),
           "local s = require 'smarm'\n"
           "local gs = require 'smarm.gen_server'\n"
           "local pid = assert(gs.start('counter', 10, {name = 'counter'}))\n"
           "assert(gs.call(pid, 5) == 15)\n"
           "assert(gs.call('counter', 1) == 16)\n"
           "assert(gs.stop(pid, 'normal', 5))\n"
           "-- an actor uses the host's C function\n"
           "s.spawn(function(to)\n"
           "   local s = require 'smarm'\n"
           "   s.send(to, require('probe').add(40, 2))\n"
           "end, s.self())\n"
           "assert(s.recv(5) == 42)\n"
           "assert(require('probe').add(1, 1) == 2)\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static void send_string_to_pid_and_name(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "_G.sink = s.spawn(function(to)\n"
           "   local s = require 'smarm'\n"
           "   s.register('sink')\n"
           "   s.send(to, 'ready')\n"
           "   for i = 1, 2 do s.send(to, {got = s.recv()}) end\n"
           "end, s.self())\n"
           "assert(s.recv(5) == 'ready')\n",
           0);
    lua_getglobal(L, "sink");
    uint64_t sink = (uint64_t)lua_tonumber(L, -1);
    lua_pop(L, 1);
    assert_int_equal(smarm_whereis(rt, "sink"), sink);
    static const char bin[] = {'a', 0, 'b'};
    assert_int_equal(smarm_send_string(rt, sink, bin, 3), 0);
    assert_int_equal(smarm_send_string_name(rt, "sink", "by name", 7), 0);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "assert(s.recv(5).got == 'a\\0b')\n"
           "assert(s.recv(5).got == 'by name')\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static void errors_are_codes(void **state)
{
    (void)state;
    assert_int_equal(smarm_start(NULL, NULL, 0, NULL), SMARM_EINVAL);
    assert_int_equal(smarm_stop(NULL, 1, NULL), SMARM_EINVAL);
    assert_null(smarm_host_open(NULL));
    assert_int_equal(smarm_host_close(NULL), SMARM_EINVAL);
    assert_int_equal(smarm_host_fd(NULL), SMARM_EINVAL);
    assert_null(smarm_host_lua(NULL));
    assert_int_equal(smarm_host_pid(NULL), 0);
    assert_int_equal(smarm_send_string(NULL, 1, "x", 1), SMARM_EINVAL);
    smarm_runtime *rt = new_rt();
    /* not started */
    smarm_host *h = NULL;
    assert_int_equal(smarm_host_open_rc(rt, &h), SMARM_ESTOPPED);
    assert_null(h);
    assert_int_equal(smarm_send_string(rt, 1, "x", 1), SMARM_ESTOPPED);
    assert_int_equal(smarm_stop(rt, 1, NULL), SMARM_ESTOPPED);
    assert_int_equal(smarm_preload(rt, NULL, open_probe), SMARM_EINVAL);
    assert_int_equal(smarm_preload(rt, "x", NULL), SMARM_EINVAL);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), SMARM_EBUSY);
    assert_int_equal(smarm_run_string(rt, "return", 0, NULL, NULL), SMARM_EBUSY);
    assert_int_equal(smarm_send_string(rt, 12345, NULL, 1), SMARM_EINVAL);
    h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    /* a dead pid */
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local pid, mon = s.spawn_monitor(function() end)\n"
           "assert(mon:recv(5))\n"
           "_G.dead = pid\n"
           "local ok, why = s.send(pid, 1)\n"
           "assert(ok == nil and why == 'dead')\n",
           0);
    lua_getglobal(L, "dead");
    uint64_t dead = (uint64_t)lua_tonumber(L, -1);
    lua_pop(L, 1);
    assert_int_equal(smarm_send_string(rt, dead, "x", 1), SMARM_EDEAD);
    assert_int_equal(smarm_send_string(rt, 0, "x", 1), SMARM_EDEAD);
    assert_int_equal(smarm_send_string(rt, UINT64_MAX, "x", 1), SMARM_EDEAD);
    assert_int_equal(smarm_send_string_name(rt, "nobody", "x", 1), SMARM_EDEAD);
    assert_int_equal(smarm_send_string_name(rt, NULL, "x", 1), SMARM_EINVAL);
    /* an actor's C function cannot make its scheduler thread a host */
    opener_rt = rt;
    assert_int_equal(smarm_preload(rt, "opener", open_opener), 0);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "s.spawn(function(to) local s = require 'smarm'\n"
           "   s.send(to, require('opener').try()) end, s.self())\n"
           "assert(s.recv(5) == ..., 'a scheduler thread opened a host')\n",
           (double)SMARM_EINVAL);
    /* a closed handle */
    uint64_t hp = smarm_host_pid(h);
    assert_int_equal(smarm_host_close(h), 0);
    assert_int_equal(smarm_host_close(h), SMARM_ECLOSED);
    assert_int_equal(smarm_host_fd(h), SMARM_ECLOSED);
    assert_null(smarm_host_lua(h));
    assert_int_equal(smarm_host_pid(h), 0);
    assert_int_equal(smarm_send_string(rt, hp, "x", 1), SMARM_EDEAD);
    /* a stopped runtime */
    smarm_host *h2 = smarm_host_open(rt);
    assert_non_null(h2);
    assert_int_equal(smarm_stop(rt, 1, NULL), 0);
    assert_int_equal(smarm_stop(rt, 1, NULL), SMARM_ESTOPPED);
    assert_int_equal(smarm_send_string(rt, hp, "x", 1), SMARM_ESTOPPED);
    assert_int_equal(smarm_host_open_rc(rt, &h), SMARM_ESTOPPED);
    /* the open handle's waits raise now; closing it still works */
    lua_State *L2 = smarm_host_lua(h2);
    assert_int_not_equal(luaL_dostring(L2, "return require('smarm').recv(5)"), 0);
    assert_non_null(strstr(lua_tostring(L2, -1), "stopped"));
    lua_pop(L2, 1);
    assert_int_equal(smarm_host_close(h2), 0);
    for (int e = 0; e >= -10; e--)
        assert_true(strlen(smarm_strerror(e)) > 0 && strcmp(smarm_strerror(e), "unknown error"));
    smarm_runtime_free(rt);
}

static const char *trapper = "local s = require 'smarm'\n"
                             "local linger, to = ...\n"
                             "s.spawn(function(linger, to)\n"
                             "   local s = require 'smarm'\n"
                             "   local rx = s.trap_exit(true)\n"
                             "   s.send(to, 'trapping')\n"
                             "   local sig = rx:recv()\n"
                             "   assert(sig.reason == 'shutdown')\n"
                             "   s.sleep(linger)\n"
                             "   require('probe').mark(1)\n"
                             "end, linger, to)\n"
                             "assert(s.recv(5) == 'trapping')\n";

static void stop_gives_a_grace_then_kills(void **state)
{
    (void)state;
    for (int overrun = 0; overrun < 2; overrun++) {
        atomic_store(&probe_marks, 0);
        smarm_runtime *rt = new_rt();
        assert_int_equal(smarm_preload(rt, "probe", open_probe), 0);
        assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
        smarm_host *h = smarm_host_open(rt);
        lua_State *L = smarm_host_lua(h);
        luaL_loadstring(L, trapper);
        lua_pushnumber(L, overrun ? 30 : 0.05);
        lua_pushnumber(L, (double)smarm_host_pid(h));
        if (lua_pcall(L, 2, 0, 0) != 0)
            fail_msg("lua: %s", lua_tostring(L, -1));
        assert_int_equal(smarm_host_close(h), 0);
        int status = -1;
        double t0 = now_s();
        assert_int_equal(smarm_stop(rt, overrun ? 0.2 : 10, &status), 0);
        double dt = now_s() - t0;
        if (overrun) {
            assert_int_equal(status, 2);
            assert_int_equal(atomic_load(&probe_marks), 0);
            assert_true(dt >= 0.19 && dt < 10);
        } else {
            assert_int_equal(status, 0);
            assert_int_equal(atomic_load(&probe_marks), 1);
            assert_true(dt < 9);
        }
        smarm_runtime_free(rt);
    }
}

/* With no root, a supervisor the host started is told first and stops its children in
 * reverse start order; the host's close (reason normal) does not stop it. */
static void stop_without_root_stops_a_host_started_tree_in_order(void **state)
{
    (void)state;
    atomic_store(&seq_n, 0);
    smarm_runtime *rt = new_rt();
    assert_int_equal(smarm_preload(rt, "tworker", open_tworker), 0);
    assert_int_equal(smarm_preload(rt, "seqprobe", open_seqprobe), 0);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_ok(smarm_host_lua(h),
           "local s = require 'smarm'\n"
           "local sup = require 'smarm.supervisor'\n"
           "local children = {}\n"
           "for i = 1, 3 do\n"
           "   children[i] = {id = 'w' .. i, start = {'tworker', 'run', i}, shutdown = 5}\n"
           "end\n"
           "assert(sup.start_link({strategy = 'one_for_one', children = children}))\n"
           "for i = 1, 3 do\n"
           "   local t0 = s.now()\n"
           "   while not s.whereis('w' .. i) do\n"
           "      assert(s.now() - t0 < 10); s.sleep(0.005)\n"
           "   end\n"
           "end\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    int status = -1;
    assert_int_equal(smarm_stop(rt, 10, &status), 0);
    assert_int_equal(status, 0);
    assert_int_equal(atomic_load(&seq_n), 3);
    assert_int_equal(atomic_load(&seq_log[0]), 3);
    assert_int_equal(atomic_load(&seq_log[1]), 2);
    assert_int_equal(atomic_load(&seq_log[2]), 1);
    smarm_runtime_free(rt);
}

static void root_file_is_shut_down_politely(void **state)
{
    (void)state;
    char path[] = "/tmp/smarm_embed_rootXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *src = "local s = require 'smarm'\n"
                      "local rx = s.trap_exit(true)\n"
                      "s.register('root')\n"
                      "assert(arg[1] == 'a1')\n"
                      "local sig = rx:recv()\n"
                      "assert(sig.reason == 'shutdown')\n";
    assert_int_equal(write(fd, src, strlen(src)), (ssize_t)strlen(src));
    close(fd);
    smarm_runtime *rt = new_rt();
    char *argv[] = {"a1"};
    assert_int_equal(smarm_start(rt, path, 1, argv), 0);
    for (int i = 0; i < 5000 && !smarm_whereis(rt, "root"); i++)
        usleep(1000);
    assert_true(smarm_whereis(rt, "root") != 0);
    int status = -1;
    assert_int_equal(smarm_stop(rt, 10, &status), 0);
    assert_int_equal(status, 0);
    smarm_runtime_free(rt);
    unlink(path);
}

static void two_runtimes_do_not_see_each_other(void **state)
{
    (void)state;
    smarm_runtime *a = new_rt(), *b = new_rt();
    assert_int_equal(smarm_start(a, NULL, 0, NULL), 0);
    assert_int_equal(smarm_start(b, NULL, 0, NULL), 0);
    smarm_host *ha = smarm_host_open(a), *hb = smarm_host_open(b);
    assert_non_null(ha);
    assert_non_null(hb);
    lua_ok(smarm_host_lua(ha), "assert(require('smarm').register('svc'))", 0);
    assert_true(smarm_whereis(a, "svc") == smarm_host_pid(ha));
    assert_int_equal(smarm_whereis(b, "svc"), 0);
    assert_int_equal(smarm_send_string_name(b, "svc", "x", 1), SMARM_EDEAD);
    lua_ok(smarm_host_lua(hb),
           "local s = require 'smarm'\n"
           "assert(s.whereis('svc') == nil)\n"
           "assert(s.register('svc'))\n",
           0);
    assert_true(smarm_whereis(b, "svc") == smarm_host_pid(hb));
    assert_int_equal(smarm_send_string_name(a, "svc", "to a", 4), 0);
    lua_ok(smarm_host_lua(ha), "assert(require('smarm').recv(5) == 'to a')", 0);
    lua_ok(smarm_host_lua(hb), "assert(require('smarm').recv(0) == nil)", 0);
    assert_int_equal(smarm_host_close(ha), 0);
    assert_int_equal(smarm_host_close(hb), 0);
    assert_int_equal(smarm_stop(a, 1, NULL), 0);
    assert_int_equal(smarm_stop(b, 1, NULL), 0);
    smarm_runtime_free(a);
    smarm_runtime_free(b);
}

/* A host thread of its own, as a game's render or network thread would be. */
static void *host_thread(void *arg)
{
    smarm_runtime *rt = arg;
    smarm_host *h = smarm_host_open(rt);
    if (!h)
        return "open failed";
    lua_State *L = smarm_host_lua(h);
    const char *err = NULL;
    if (luaL_dostring(L, "local s = require 'smarm'\n"
                         "assert(s.register('worker'))\n"
                         "local peer = assert(s.whereis('main'))\n"
                         "for i = 1, 50 do s.send(peer, i) end\n"
                         "assert(s.recv(5) == 'bye')\n") != 0)
        err = "lua failed";
    smarm_host_close(h);
    return (void *)err;
}

/* A host thread that ends with its handle open: the handle is closed for it, as an
 * actor's end (a monitor hears "normal"); handles it closed itself are not closed again. */
static void *forgetful_host_thread(void *arg)
{
    smarm_runtime *rt = arg;
    for (int i = 0; i < 20; i++) {
        smarm_host *h = smarm_host_open(rt);
        if (!h || smarm_host_close(h) != 0)
            return "open/close failed";
    }
    smarm_host *h = smarm_host_open(rt);
    if (!h)
        return "open failed";
    if (luaL_dostring(smarm_host_lua(h), "local s = require 'smarm'\n"
                                         "assert(s.send(assert(s.whereis('main')), s.self()))\n"
                                         "assert(s.recv(5) == 'go')\n") != 0)
        return "lua failed";
    return NULL; /* without smarm_host_close */
}

static void a_host_thread_ending_closes_its_handle(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    lua_ok(L, "assert(require('smarm').register('main'))", 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, forgetful_host_thread, rt), 0);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local other = assert(s.recv(5), 'the thread did not start')\n"
           "_G.mon = s.monitor(other)\n"
           "_G.other = other\n"
           "assert(s.send(other, 'go'))\n",
           0);
    void *res;
    assert_int_equal(pthread_join(t, &res), 0);
    assert_null(res);
    lua_ok(L,
           "local d = assert(_G.mon:recv(5), 'the ended thread was not closed')\n"
           "assert(d.pid == _G.other and d.reason == 'normal', tostring(d.reason))\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    assert_int_equal(smarm_host_close(h), SMARM_ECLOSED);
    stop_rt(rt);
}

/* smarm.info and smarm.snapshot answer on a host thread (its state has no scheduler). */
static void introspection_on_a_host(void **state)
{
    (void)state;
    smarm_runtime *rt = started_rt();
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_ok(smarm_host_lua(h),
           "local s = require 'smarm'\n"
           "local pid = s.spawn(function() require('smarm').recv() end)\n"
           "assert(s.register('probe', pid))\n"
           "local me = assert(s.info(s.self()), 'no info of the host itself')\n"
           "assert(me.pid == s.self())\n"
           "local it = assert(s.info(pid), 'no info of an actor from the host')\n"
           "assert(it.name == 'probe', tostring(it.name))\n"
           "local seen = false\n"
           "for _, i in ipairs(s.snapshot()) do seen = seen or i.pid == pid end\n"
           "assert(seen, 'the snapshot misses the actor')\n"
           "s.kill(pid)\n",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
}

static void start_stop_free_repeats(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        smarm_runtime *rt = new_rt();
        assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
        smarm_host *h = smarm_host_open(rt);
        assert_non_null(h);
        lua_State *L = smarm_host_lua(h);
        lua_ok(L, "assert(require('smarm').register('main'))", 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, host_thread, rt), 0);
        lua_ok(L,
               "local s = require 'smarm'\n"
               "local sum = 0\n"
               "for i = 1, 50 do sum = sum + assert(s.recv(5)) end\n"
               "assert(sum == 1275)\n"
               "assert(s.send('worker', 'bye'))\n",
               0);
        void *res;
        assert_int_equal(pthread_join(t, &res), 0);
        assert_null(res);
        assert_int_equal(smarm_host_close(h), 0);
        int status = -1;
        assert_int_equal(smarm_stop(rt, 1, &status), 0);
        assert_int_equal(status, 0);
        smarm_runtime_free(rt);
    }
}

/* One runtime started and stopped twice, then run as smarm-lua runs a file. */
static void one_runtime_restarts(void **state)
{
    (void)state;
    smarm_runtime *rt = new_rt();
    for (int round = 0; round < 2; round++) {
        assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
        smarm_host *h = smarm_host_open(rt);
        assert_non_null(h);
        lua_ok(smarm_host_lua(h),
               "local s = require 'smarm'\n"
               "local pid, mon = s.spawn_monitor(function() end)\n"
               "assert(mon:recv(5).reason == 'normal')\n",
               0);
        assert_int_equal(smarm_host_close(h), 0);
        int status = -1;
        assert_int_equal(smarm_stop(rt, 1, &status), 0);
        assert_int_equal(status, 0);
    }
    int status = -1;
    assert_int_equal(smarm_run_string(rt,
                                      "local s = require 'smarm'\n"
                                      "local _, mon = s.spawn_monitor(function() end)\n"
                                      "assert(mon:recv(5))",
                                      0, NULL, &status),
                     0);
    assert_int_equal(status, 0);
    smarm_runtime_free(rt);
}

/* ---- hot reload from the host: smarm_reload, smarm_watch ---- */

static void write_file(const char *dir, const char *name, const char *text, int by_rename)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(by_rename ? tmp : path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    if (by_rename)
        assert_int_equal(rename(tmp, path), 0);
}

static void hotmod_version(const char *dir, int v, int by_rename)
{
    char src[128];
    snprintf(src, sizeof src, "local M = {}\nfunction M.v() return %d end\nreturn M\n", v);
    write_file(dir, "hotmod.lua", src, by_rename);
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void reload_and_watch_from_host(void **state)
{
    (void)state;
    char dir[] = "/tmp/smarm_reload_XXXXXX";
    assert_non_null(mkdtemp(dir));
    hotmod_version(dir, 1, 0);
    smarm_runtime *rt = new_rt_in(dir);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    char err[256] = "";
    /* nobody loaded it yet */
    assert_int_equal(smarm_reload_err(rt, "hotmod", err, sizeof err), SMARM_EINVAL);
    assert_non_null(strstr(err, "not loaded"));
    lua_ok(L, "H = require 'hotmod'; assert(H.v() == 1)", 0);
    hotmod_version(dir, 2, 0);
    assert_int_equal(smarm_reload_err(rt, "hotmod", err, sizeof err), 1);
    /* the host state takes it at its next safe point: a poll */
    lua_ok(L,
           "local s = require 'smarm'; s.recv(0); assert(H.v() == 2)\n"
           "assert(s.code_version('hotmod') == 1)",
           0);
    write_file(dir, "hotmod.lua", "local M = {}\nfunction M.v() return end end\n", 0);
    assert_int_equal(smarm_reload_err(rt, "hotmod", err, sizeof err), SMARM_ELOAD);
    assert_non_null(strstr(err, "hotmod.lua:2:"));
    lua_ok(L, "require 'smarm.gen_server'", 0);
    assert_int_equal(smarm_reload_err(rt, "smarm.gen_server", err, sizeof err), SMARM_ELOAD);
    assert_non_null(strstr(err, "part of smarm"));
    assert_int_equal(smarm_reload(rt, NULL), SMARM_EINVAL);
    /* the watcher reloads a file renamed into place */
    assert_int_equal(smarm_watch(rt, dir), 0);
    assert_int_equal(smarm_watch(rt, dir), SMARM_EINVAL);
    hotmod_version(dir, 3, 1);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "for _ = 1, 1000 do if H.v() == 3 then break end s.sleep(0.01) end\n"
           "assert(H.v() == 3, 'the watcher did not reload')\n"
           "assert(s.code_version('hotmod') == 2)",
           0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
    remove_dir(dir);
}

struct reloader {
    smarm_runtime *rt;
    const char *dir;
    _Atomic int stop;
    int done;
};

static void *reload_loop(void *arg)
{
    struct reloader *r = arg;
    for (int i = 0; i < 200 && !atomic_load(&r->stop); i++) {
        hotmod_version(r->dir, 1 + i % 2, i % 3 == 0);
        char err[256];
        if (smarm_reload_err(r->rt, "hotmod", err, sizeof err) < 0)
            fail_msg("reload: %s", err);
        r->done++;
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Reloads from a host thread race actors that spawn, load the module, wait (safe points)
 * and exit: every actor runs one of the versions, nothing is lost (asan/tsan run this). */
static void reloads_race_spawns_and_exits(void **state)
{
    (void)state;
    char dir[] = "/tmp/smarm_reload_XXXXXX";
    assert_non_null(mkdtemp(dir));
    hotmod_version(dir, 1, 0);
    smarm_runtime *rt = new_rt_in(dir);
    assert_int_equal(smarm_start(rt, NULL, 0, NULL), 0);
    smarm_host *h = smarm_host_open(rt);
    assert_non_null(h);
    lua_State *L = smarm_host_lua(h);
    lua_ok(L, "assert(require('hotmod').v() == 1)", 0);
    struct reloader r = {rt, dir, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reload_loop, &r), 0);
    lua_ok(L,
           "local s = require 'smarm'\n"
           "local n = 1000\n"
           "for i = 1, n do\n"
           "   s.spawn(function(to)\n"
           "      local s = require 'smarm'\n"
           "      local H = require 'hotmod'\n"
           "      local seen = H.v()\n"
           "      s.sleep(0.0005); s.yield()\n"
           "      s.send(to, seen * 10 + H.v())\n"
           "   end, s.self())\n"
           "   if i % 50 == 0 then s.sleep(0.001) end\n"
           "end\n"
           "for _ = 1, n do\n"
           "   local v = assert(s.recv(30), 'an actor did not answer')\n"
           "   assert(v == 11 or v == 12 or v == 21 or v == 22, v)\n"
           "end\n",
           0);
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    assert_true(r.done > 0);
    assert_int_equal(smarm_host_close(h), 0);
    stop_rt(rt);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(host_and_actor_send_both_ways),
        cmocka_unit_test(host_recv_timeout_and_poll),
        cmocka_unit_test(host_fd_readable_while_inbox_nonempty),
        cmocka_unit_test(host_fd_poll_loop_under_load),
        cmocka_unit_test(monitors_both_ways),
        cmocka_unit_test(a_host_thread_ending_closes_its_handle),
        cmocka_unit_test(introspection_on_a_host),
        cmocka_unit_test(links_to_a_host),
        cmocka_unit_test(gen_server_call_and_preload_from_host),
        cmocka_unit_test(send_string_to_pid_and_name),
        cmocka_unit_test(errors_are_codes),
        cmocka_unit_test(stop_gives_a_grace_then_kills),
        cmocka_unit_test(stop_without_root_stops_a_host_started_tree_in_order),
        cmocka_unit_test(root_file_is_shut_down_politely),
        cmocka_unit_test(two_runtimes_do_not_see_each_other),
        cmocka_unit_test(start_stop_free_repeats),
        cmocka_unit_test(one_runtime_restarts),
        cmocka_unit_test(reload_and_watch_from_host),
        cmocka_unit_test(reloads_race_spawns_and_exits),
    };
    return cmocka_run_group_tests(tests, 0, NULL);
}
