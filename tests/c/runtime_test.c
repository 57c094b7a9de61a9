/* End-to-end tests of the scheduler through the public API: Lua programs run as the
 * root actor and check their own results with assert, so a wrong result is exit status 1.
 * One test also reaches into the core, through its test hook at an actor's death. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <unistd.h>

#include "smarm.h"

#include "core/actor.h"
#include "core/pg.h"
#include "core/registry.h"
#include "core/runtime.h"
#include "core/scheduler.h"

/* Runs code as the root actor of a fresh runtime; returns its exit status. */
static int run_with(const char *code, int schedulers, uint32_t max_actors)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = schedulers;
    cfg.max_actors = max_actors;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    assert_non_null(rt);
    int status = -1;
    assert_int_equal(smarm_run_string(rt, code, 0, NULL, &status), 0);
    smarm_runtime_free(rt);
    return status;
}

static int run2(const char *code) { return run_with(code, 2, 0); }

static void root_error_gives_status_one(void **state)
{
    (void)state;
    fprintf(stderr, "(an expected crash report follows)\n");
    assert_int_equal(run2("assert(1 == 2, 'expected failure')"), 1);
    assert_int_equal(run2("local x = 1"), 0);
}

static void spawn_send_recv_round_trip(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local pid = s.spawn(function(parent, k)\n"
                       "   local s = require 'smarm'\n"
                       "   local m = s.recv()\n"
                       "   s.send(parent, {echo = m.x * k, from = s.self(), s = m.s .. '!'})\n"
                       "end, s.self(), 2)\n"
                       "assert(type(pid) == 'number' and pid ~= s.self())\n"
                       "assert(s.send(pid, {x = 21, s = 'hi'}) == true)\n"
                       "local r = assert(s.recv(10), 'no reply')\n"
                       "assert(r.echo == 42 and r.from == pid and r.s == 'hi!')\n";
    assert_int_equal(run2(code), 0);
}

/* 200 pairs; each pinger sends 200 numbered messages in windows of 10 and checks
 * the echoes come back in order; each ponger checks its pinger's order. */
static const char *pingpong_code =
    "local s = require 'smarm'\n"
    "local PAIRS, N = ...\n"
    "PAIRS, N = tonumber(PAIRS) or 200, tonumber(N) or 200\n"
    "local function ponger()\n"
    "   local s = require 'smarm'\n"
    "   local expect = 1\n"
    "   while true do\n"
    "      local m = s.recv()\n"
    "      if m.stop then return end\n"
    "      assert(m.seq == expect, 'ponger saw ' .. m.seq .. ' expected ' .. expect)\n"
    "      expect = expect + 1\n"
    "      s.send(m.from, m.seq)\n"
    "   end\n"
    "end\n"
    "local function pinger(root, peer, n)\n"
    "   local s = require 'smarm'\n"
    "   local me, got = s.self(), 0\n"
    "   for base = 0, n - 1, 10 do\n"
    "      for i = base + 1, math.min(base + 10, n) do\n"
    "         assert(s.send(peer, {seq = i, from = me}))\n"
    "      end\n"
    "      for i = base + 1, math.min(base + 10, n) do\n"
    "         local r = s.recv()\n"
    "         assert(r == i, 'pinger got ' .. tostring(r) .. ' expected ' .. i)\n"
    "         got = got + 1\n"
    "      end\n"
    "   end\n"
    "   s.send(peer, {stop = true})\n"
    "   s.send(root, got)\n"
    "end\n"
    "for _ = 1, PAIRS do\n"
    "   local peer = s.spawn(ponger)\n"
    "   s.spawn(pinger, s.self(), peer, N)\n"
    "end\n"
    "for k = 1, PAIRS do\n"
    "   local got = assert(s.recv(30), 'pair report timed out after ' .. (k - 1))\n"
    "   assert(got == N)\n"
    "end\n";

static void pairs_ping_pong_keep_per_sender_fifo(void **state)
{
    (void)state;
    assert_int_equal(run2(pingpong_code), 0);
}

static int run_pingpong_small(int schedulers)
{
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = schedulers;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    char *argv[] = {"50", "100"};
    int status = -1;
    assert_int_equal(smarm_run_string(rt, pingpong_code, 2, argv, &status), 0);
    smarm_runtime_free(rt);
    return status;
}

static void ping_pong_runs_on_one_scheduler(void **state)
{
    (void)state;
    assert_int_equal(run_pingpong_small(1), 0);
}

static void ping_pong_runs_on_four_schedulers(void **state)
{
    (void)state;
    assert_int_equal(run_pingpong_small(4), 0);
}

static void thousands_of_spawned_actors_each_reach_the_root(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local N = 2000\n"
                       "for i = 1, N do\n"
                       "   s.spawn(function(root, i)\n"
                       "      require('smarm').send(root, i)\n"
                       "   end, s.self(), i)\n"
                       "end\n"
                       "local seen = {}\n"
                       "for k = 1, N do\n"
                       "   local i = assert(s.recv(30), 'timed out after ' .. (k - 1))\n"
                       "   assert(not seen[i], 'duplicate ' .. i)\n"
                       "   seen[i] = true\n"
                       "end\n"
                       "local m, e = s.recv(0)\n"
                       "assert(m == nil and e == 'timeout')\n";
    assert_int_equal(run2(code), 0);
}

static void recv_timeout_returns_nil_timeout_and_an_earlier_message_wins(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local m, e = s.recv(0)\n"
                       "assert(m == nil and e == 'timeout', 'poll')\n"
                       "local t0 = s.now()\n"
                       "m, e = s.recv(0.05)\n"
                       "local dt = s.now() - t0\n"
                       "assert(m == nil and e == 'timeout', 'timeout')\n"
                       "assert(dt >= 0.05, 'woke early: ' .. dt)\n"
                       "s.spawn(function(root)\n"
                       "   local s = require 'smarm'\n"
                       "   s.sleep(0.02)\n"
                       "   s.send(root, 'early')\n"
                       "end, s.self())\n"
                       "t0 = s.now()\n"
                       "m, e = s.recv(10)\n"
                       "assert(m == 'early', tostring(e))\n"
                       "assert(s.now() - t0 < 5)\n"
                       /* the stale timer of that recv must not disturb the next wait */
                       "m, e = s.recv(0.03)\n"
                       "assert(m == nil and e == 'timeout')\n";
    assert_int_equal(run2(code), 0);
}

static void sleep_waits_at_least_its_duration(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local t0 = s.now()\n"
                       "s.sleep(0.05)\n"
                       "assert(s.now() - t0 >= 0.05)\n"
                       "for k = 1, 5 do\n"
                       "   s.spawn(function(root, d)\n"
                       "      local s = require 'smarm'\n"
                       "      local t = s.now()\n"
                       "      s.sleep(d)\n"
                       "      s.send(root, s.now() - t >= d)\n"
                       "   end, s.self(), 0.01 * k)\n"
                       "end\n"
                       "for _ = 1, 5 do assert(s.recv(10) == true) end\n";
    assert_int_equal(run2(code), 0);
}

static void yield_loops_all_make_progress(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "for k = 1, 4 do\n"
                       "   s.spawn(function(root, k)\n"
                       "      local s = require 'smarm'\n"
                       "      local n = 0\n"
                       "      for _ = 1, 5000 do s.yield(); n = n + 1 end\n"
                       "      s.send(root, n)\n"
                       "   end, s.self(), k)\n"
                       "end\n"
                       "for _ = 1, 1000 do s.yield() end\n"
                       "for _ = 1, 4 do assert(s.recv(30) == 5000) end\n";
    assert_int_equal(run2(code), 0);
}

static void crashing_actor_does_not_affect_others(void **state)
{
    (void)state;
    fprintf(stderr, "(expected crash reports follow)\n");
    const char *code = "local s = require 'smarm'\n"
                       "local bad = s.spawn(function() error('boom at boot') end)\n"
                       "local bad2 = s.spawn(function()\n"
                       "   local s = require 'smarm'\n"
                       "   local m = s.recv()\n"
                       "   error('boom on ' .. tostring(m))\n"
                       "end)\n"
                       "local good = s.spawn(function(root)\n"
                       "   local s = require 'smarm'\n"
                       "   for _ = 1, 3 do\n"
                       "      local m = s.recv()\n"
                       "      s.send(root, m + 1)\n"
                       "   end\n"
                       "end, s.self())\n"
                       "s.send(good, 1)\n"
                       "assert(s.recv(10) == 2)\n"
                       "s.send(bad2, 'hello')\n"
                       "s.send(good, 2)\n"
                       "assert(s.recv(10) == 3)\n"
                       /* both crashers end: sending to them reports dead */
                       "for _, p in ipairs({bad, bad2}) do\n"
                       "   local ok, e\n"
                       "   for _ = 1, 1000 do\n"
                       "      ok, e = s.send(p, 'x')\n"
                       "      if not ok then break end\n"
                       "      s.sleep(0.005)\n"
                       "   end\n"
                       "   assert(ok == nil and e == 'dead', 'crasher still alive')\n"
                       "end\n"
                       "s.send(good, 3)\n"
                       "assert(s.recv(10) == 4)\n";
    assert_int_equal(run2(code), 0);
}

static void root_exit_sweeps_actors_parked_in_recv_forever(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "for _ = 1, 100 do\n"
                       "   s.spawn(function(root)\n"
                       "      local s = require 'smarm'\n"
                       "      s.send(root, 'ready')\n"
                       "      s.recv()\n"
                       "      error('must not get a message')\n"
                       "   end, s.self())\n"
                       "end\n"
                       "for _ = 1, 100 do assert(s.recv(30) == 'ready') end\n";
    assert_int_equal(run2(code), 0);
}

/* The sweep must reach every kind of wait: coroutine parks, stack parks, sleeps. */
static void root_exit_sweeps_stack_parked_and_sleeping_actors(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "for k = 1, 30 do\n"
                       "   s.spawn(function(root, k)\n"
                       "      local s = require 'smarm'\n"
                       "      s.send(root, 'ready')\n"
                       "      if k % 3 == 0 then\n"
                       "         string.gsub('a', 'a', function() s.recv() end)\n"
                       "      elseif k % 3 == 1 then\n"
                       "         coroutine.wrap(function() s.recv() end)()\n"
                       "      else\n"
                       "         s.sleep(1e6)\n"
                       "      end\n"
                       "   end, s.self(), k)\n"
                       "end\n"
                       "for _ = 1, 30 do assert(s.recv(30) == 'ready') end\n";
    assert_int_equal(run2(code), 0);
}

static void two_runtimes_run_one_after_the_other(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local p = s.spawn(function(root)\n"
                       "   local s = require 'smarm'\n"
                       "   s.send(root, s.recv() * 3)\n"
                       "end, s.self())\n"
                       "s.send(p, 5)\n"
                       "assert(s.recv(10) == 15)\n";
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 2;
    smarm_runtime *a = NULL, *b = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &a), 0);
    assert_int_equal(smarm_runtime_new(&cfg, &b), 0);
    int st = -1;
    assert_int_equal(smarm_run_string(a, code, 0, NULL, &st), 0);
    assert_int_equal(st, 0);
    st = -1;
    assert_int_equal(smarm_run_string(b, code, 0, NULL, &st), 0);
    assert_int_equal(st, 0);
    smarm_runtime_free(a);
    smarm_runtime_free(b);
    /* and a third, created after the others are gone */
    assert_int_equal(run2(code), 0);
}

