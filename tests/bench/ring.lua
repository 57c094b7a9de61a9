-- ring: N actors in a ring (the root is one of them) pass a small table M laps.
-- Usage: smarm-lua [-S n] ring.lua [N=1000] [M=1000] [EVERY] [KEEP=0]  prints RESULT ns_per_hop=...
-- With EVERY, it first prints a line of ns per hop for each EVERY laps: how a hop's cost
-- moves over a run (collection cycles, first touches of fresh memory) rather than its mean.
-- With KEEP, each member first makes KEEP small tables and keeps them: what a hop costs an
-- actor that holds state of its own, which each of its collection cycles walks (a diagnostic:
-- ring.erl has no such argument).

local n = math.floor(tonumber(arg[1]) or 1000)
local laps = math.floor(tonumber(arg[2]) or 1000)
local every = math.floor(tonumber(arg[3]) or laps)
local keep_n = math.floor(tonumber(arg[4]) or 0)

-- Forward {hop = k} as {hop = k + 1}; a negative hop is the stop token.
local function member(next_pid, n_keep)
   local smarm = require "smarm"
   local send, recv = smarm.send, smarm.recv
   -- (none at all without KEEP: the ring's members keep what its twin's do)
   local keep = n_keep > 0 and {} or nil
   for i = 1, n_keep do keep[i] = {i} end
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
   next_pid = smarm.spawn(member, next_pid, keep_n)
end
local first = next_pid

local send, recv = smarm.send, smarm.recv
-- One lap before the clock starts, here and in ring.erl: spawn only queues a member, whose
-- first run makes its Lua state, while BEAM's spawn returns a whole process. Timed from the
-- first hop, this ring paid for 999 boots (about 30 ms) that the twin pays before its clock.
send(first, {hop = 0})
assert(recv().hop == n - 1, "ring: the warm-up lap lost hops")
local t0 = now()
local h = 0
local samples, ts = {}, t0
for lap = 1, laps do
   send(first, {hop = h})
   h = recv().hop + 1
   if every < laps and lap % every == 0 then
      local t = now()
      samples[#samples + 1] = string.format("%.0f", (t - ts) * 1e9 / (n * every))
      ts = t
   end
end
local t1 = now()
assert(h == n * laps, "ring: hop count " .. h .. " ~= " .. n * laps)

send(first, {hop = -1})
recv()

if #samples > 0 then print(table.concat(samples, " ")) end
print(string.format("RESULT ns_per_hop=%.1f", (t1 - t0) * 1e9 / (n * laps)))
