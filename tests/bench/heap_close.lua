-- heap_close: how long an actor with a large heap takes to end. It builds N entries
-- {i, tostring(i)} (2N small objects and N strings: past 4 MiB, its state has an arena of its
-- own), reports, and waits; the root then tells it to return and times the wait for its down
-- notice: the actor's return and the close of its whole heap.
-- Usage: smarm-lua heap_close.lua [N=1000000] [ROUNDS=3]   prints RESULT ms_close=... (mean)
local n = math.floor(tonumber(arg[1]) or 1000000)
local rounds = math.floor(tonumber(arg[2]) or 3)

local function holder(count, parent)
   local smarm = require "smarm"
   local t = {}
   for i = 1, count do t[i] = { i, tostring(i) } end
   smarm.send(parent, #t)
   smarm.recv()
end

-- Required below the actor's body so that it cannot capture it as an upvalue.
local smarm = require "smarm"

local total = 0
for _ = 1, rounds do
   local pid, mon = smarm.spawn_monitor(holder, n, smarm.self())
   assert(smarm.recv(120) == n, "heap_close: the holder did not report")
   local t0 = smarm.now()
   smarm.send(pid, "go")
   local down = assert(mon:recv(120), "heap_close: no down notice")
   total = total + (smarm.now() - t0)
   assert(down.reason == "normal", "heap_close: the holder ended with " .. tostring(down.reason))
end
print(string.format("RESULT ms_close=%.2f", total * 1e3 / rounds))
