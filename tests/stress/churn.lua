-- churn: waves of actors that start and end (returning, smarm.exit(), after a message or
-- straight away). Checks that every one ran exactly once and that none is left alive.
-- Usage: smarm-lua -S 2 tests/stress/churn.lua [small|large] [seed]

-- A worker reports its index to the parent and ends in the way `how` says.
local function worker(parent, i, how)
   local smarm = require "smarm"
   if how == 1 then
      local m = smarm.recv()
      smarm.send(parent, i + m)
      return
   end
   smarm.send(parent, i)
   if how == 2 then
      smarm.exit()
   elseif how == 3 then
      smarm.yield()
   end
end

local smarm = require "smarm"
local common = require "common"

local function run(size, seed)
   local total = size == "large" and 100000 or 20000
   local wave = size == "large" and 5000 or 1000
   math.randomseed(seed)

   local t0 = smarm.now()
   local me = smarm.self()
   local seen = {}
   local peak = 0
   for first = 1, total, wave do
      local last = math.min(first + wave - 1, total)
      local waiting = {}
      for i = first, last do
         local how = math.random(0, 3)
         local pid = smarm.spawn(worker, me, i, how)
         if how == 1 then
            waiting[#waiting + 1] = pid
         end
      end
      for _, pid in ipairs(waiting) do
         smarm.send(pid, 0)
      end
      peak = math.max(peak, common.others())
      for _ = first, last do
         local i = smarm.recv(30)
         common.check(i ~= nil, "wave %d: a worker never reported", first)
         common.check(not seen[i], "worker %d reported twice", i)
         common.check(i >= first and i <= last, "worker %d reported in wave %d", i, first)
         seen[i] = true
      end
   end
   common.wait_others(0)
   for i = 1, total do
      common.check(seen[i], "worker %d never reported", i)
   end
   common.check(smarm.recv(0) == nil, "a stray message after the churn")
   return common.report("churn", t0,
      "%d actors spawned and exited in waves of %d (peak %d alive), live=%d",
      total, wave, peak, common.others())
end

return common.main("churn", run, ...)
