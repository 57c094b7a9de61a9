-- spawn: spawn N actors that each send their ordinal to the root and exit.
-- Usage: smarm-lua spawn.lua [N=100000]   prints RESULT us_per_spawn=...

local n = math.floor(tonumber(arg[1]) or 1e5)

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
for i = 1, n do
   spawn(child, self, i)
end
local sum = 0
for _ = 1, n do
   sum = sum + recv()
end
local t1 = now()
assert(sum == n * (n + 1) / 2, "spawn: ordinals sum to " .. sum)

print(string.format("RESULT us_per_spawn=%.3f", (t1 - t0) * 1e6 / n))
