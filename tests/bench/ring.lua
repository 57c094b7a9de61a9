-- ring: N actors in a ring (the root is one of them) pass a small table M laps.
-- Usage: smarm-lua [-S n] ring.lua [N=1000] [M=1000]   prints RESULT ns_per_hop=...

local n = math.floor(tonumber(arg[1]) or 1000)
local laps = math.floor(tonumber(arg[2]) or 1000)

-- Forward {hop = k} as {hop = k + 1}; a negative hop is the stop token.
local function member(next_pid)
   local smarm = require "smarm"
   local send, recv = smarm.send, smarm.recv
   while true do
      local m = recv()
      local k = m.hop
      if k < 0 then
         send(next_pid, m)
         return
      end
      send(next_pid, {hop = k + 1})
   end
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now or os.clock

-- Build the ring backwards: the last member points at the root.
local next_pid = smarm.self()
for _ = 1, n - 1 do
   next_pid = smarm.spawn(member, next_pid)
end
local first = next_pid

local send, recv = smarm.send, smarm.recv
local t0 = now()
local h = 0
for _ = 1, laps do
   send(first, {hop = h})
   h = recv().hop + 1
end
local t1 = now()
assert(h == n * laps, "ring: hop count " .. h .. " ~= " .. n * laps)

send(first, {hop = -1})
recv()

print(string.format("RESULT ns_per_hop=%.1f", (t1 - t0) * 1e9 / (n * laps)))
