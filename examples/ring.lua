-- ring: N actors in a ring (the root is one of them) pass a small table around M laps.
-- Usage: smarm-lua examples/ring.lua [N=1000] [M=100]

-- Parses a positive integer argument, or raises an error naming it.
local function count(s, default, what)
   if s == nil then
      return default
   end
   local v = tonumber(s)
   if not v or v < 1 or v ~= math.floor(v) then
      error(("ring: %s must be a positive integer, got %q"):format(what, s), 0)
   end
   return v
end

-- A ring member: forwards {hop = k} to its successor as {hop = k + 1}; a negative hop
-- is the stop token, passed on unchanged before the member ends.
local function member(next_pid)
   local smarm = require "smarm"
   local send, recv = smarm.send, smarm.recv
   while true do
      local m = recv()
      if m.hop < 0 then
         send(next_pid, m)
         return
      end
      send(next_pid, { hop = m.hop + 1 })
   end
end

-- Required below the actor body so the body cannot capture it as an upvalue.
local smarm = require "smarm"

local n = count(arg[1], 1000, "N (actors)")
local laps = count(arg[2], 100, "M (laps)")

-- Build the ring backwards: the last member spawned is the root's successor, and the
-- first one spawned forwards to the root.
local t0 = smarm.now()
local first = smarm.self()
for _ = 1, n - 1 do
   first = smarm.spawn(member, first)
end
local t1 = smarm.now()

-- Each lap: the root sends the token to its successor and waits for it to come round.
local hops = 0
for _ = 1, laps do
   smarm.send(first, { hop = hops })
   hops = smarm.recv().hop + 1
end
local t2 = smarm.now()
assert(hops == n * laps, ("ring: counted %d hops, expected %d"):format(hops, n * laps))

-- Stop the members: the token goes round once more and comes back to the root.
smarm.send(first, { hop = -1 })
smarm.recv()

print(("ring: %d actors, %d laps"):format(n, laps))
print(("spawned %d actors in %.1f ms"):format(n - 1, (t1 - t0) * 1e3))
print(("%d hops in %.1f ms: %.0f ns per hop"):format(hops, (t2 - t1) * 1e3,
   (t2 - t1) * 1e9 / hops))
