-- JIT parameters: an actor's loops compile late (the runtime's hotloop, so the message
-- loops of many actors stay interpreted), and an actor that runs a whole timeslice takes
-- LuaJIT's own parameters, so compute runs the traces plain LuaJIT would make.
local smarm = require "smarm"

-- The body of a fresh actor: whether a fresh 200-iteration loop starts a trace, before and
-- after the actor has computed for several timeslices; sent to `to`.
local function probe(to)
   local s = require "smarm"
   local jit = require "jit"
   local loop_compiles = require("support.jit_probe").loop_compiles
   local before = loop_compiles()
   -- interpreted (jit.off), so the switch happens at one of its bytecodes
   local function spin(seconds)
      local t0 = s.now()
      while s.now() - t0 < seconds do end
   end
   jit.off(spin)
   spin(0.1)
   s.send(to, { before = before, after = loop_compiles() })
end

describe("JIT parameters", function()
   it("switch to LuaJIT's own once an actor computes for a whole timeslice", function()
      -- a probe whose thread the OS set aside during its first slice looks as if it
      -- computed for a whole timeslice: such a run is tried again (at most 3 in all)
      local pid, mon, r
      for _ = 1, 3 do
         pid, mon = smarm.spawn_monitor(probe, smarm.self())
         r = assert(smarm.recv(30), "the probe did not answer")
         if not r.before then break end
         assert(mon:recv(10))
      end
      assert.is_false(r.before, "a 200-iteration loop compiled at once")
      assert.is_true(r.after, "the loop did not compile after a computing timeslice")
      local down = assert(mon:recv(10))
      assert.are.equal(pid, down.pid)
      assert.are.equal("normal", down.reason)
   end)
   it("leave a message loop interpreted, and give it up after three recordings", function()
      -- a loop whose first act is a C call (recv) would compile after 2000 passes into
      -- traces stitched around its calls; the runtime's parameters abort that recording
      -- (too short before the call) until the loop is blacklisted. LuaJIT tries an aborted
      -- loop again at ever longer intervals (nine aborts in these 12,000 passes), each
      -- recording switching the dispatch table twice; the runtime puts the next recording
      -- of a waiting loop that aborted at its head off by about 16,000 passes, and that
      -- one blacklists it
      local function ponger()
         local s = require "smarm"
         local traces = require("support.jit_probe").trace_counts()
         local n = 0
         while true do
            local m = s.recv()
            if m.stop then
               s.send(m.from, { n = n, stops = traces.stop, aborts = traces.abort,
                                short = traces.loop_too_short })
               return
            end
            n = n + 1
            s.send(m.from, n)
         end
      end
      local pid = smarm.spawn(ponger)
      local me = smarm.self()
      -- one message at a time: the ponger waits between them, so it never computes for
      -- a whole timeslice (which would give it LuaJIT's parameters)
      for i = 1, 12000 do
         smarm.send(pid, { from = me })
         assert.are.equal(i, smarm.recv(10))
      end
      smarm.send(pid, { from = me, stop = true })
      local r = assert(smarm.recv(10), "the ponger did not answer")
      assert.are.equal(12000, r.n)
      assert.are.equal(0, r.stops, "the message loop compiled a trace")
      assert.is_true(r.aborts > 0, "the loop never got hot: the test tests nothing")
      assert.is_true(r.short <= 3, r.short .. " aborted recordings of one message loop")
   end)
   it("give a gen_server's receive loop up after three recordings", function()
      -- the loop that waits is smarm.gen's receive loop, inside the server's own loop; the
      -- loops and functions around it abort too ("inner loop in root trace", and functions
      -- too short before a C call), LuaJIT's own business. The recordings that began at a
      -- loop and were too short are the receive loop's: 8 in 12,000 calls without the cut,
      -- 2-3 with it
      local gen_server = require "smarm.gen_server"
      local pid = assert(gen_server.start("support.jit_probe_server"))
      for i = 1, 12000 do
         assert.are.equal(i + 1, gen_server.call(pid, i, 10))
      end
      local counts = gen_server.call(pid, "counts", 10)
      assert(gen_server.stop(pid, "normal", 10))
      assert.is_true(counts.abort > 0, "the server's loops never got hot: the test tests nothing")
      assert.is_true(counts.loop_too_short <= 3,
                     counts.loop_too_short .. " recordings of the server's loops were too short")
   end)
   it("still compile a loop that computes before its first C call", function()
      -- the other side of the rule above: a pass of straight-line work (well over 32 IR
      -- instructions) before the call is worth a trace, and gets one after 2000 passes
      local function worker(to)
         local s = require "smarm"
         local traces = require("support.jit_probe").trace_counts()
         local x = 1.5
         for i = 1, 5000 do
            x = x * 1.0001 + i; x = x % 1000 + 0.5; x = x * 0.999 + 3; x = x % 997 + 1.25
            x = x * 1.0003 + i; x = x % 991 + 0.75; x = x * 0.998 + 5; x = x % 983 + 1.5
            x = x * 1.0007 + i; x = x % 977 + 0.25; x = x * 0.997 + 7; x = x % 971 + 1.75
            s.self()
         end
         s.send(to, { stops = traces.stop, x = x })
      end
      smarm.spawn(worker, smarm.self())
      local r = assert(smarm.recv(30), "the worker did not answer")
      assert.is_true(r.stops > 0, "a computing loop with a C call at its end never compiled")
   end)
   it("let a loop the runtime's parameters blacklisted compile once the actor computes", function()
      -- under the runtime's parameters a loop that calls C at once is blacklisted (its
      -- bytecode patched); an actor that then computes for a whole timeslice gets LuaJIT's
      -- parameters, and the loop must compile as plain LuaJIT would compile it
      local function worker(to)
         local s = require "smarm"
         local jit = require "jit"
         -- one handler for the whole test (jit.attach keeps one per event)
         local jit_probe = require "support.jit_probe"
         local traces = jit_probe.trace_counts()
         local self = s.self
         local function chunk(n)
            local x = 0
            for i = 1, n do
               x = x + i
               self()
            end
            return x
         end
         -- whether a fresh 200-iteration loop compiles: only at LuaJIT's hotloop
         local function retuned() return jit_probe.loop_compiles(traces) end
         -- hot, but never near a whole timeslice (short chunks, a wait after each):
         -- blacklisted once 100 chunks in a row start no trace (the aborts' penalties grow
         -- at random, to at most 30,000 passes between tries)
         local quiet, rounds, stopped = 0, 0, traces.stop
         while quiet < 100 and rounds < 20000 do
            local started = traces.start
            chunk(500)
            s.sleep(0)
            quiet = traces.start == started and quiet + 1 or 0
            rounds = rounds + 1
         end
         -- a thread the OS set aside looks as if it computed: such a run is tried again
         if retuned() then
            return s.send(to, { early = true })
         end
         -- (no trace: its recordings were all aborted)
         local blacklisted = quiet >= 100 and traces.stop == stopped
         -- compute (interpreted) until the state has LuaJIT's parameters
         local function spin(seconds)
            local t0 = s.now()
            while s.now() - t0 < seconds do end
         end
         jit.off(spin)
         local got = false
         for _ = 1, 300 do
            spin(0.01)
            if retuned() then
               got = true
               break
            end
         end
         local before = traces.stop
         for _ = 1, 20 do chunk(2000) end
         s.send(to, { blacklisted = blacklisted, retuned = got, compiled = traces.stop - before })
      end
      local r
      for _ = 1, 3 do
         smarm.spawn(worker, smarm.self())
         r = assert(smarm.recv(60), "the worker did not answer")
         if not r.early then break end
      end
      assert.is_nil(r.early, "every worker was retuned before its loop was blacklisted")
      assert.is_true(r.blacklisted, "the loop was not blacklisted: the test tests nothing")
      assert.is_true(r.retuned, "the worker never got LuaJIT's parameters")
      assert.is_true(r.compiled > 0, "the blacklisted loop stayed interpreted after the retune")
   end)
   it("stay the runtime's while an actor waits in a C call for many timeslices", function()
      -- the actor's thread sleeps in a blocking read (io.popen's pipe) for 100 timeslices
      -- of wall-clock time but uses hardly any CPU time: it did not compute, so its state
      -- keeps the runtime's parameters (a retune counted wall-clock time; so an actor whose
      -- thread the OS set aside flushed and recompiled its traces)
      local function sleeper(to)
         local s = require "smarm"
         local loop_compiles = require("support.jit_probe").loop_compiles
         local p = assert(io.popen("sleep 0.2"))
         p:read("*a")
         p:close()
         s.send(to, { after = loop_compiles() })
      end
      local pid, mon = smarm.spawn_monitor(sleeper, smarm.self())
      local r = assert(smarm.recv(30), "the sleeper did not answer")
      assert.is_false(r.after, "a 200-iteration loop compiled after a wait in a C call")
      local down = assert(mon:recv(10))
      assert.are.equal(pid, down.pid)
      assert.are.equal("normal", down.reason)
   end)
end)
