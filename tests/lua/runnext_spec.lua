-- Where a woken actor runs. An actor that a send wakes runs next on the scheduler of the actor
-- that sent (its runnext), not on an idle one: in a ring, where each member forwards a token
-- and then waits, the member it woke runs at once on the same core, with the message still
-- in that core's cache, while the other scheduler sleeps. Handing it to an idle scheduler
-- instead moved about every other hop across cores and made the ring slower (docs/DESIGN.md,
-- "A woken actor runs where its waker ran"). The runtime stats count the runs taken from a
-- scheduler's own runnext and those another scheduler took over (an idle one's spin takes a
-- busy one's runnext).
local smarm = require "smarm"
local runtime_stats = require("support.stats").runtime

local T = 30 -- the bound of every wait that should succeed

local function stats()
   local st = runtime_stats()
   return {
      runs = tonumber(st.runnext_runs),
      stolen = tonumber(st.runnext_stolen),
      released = tonumber(st.runnext_released),
      schedulers = tonumber(st.schedulers),
   }
end

-- whether the run has the 2 schedulers these cases need (the case is marked pending if not)
local function two_schedulers()
   if stats().schedulers >= 2 then
      return true
   end
   pending("needs at least 2 schedulers")
   return false
end

-- a ring member: forwards the token to next_pid, one more, until it is negative (then passes
-- it on and ends; a member left waiting is stopped at the end of the run)
local function member(next_pid)
   local s = require "smarm"
   while true do
      local m = s.recv()
      if m < 0 then
         s.send(next_pid, m)
         return
      end
      s.send(next_pid, m + 1)
   end
end

describe("an actor woken by a send", function()
   it("runs next on the sender's scheduler (a ring at 2 schedulers stays on one core)", function()
      if not two_schedulers() then
         return
      end
      local n, laps = 200, 20
      local next_pid = smarm.self()
      local members = {}
      for i = 1, n - 1 do
         next_pid = smarm.spawn(member, next_pid)
         members[i] = next_pid
      end
      -- one lap first: every member has booted (a boot may run on either scheduler)
      smarm.send(next_pid, 0)
      assert.are.equal(n - 1, smarm.recv(T))
      local before = stats()
      local moves0 = 0
      for _, pid in ipairs(members) do moves0 = moves0 + smarm.info(pid).migrations end
      local h = 0
      for _ = 1, laps do
         smarm.send(next_pid, h)
         h = assert(smarm.recv(T), "the token did not come back") + 1
      end
      assert.are.equal(n * laps, h)
      local after = stats()
      local moves = -moves0
      for _, pid in ipairs(members) do moves = moves + smarm.info(pid).migrations end
      smarm.send(next_pid, -1)
      assert.are.equal(-1, smarm.recv(T))
      local hops = n * laps
      local runs, stolen = after.runs - before.runs, after.stolen - before.stolen
      -- every hop wakes the next member into the sender's runnext (all of them, measured; a run
      -- in 32 looks at the shared queues first and takes the runnext after them, counted the
      -- same). Handing the woken member to the idle scheduler ran about 20% from the runnext.
      assert.is_true(runs * 10 >= hops * 8,
                     ("%d of %d hops ran from the runnext"):format(runs, hops))
      -- an idle scheduler's spin takes a busy one's runnext only at its end: a few at most
      assert.is_true(stolen * 10 < hops, ("%d of %d hops were taken over"):format(stolen, hops))
      -- the token stays on one scheduler: a member runs where it ran before (the watchdog
      -- moves it when that scheduler's thread waits long for a CPU on a loaded machine;
      -- handing each woken member to the idle scheduler moved about half of the runs)
      assert.is_true(moves * 5 < hops, ("%d of %d runs moved cores"):format(moves, hops))
   end)
end)

describe("an actor woken by another's death", function()
   -- the dead actor's scheduler finalizes it and then looks for work: whom the death wakes
   -- (here a trapped exit signal) runs there next, as if woken by a running actor. Through the
   -- shared queue the idle scheduler's spin took it, so a spawn_link-and-wait loop moved
   -- cores at every cycle (4.7 against 1.5 us per cycle at 2 schedulers).
   it("runs next where that one ended (a spawn_link loop stays on one core)", function()
      if not two_schedulers() then
         return
      end
      local rx = smarm.trap_exit(true)
      local function bye()
         require("smarm").exit("bye")
      end
      local cycles = 300
      local me = smarm.self()
      local moves0 = smarm.info(me).migrations
      local before = stats()
      for _ = 1, cycles do
         local pid = smarm.spawn_link(bye)
         local sig = assert(rx:recv(T), "no exit signal")
         assert.are.equal(pid, sig.from)
         assert.are.equal("bye", sig.reason)
      end
      local moves = smarm.info(me).migrations - moves0
      local runs = stats().runs - before.runs
      smarm.trap_exit(false)
      -- each cycle runs the child from the root's runnext, then the root from the child's
      assert.is_true(runs * 10 >= cycles * 2 * 8,
                     ("%d runs from the runnext in %d cycles"):format(runs, cycles))
      assert.is_true(moves * 5 < cycles,
                     ("the root moved cores %d times in %d cycles"):format(moves, cycles))
   end)
end)
