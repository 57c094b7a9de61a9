-- pingpong: the root and one actor bounce a small table R times.
-- Usage: smarm-lua pingpong.lua [R=1000000]   prints RESULT ns_per_round_trip=...

local rounds = math.floor(tonumber(arg[1]) or 1e6)

-- Echo every message back to the parent; a negative n ends the actor.
local function ponger(parent)
   local smarm = require "smarm"
   local send, recv = smarm.send, smarm.recv
   while true do
      local m = recv()
      send(parent, m)
      if m.n < 0 then
         return
      end
   end
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now or os.clock

local pid = smarm.spawn(ponger, smarm.self())
local send, recv = smarm.send, smarm.recv

local t0 = now()
for i = 1, rounds do
   send(pid, {n = i})
   local m = recv()
   if m.n ~= i then
      error("pingpong: got " .. tostring(m.n) .. ", expected " .. i)
   end
end
local t1 = now()

send(pid, {n = -1})
recv()

print(string.format("RESULT ns_per_round_trip=%.1f", (t1 - t0) * 1e9 / rounds))