static void try_spawn_at_capacity_returns_nil_at_capacity(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local function parked(root)\n"
                       "   local s = require 'smarm'\n"
                       "   s.send(root, 'ready')\n"
                       "   s.recv()\n"
                       "end\n"
                       "local pids = {}\n"
                       "for i = 1, 7 do pids[i] = assert(s.try_spawn(parked, s.self())) end\n"
                       "for _ = 1, 7 do assert(s.recv(10) == 'ready') end\n"
                       "local p, e = s.try_spawn(parked, s.self())\n"
                       "assert(p == nil and e == 'at_capacity', tostring(e))\n"
                       "local ok, err = pcall(s.spawn, parked, s.self())\n"
                       "assert(not ok and tostring(err):find('at capacity'), tostring(err))\n"
                       /* a slot freed is a slot to spawn into again */
                       "s.send(pids[1], 'go')\n"
                       "for _ = 1, 1000 do\n"
                       "   p, e = s.try_spawn(parked, s.self())\n"
                       "   if p then break end\n"
                       "   s.sleep(0.005)\n"
                       "end\n"
                       "assert(p, 'no slot came free')\n"
                       "assert(s.recv(10) == 'ready')\n";
    assert_int_equal(run_with(code, 2, 8), 0);
}

static void recv_inside_gsub_callback_parks_on_the_stack(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local pid = s.spawn(function(root)\n"
                       "   local s = require 'smarm'\n"
                       "   local r = string.gsub('abc', '%w', function(c)\n"
                       "      return c .. s.recv()\n"
                       "   end)\n"
                       "   s.send(root, r)\n"
                       "end, s.self())\n"
                       "s.sleep(0.01)\n"
                       "for _, m in ipairs({'1', '2', '3'}) do s.send(pid, m) end\n"
                       "assert(s.recv(10) == 'a1b2c3')\n"
                       /* the root itself, with a timeout that fires and one that does not */
                       "local out = string.gsub('xy', '%w', function(c)\n"
                       "   local m, e = s.recv(0.02)\n"
                       "   return c .. tostring(m or e)\n"
                       "end)\n"
                       "assert(out == 'xtimeoutytimeout', out)\n";
    assert_int_equal(run2(code), 0);
}

static void recv_inside_coroutine_wrap_parks_off_the_main_coroutine(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local pid = s.spawn(function(root)\n"
                       "   local s = require 'smarm'\n"
                       "   local gen = coroutine.wrap(function()\n"
                       "      for _ = 1, 3 do coroutine.yield(s.recv() * 10) end\n"
                       "      return 'done'\n"
                       "   end)\n"
                       "   local acc = {}\n"
                       "   for i = 1, 4 do acc[i] = gen() end\n"
                       "   s.send(root, table.concat(acc, ','))\n"
                       "end, s.self())\n"
                       "for i = 1, 3 do s.send(pid, i) end\n"
                       "assert(s.recv(10) == '10,20,30,done')\n"
                       /* recv under pcall on the main coroutine still works */
                       "s.send(s.self(), 'me')\n"
                       "local ok, m = pcall(s.recv, 1)\n"
                       "assert(ok and m == 'me')\n";
    assert_int_equal(run2(code), 0);
}

/* ASan flavour: the stack an actor resumes on after a coroutine park is a reused one
 * whose shadow still holds the stack redzones of frames abandoned by an earlier
 * switch-out; LuaJIT's (uninstrumented) error path then strncpy()s into a buffer
 * there and the interceptor reports it (and ASan's CHECK aborts while describing it). */
static void actor_erroring_after_a_recv_park_reports_its_crash(void **state)
{
    (void)state;
    fprintf(stderr, "(an expected crash report follows)\n");
    const char *code = "local s = require 'smarm'\n"
                       "local p = s.spawn(function()\n"
                       "   local s = require 'smarm'\n"
                       "   s.recv()\n"
                       "   error('boom')\n"
                       "end)\n"
                       "s.sleep(0.01)\n"
                       "assert(s.send(p, 'wake'))\n"
                       "s.sleep(0.01)\n";
    assert_int_equal(run_with(code, 1, 0), 0);
}

/* Lua text the hog tests share: a responder that answers 'pong' until told 'stop', then ten
 * pings it must answer while the hogs run, then 'stop' to it and to hogs[1..4]. */
#define SPAWN_RESPONDER                                                                       \
    "local resp = s.spawn(function()\n"                                                       \
    "   local s = require 'smarm'\n"                                                          \
    "   while true do local m = s.recv(); if m == 'stop' then return end; s.send(m, 'pong') " \
    "end\n"                                                                                   \
    "end)\n"
#define PING_RESPONDER_THEN_STOP                                                  \
    "s.sleep(0.02)\n"                                                             \
    "for _ = 1, 10 do s.send(resp, s.self()); assert(s.recv(30) == 'pong') end\n" \
    "s.send(resp, 'stop')\n"                                                      \
    "for i = 1, 4 do s.send(hogs[i], 'stop') end\n"

/* JIT-compiled and interpreted hogs on every scheduler: a responder still answers,
 * the hogs are preempted (counters), and their sums come out exact. */
static void hogs_are_preempted_and_their_results_stay_exact(void **state)
{
    (void)state;
    const char *code =
        "local s = require 'smarm'\n"
        "local function hog(root, interp)\n"
        "   local s = require 'smarm'\n"
        "   if interp then jit.off() end\n"
        "   local x, lcg = 0, 1\n"
        "   while true do\n"
        "      for i = 1, 2e6 do x = x + i; lcg = (lcg * 69069 + 1) % 4294967296 end\n"
        "      if s.recv(0) then s.send(root, {x = x, lcg = lcg, info = s.info(s.self())}) return "
        "end\n"
        "   end\n"
        "end\n" SPAWN_RESPONDER "local hogs = {}\n"
        "for i = 1, 4 do hogs[i] = s.spawn(hog, s.self(), i % 2 == 0) "
        "end\n" PING_RESPONDER_THEN_STOP "local preempted = 0\n"
        "for _ = 1, 4 do\n"
        "   local m = assert(s.recv(60))\n"
        "   local n = math.floor(m.x / 2e6 * 2 / (2e6 + 1) + 0.5)\n"
        "   assert(m.x == n * (2e6 * (2e6 + 1) / 2), 'sum is exact')\n"
        "   local l = 1\n"
        "   for _ = 1, n * 2e6 do l = (l * 69069 + 1) % 4294967296 end\n"
        "   assert(m.lcg == l, 'lcg is exact')\n"
        "   local p = m.info.preemptions\n"
        "   preempted = preempted + p.hook + p.jit + p.safe_point\n"
        "end\n"
        "assert(preempted > 0, 'hogs were preempted')\n";
    assert_int_equal(run2(code), 0);
}

/* Hogs whose time goes into C functions called from Lua (a system call stitched around
 * by the JIT, an FFI system call from a trace, LuaJIT's string helpers with their GC
 * steps, FFI calls nested under a callback): a responder still answers, they are
 * preempted, and their results come out exact. */
static void c_calling_hogs_are_preempted_and_their_results_stay_exact(void **state)
{
    (void)state;
    const char *code =
        "local s = require 'smarm'\n"
        "local function hog(root, kind)\n"
        "   local s = require 'smarm'\n"
        "   local ffi = require 'ffi'\n"
        "   ffi.cdef 'int getpid(void); void qsort(void *, size_t, size_t, int (*)(const void *, "
        "const void *));'\n"
        "   local C, pid = ffi.C, ffi.C.getpid()\n"
        "   local cmp = ffi.cast('int (*)(const void *, const void *)', function(a, b)\n"
        "      local x, y = ffi.cast('const int *', a)[0], ffi.cast('const int *', b)[0]\n"
        "      return x - y + C.getpid() - pid\n"
        "   end)\n"
        "   local arr = ffi.new('int[64]')\n"
        "   local x, lcg, steps = 0, 1, 0\n"
        "   while true do\n"
        "      for i = 1, 2e4 do\n"
        "         if kind == 1 then x = x + (os.clock() >= 0 and 1 or 0)\n"
        "         elseif kind == 2 then x = x + C.getpid() - pid + 1\n"
        "         elseif kind == 3 then x = x + #string.rep('ab', 100 + i % 7)\n"
        "         elseif i % 20 == 0 then\n"
        "            for j = 0, 63 do arr[j] = (lcg + j * 7919) % 1000 end\n"
        "            C.qsort(arr, 64, 4, cmp)\n"
        "            for j = 1, 63 do assert(arr[j - 1] <= arr[j]) end\n"
        "            x = x + 1\n"
        "         end\n"
        "         lcg = (lcg * 69069 + 1) % 4294967296\n"
        "      end\n"
        "      steps = steps + 2e4\n"
        "      if s.recv(0) then\n"
        "         return s.send(root, {kind = kind, x = x, lcg = lcg, steps = steps, info = "
        "s.info(s.self())})\n"
        "      end\n"
        "   end\n"
        "end\n" SPAWN_RESPONDER "local hogs = {}\n"
        "for i = 1, 4 do hogs[i] = s.spawn(hog, s.self(), i) end\n" PING_RESPONDER_THEN_STOP
        "local preempted = 0\n"
        "for _ = 1, 4 do\n"
        "   local m = assert(s.recv(60))\n"
        "   local l = 1\n"
        "   for _ = 1, m.steps do l = (l * 69069 + 1) % 4294967296 end\n"
        "   assert(m.lcg == l, 'lcg is exact')\n"
        "   local want = m.steps\n"
        "   if m.kind == 3 then\n"
        "      want = 0\n"
        "      for i = 1, 2e4 do want = want + 2 * (100 + i % 7) end\n"
        "      want = want * m.steps / 2e4\n"
        "   elseif m.kind == 4 then want = m.steps / 20 end\n"
        "   assert(m.x == want, 'count is exact')\n"
        "   local p = m.info.preemptions\n"
        "   preempted = preempted + p.hook + p.jit + p.safe_point + p.c_return\n"
        "end\n"
        "assert(preempted > 0, 'hogs were preempted')\n";
    assert_int_equal(run2(code), 0);
}

/* Two actors race try_spawn for the last free slots of a small slab: together
 * they get exactly the free count, and every refusal is a clean at_capacity.
 * Both are spawned before either starts racing: a racer let loose at once can
 * fill the slab before the root spawns the second. */
static void try_spawn_race_claims_exactly_the_free_slots(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local function racer(root)\n"
                       "   local s = require 'smarm'\n"
                       "   local got = 0\n"
                       "   assert(s.recv(30) == 'go')\n"
                       "   while true do\n"
                       "      local p, err = s.try_spawn(function() require('smarm').recv() end)\n"
                       "      if not p then assert(err == 'at_capacity', err) break end\n"
                       "      got = got + 1\n"
                       "   end\n"
                       "   s.send(root, got)\n"
                       "   s.recv()\n"
                       "end\n"
                       "local a = s.spawn(racer, s.self())\n"
                       "local b = s.spawn(racer, s.self())\n"
                       "s.send(a, 'go')\n"
                       "s.send(b, 'go')\n"
                       "local total = s.recv(30) + s.recv(30)\n"
                       "assert(total == 64 - 3, 'claimed ' .. total)\n";
    assert_int_equal(run_with(code, 2, 64), 0);
}

/* Random spawn / link / monitor / kill / register / send churn on two
 * schedulers, seeded: run under the tsan flavour it checks the exit paths for
 * races; every monitor must get exactly one notice. */
static void exit_churn_keeps_every_monitor_notified(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "math.randomseed(12345)\n"
                       "local function worker(k)\n"
                       "   local s = require 'smarm'\n"
                       "   while true do\n"
                       "      local m = s.recv()\n"
                       "      if m == 'crash' then error('churn crash ' .. k) end\n"
                       "      if m == 'exit' then return end\n"
                       "      if type(m) == 'number' then pcall(s.link, m) end\n"
                       "   end\n"
                       "end\n"
                       "local live, mons, downs = {}, {}, 0\n"
                       "for round = 1, 400 do\n"
                       "   local r = math.random(6)\n"
                       "   if r <= 2 or #live < 4 then\n"
                       "      local p, m = s.spawn_monitor(worker, round)\n"
                       "      live[#live + 1] = p\n"
                       "      mons[#mons + 1] = m\n"
                       "      if math.random(2) == 1 then s.register('churn' .. round, p) end\n"
                       "   else\n"
                       "      local i = math.random(#live)\n"
                       "      local p = live[i]\n"
                       "      local act = math.random(5)\n"
                       "      if act == 1 then s.kill(p)\n"
                       "      elseif act == 2 then s.send(p, 'crash')\n"
                       "      elseif act == 3 then s.send(p, 'exit')\n"
                       "      elseif act == 4 then s.send(p, live[math.random(#live)])\n"
                       "      else s.shutdown(p) end\n"
                       "      if act ~= 4 then table.remove(live, i) end\n"
                       "   end\n"
                       "   if round % 50 == 0 then s.yield() end\n"
                       "end\n"
                       "for _, p in ipairs(live) do s.kill(p) end\n"
                       "for _, m in ipairs(mons) do\n"
                       "   local d = m:recv(30)\n"
                       "   assert(d and d.reason, 'every monitor hears once')\n"
                       "   downs = downs + 1\n"
                       "   local again, why = m:recv(5)\n"
                       "   assert(again == nil and why == 'closed', 'only once')\n"
                       "end\n"
                       "assert(downs == #mons)\n";
    fprintf(stderr, "(expected crash reports follow)\n");
    assert_int_equal(run2(code), 0);
}

/* smarm.blocking from many actors at once, on one scheduler and a pool of two threads set
 * through smarm_config: every call comes back with its results (and its error) to the right
 * actor, sends from inside arrive, and actors killed while they move between the scheduler
 * and the pool end with reason killed. */
static void blocking_calls_move_actors_to_the_pool_and_back(void **state)
{
    (void)state;
    const char *code = "local s = require 'smarm'\n"
                       "local N, K = 24, 60\n"
                       "for _ = 1, N do\n"
                       "   s.spawn(function(parent, k)\n"
                       "      local s = require 'smarm'\n"
                       "      local sum = 0\n"
                       "      for j = 1, k do\n"
                       "         local a, b = s.blocking(function(x)\n"
                       "            sum = sum + x\n"
                       "            s.send(s.self(), x)\n"
                       "            return x, x * 2\n"
                       "         end, j)\n"
                       "         assert(a == j and b == 2 * j)\n"
                       "         assert(s.recv(10) == j)\n"
                       "         if j % 10 == 0 then\n"
                       "            local ok, e = pcall(s.blocking, error, 'e' .. j)\n"
                       "            assert(not ok and e == 'e' .. j)\n"
                       "         end\n"
                       "      end\n"
                       "      s.send(parent, sum)\n"
                       "   end, s.self(), K)\n"
                       "end\n"
                       "local mons, pids = {}, {}\n"
                       "for i = 1, 6 do\n"
                       "   pids[i], mons[i] = s.spawn_monitor(function()\n"
                       "      local s = require 'smarm'\n"
                       "      while true do\n"
                       "         s.blocking(function()\n"
                       "            local t = os.clock() + 0.0005\n"
                       "            while os.clock() < t do end\n"
                       "         end)\n"
                       "      end\n"
                       "   end)\n"
                       "end\n"
                       "for _ = 1, N do assert(s.recv(60) == K * (K + 1) / 2) end\n"
                       "for i = 1, #pids do\n"
                       "   s.kill(pids[i])\n"
                       "   assert(assert(mons[i]:recv(10)).reason == 'killed')\n"
                       "end\n";
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 1;
    cfg.blocking_threads = 2;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    int status = -1;
    assert_int_equal(smarm_run_string(rt, code, 0, NULL, &status), 0);
    assert_int_equal(status, 0);
    assert_int_equal(smarm_runtime_abandoned(rt), 0);
    smarm_runtime_free(rt);
}

/* A registration and a join of an actor that is dying, made after its inbox closed and before
 * its slot reads DONE (the test hook runs them there, on the dying actor's thread): both
 * succeed, since the actor is still alive, and its death must still release them. Before the
 * death released names and groups after DONE, that window left the name on the dead actor's
 * record, and the next actor spawned into it read as named ("already_named"). */
static actor *raced_actor, *next_actor;
static int raced_register = 99, raced_join = 99;

static void register_while_dying(smarm_runtime *rt, actor *a)
{
    if (a->pid == rt->root_pid)
        return;
    if (raced_actor) {
        if (!next_actor)
            next_actor = a;
        return;
    }
    raced_actor = a;
    raced_register = registry_register(rt, "raced", a->pid);
    raced_join = pg_join(rt, "raced", a->pid);
}

static void a_name_given_while_dying_is_released_with_the_actor(void **state)
{
    (void)state;
    /* nothing looks the name or the group up before the next actor registers: a lookup
     * finds the dead holder and drops the binding, which would hide what is checked */
    const char *code = "local s = require 'smarm'\n"
                       "local p, m = s.spawn_monitor(function() end)\n"
                       "assert(m:recv(30), 'the actor ended')\n"
                       "local q = s.spawn(function() require('smarm').recv() end)\n"
                       "local ok, why = s.register('fresh', q)\n"
                       "assert(ok, 'the next actor is not named: ' .. tostring(why))\n"
                       "assert(s.whereis('raced') == nil, 'no name on a dead actor')\n"
                       "assert(#s.pg.members('raced') == 0, 'no dead member')\n"
                       "assert(s.register('raced'), 'the name is free')\n"
                       "s.send(q, 'stop')\n";
    smarm_config cfg;
    smarm_config_init(&cfg);
    cfg.schedulers = 1;
    smarm_runtime *rt = NULL;
    assert_int_equal(smarm_runtime_new(&cfg, &rt), 0);
    raced_actor = next_actor = NULL;
    sched_finalize_test_hook = register_while_dying;
    int status = -1;
    assert_int_equal(smarm_run_string(rt, code, 0, NULL, &status), 0);
    sched_finalize_test_hook = NULL;
    assert_non_null(raced_actor);
    assert_int_equal(raced_register, REG_OK);
    assert_int_equal(raced_join, 0);
    /* the next actor took the dead one's record (one scheduler: its slot cache is LIFO) */
    assert_ptr_equal(next_actor, raced_actor);
    assert_int_equal(status, 0);
    /* every actor has ended: no record holds a name or a join */
    assert_null(raced_actor->names.name);
    assert_int_equal(raced_actor->names.pg_joins, 0);
    smarm_runtime_free(rt);
}

int main(void)
{
    alarm(240);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(root_error_gives_status_one),
        cmocka_unit_test(spawn_send_recv_round_trip),
        cmocka_unit_test(pairs_ping_pong_keep_per_sender_fifo),
        cmocka_unit_test(ping_pong_runs_on_one_scheduler),
        cmocka_unit_test(ping_pong_runs_on_four_schedulers),
        cmocka_unit_test(thousands_of_spawned_actors_each_reach_the_root),
        cmocka_unit_test(recv_timeout_returns_nil_timeout_and_an_earlier_message_wins),
        cmocka_unit_test(sleep_waits_at_least_its_duration),
        cmocka_unit_test(yield_loops_all_make_progress),
        cmocka_unit_test(try_spawn_race_claims_exactly_the_free_slots),
        cmocka_unit_test(exit_churn_keeps_every_monitor_notified),
        cmocka_unit_test(hogs_are_preempted_and_their_results_stay_exact),
        cmocka_unit_test(c_calling_hogs_are_preempted_and_their_results_stay_exact),
        cmocka_unit_test(root_exit_sweeps_actors_parked_in_recv_forever),
        cmocka_unit_test(root_exit_sweeps_stack_parked_and_sleeping_actors),
        cmocka_unit_test(two_runtimes_run_one_after_the_other),
        cmocka_unit_test(blocking_calls_move_actors_to_the_pool_and_back),
        cmocka_unit_test(try_spawn_at_capacity_returns_nil_at_capacity),
        cmocka_unit_test(recv_inside_gsub_callback_parks_on_the_stack),
        cmocka_unit_test(recv_inside_coroutine_wrap_parks_off_the_main_coroutine),
        cmocka_unit_test(crashing_actor_does_not_affect_others),
        cmocka_unit_test(actor_erroring_after_a_recv_park_reports_its_crash),
        cmocka_unit_test(a_name_given_while_dying_is_released_with_the_actor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
