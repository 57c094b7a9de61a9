-- timers: N actors each sleeping 10 ms (total ms and mean lateness), then N send_after
-- of 1 ms to one actor (total ms until all arrived).
-- Usage: smarm-lua timers.lua [N=100000] [SLEEP]   prints RESULT total_ms=... (both phases
-- summed). SLEEP (seconds, instead of 10 ms) is for a look at the sleepers' cold wakes under
-- valgrind (scripts/line-census), where a run is some 100 times slower and 10 ms would leave
-- few of them asleep at once; without it the sleepers are the twin's.

local n = math.floor(tonumber(arg[1]) or 1e5)
local pause = tonumber(arg[2])

-- Sleeps 10 ms and reports how late it woke (seconds).
local function sleeper(parent)
   local smarm = require "smarm"
   local t0 = smarm.now()
   smarm.sleep(0.01)
   smarm.send(parent, smarm.now() - t0 - 0.01)
end

-- The same for SLEEP seconds.
local function sleeper_for(parent, seconds)
   local smarm = require "smarm"
   local t0 = smarm.now()
   smarm.sleep(seconds)
   smarm.send(parent, smarm.now() - t0 - seconds)
end

-- Counts n messages, then tells the parent.
local function sink(parent, count)
   local smarm = require "smarm"
   for _ = 1, count do
      smarm.recv()
   end
   smarm.send(parent, "all")
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local self = smarm.self()

local t0 = smarm.now()
for _ = 1, n do
   if pause then
      smarm.spawn(sleeper_for, self, pause)
   else
      smarm.spawn(sleeper, self)
   end
end
local late = 0
for _ = 1, n do
   late = late + smarm.recv()
end
local sleep_ms = (smarm.now() - t0) * 1e3

local pid = smarm.spawn(sink, self, n)
local t1 = smarm.now()
for i = 1, n do
   smarm.send_after(0.001, pid, i)
end
assert(smarm.recv() == "all")
local send_ms = (smarm.now() - t1) * 1e3

print(string.format("sleep: %d actors x %g ms in %.1f ms, mean lateness %.3f ms", n,
   (pause or 0.01) * 1e3, sleep_ms, late / n * 1e3))
print(string.format("send_after: %d timers to one actor in %.1f ms", n, send_ms))
print(string.format("RESULT total_ms=%.1f", sleep_ms + send_ms))
