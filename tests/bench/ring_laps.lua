-- ring_laps: the ring of ring.lua, timed ten laps at a time, to see how a hop's cost moves
-- over a run (collection cycles, first touches of fresh memory) rather than its mean.
-- Usage: smarm-lua [-S n] ring_laps.lua [N=1000] [SAMPLES=100]
--   prints one line of ns per hop, a figure per ten laps, then RESULT ns_per_hop=... (all)

local n = math.floor(tonumber(arg[1]) or 1000)
local samples = math.floor(tonumber(arg[2]) or 100)

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

local smarm = require "smarm"
local now = smarm.now

local next_pid = smarm.self()
for _ = 1, n - 1 do
   next_pid = smarm.spawn(member, next_pid)
end
local first = next_pid

local send, recv = smarm.send, smarm.recv
local h = 0
local out = {}
local t_start = now()
for s = 1, samples do
   local t0 = now()
   for _ = 1, 10 do
      send(first, {hop = h})
      h = recv().hop + 1
   end
   out[s] = string.format("%.0f", (now() - t0) * 1e9 / (n * 10))
end
local total = (now() - t_start) * 1e9 / (n * 10 * samples)
assert(h == n * 10 * samples, "ring_laps: hop count " .. h)

send(first, {hop = -1})
recv()

print(table.concat(out, " "))
print(string.format("RESULT ns_per_hop=%.1f", total))
