-- Where new actors run at 2 schedulers. A spawned actor waits on its spawner's scheduler, and
-- an idle sibling takes it over only while that scheduler's new actors are worth moving: the
-- ones moved so far computed (a long first run) or spawned children of their own (a subtree
-- of a tree), or the scheduler has not come back to them for a watchdog tick. Short ones
-- (each sends a reply and ends) stay where they were spawned: a sibling that took half of
-- them pulled across cores what their spawner had just written, and a spawn+exit cost more at
-- 2 schedulers than at 1 (docs/DESIGN.md, "The spawn stack"). The runtime stats count first
-- runs on another scheduler than the spawner's (spawns_moved).
local smarm = require "smarm"
local C = require "smarm.ffi"
local runtime_stats = require("support.stats").runtime

local T = 30 -- the bound of every wait that should succeed

local function two_schedulers()
   if tonumber(runtime_stats().schedulers) < 2 then
      pending("needs at least 2 schedulers")
      return false
   end
   return true
end

local function moved() return tonumber(runtime_stats().spawns_moved) end

-- sends its ordinal to parent and ends
local function short_child(parent, i)
   require("smarm").send(parent, i)
end

-- computes for `n` steps (a million take about 10 ms), then sends its ordinal to parent
local function hog(parent, i, n)
   local x = 1
   for k = 1, n do x = (x * 31 + k) % 1000003 end
   require("smarm").send(parent, i + x * 0)
end

-- a node of a tree: spawns fanout[depth] children (none past the last level), sends parent the
-- number of leaves below it
local function tree_node(parent, fanout, depth)
   local s = require "smarm"
   local n = fanout[depth]
   if not n then
      s.send(parent, 1)
      return
   end
   local me, self_fn = s.self(), debug.getinfo(1, "f").func
   for _ = 1, n do s.spawn(self_fn, me, fanout, depth + 1) end
   local leaves = 0
   for _ = 1, n do leaves = leaves + s.recv() end
   s.send(parent, leaves)
end

describe("a spawned actor", function()
   it("that ends at once runs on its spawner's scheduler (spawn batches at 2 schedulers)",
      function()
         if not two_schedulers() then return end
         local me, batches, batch = smarm.self(), 10, 1000
         -- a first batch: the states and slots it leaves are the next batches'
         for i = 1, batch do smarm.spawn(short_child, me, i) end
         for _ = 1, batch do assert(smarm.recv(T), "a reply did not come") end
         local before, sum = moved(), 0
         for _ = 1, batches do
            for i = 1, batch do smarm.spawn(short_child, me, i) end
            for _ = 1, batch do sum = sum + assert(smarm.recv(T), "a reply did not come") end
         end
         assert.are.equal(batches * batch * (batch + 1) / 2, sum)
         local n, m = batches * batch, moved() - before
         -- measured: some tens to a few hundred of the 10,000 (the few a sibling takes to learn
         -- they are short, again every few watchdog ticks), up to 2,800 on a loaded machine (the
         -- watchdog shares a spawn stack whose scheduler waits a tick for a CPU). Before, the
         -- sibling, woken at every spawn, ran 4,400-7,900 of them
         assert.is_true(m * 3 < n, ("%d of %d short actors ran on another scheduler"):format(m, n))
      end)

   it("that computes still spreads over both schedulers", function()
      if not two_schedulers() then return end
      local me, n = smarm.self(), 8
      local function busy(i) return tonumber(C.smarm_ffi_sched_busy_ns(i)) end
      local busy0 = { busy(0), busy(1) }
      for i = 1, n do smarm.spawn(hog, me, i, 5e6) end
      local sum = 0
      for _ = 1, n do sum = sum + assert(smarm.recv(T), "a hog did not reply") end
      assert.are.equal(n * (n + 1) / 2, sum)
      local b0, b1 = busy(0) - busy0[1], busy(1) - busy0[2]
      -- 8 x about 50 ms of computation: each scheduler ran a good part of it (about half,
      -- measured; the watchdog samples busy time at its ticks)
      assert.is_true(b0 * 5 > b0 + b1 and b1 * 5 > b0 + b1,
                     ("busy ms: %.1f and %.1f"):format(b0 / 1e6, b1 / 1e6))
   end)

   it("that spawns a subtree still moves to the idle scheduler (a tree at 2 schedulers)",
      function()
         if not two_schedulers() then return end
         -- 10 branches of 10 twigs of 200 leaves (20,110 actors), after the short actors above
         -- (which took the votes of the root's scheduler): a branch or twig a sibling takes
         -- spawns its children there, which gives a vote back, and its subtree runs on that
         -- core. measured: 2-30 first runs moved (a subtree each, or a few leaves)
         local before = moved()
         smarm.spawn(tree_node, smarm.self(), { 10, 10, 200 }, 1)
         assert.are.equal(10 * 10 * 200, assert(smarm.recv(T), "the tree did not reply"))
         local m = moved() - before
         assert.is_true(m > 0, "no part of the tree ran on another scheduler")
      end)
end)
