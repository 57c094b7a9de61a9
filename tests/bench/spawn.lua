-- spawn: spawn N actors that each send their ordinal to the root and exit. The
-- root collects the replies of each batch of B spawns before it spawns the
-- next batch, so at most B replies wait in its inbox (the BEAM twin does the
-- same: a mailbox of N waiting replies would have its GC copy a growing queue).
-- Usage: smarm-lua spawn.lua [N=100000] [B=1000]   prints RESULT us_per_spawn=...

local n = math.floor(tonumber(arg[1]) or 1e5)
local batch = math.floor(tonumber(arg[2]) or 1000)

local function child(parent, i)
   local smarm = require "smarm"
   smarm.send(parent, i)
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now or os.clock

local self = smarm.self()
local spawn, recv = smarm.spawn, smarm.recv

local t0 = now()
local sum, i = 0, 0
while i < n do
   local k = math.min(batch, n - i)
   for j = i + 1, i + k do
      spawn(child, self, j)
   end
   for _ = 1, k do
      sum = sum + recv()
   end
   i = i + k
end
local t1 = now()
assert(sum == n * (n + 1) / 2, "spawn: ordinals sum to " .. sum)

print(string.format("RESULT us_per_spawn=%.3f", (t1 - t0) * 1e6 / n))
