-- What a hot reload costs the actors that take it: N actors have a module loaded and wait
-- in recv; each message round sends every one a number and waits for all replies. Prints
-- the time of a plain round, of smarm.reload (the compile), of the first round after a
-- reload (each actor takes the version first), and of later rounds.
--   build/smarm-lua tests/bench/reload_takes.lua [N=10000] [reloads=3]
local smarm = require "smarm"
local n = tonumber(arg[1]) or 10000
local reloads = tonumber(arg[2]) or 3

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir) == 0)
local function write(step)
   local f = assert(io.open(dir .. "/bench_hot.lua", "w"))
   f:write("local M = {}\nfunction M.f(x) return x + " .. step .. " end\nreturn M\n")
   f:close()
end
write(1)

local pids = {}
for i = 1, n do
   pids[i] = smarm.spawn(function(parent, d)
      local s = require "smarm"
      package.path = d .. "/?.lua;" .. package.path
      local m = require "bench_hot"
      while true do
         local x = s.recv()
         if x == "stop" then return end
         s.send(parent, m.f(x))
      end
   end, smarm.self(), dir)
end

-- one round: returns its milliseconds and the replies' mean
local function round()
   local t0 = smarm.now()
   for i = 1, n do smarm.send(pids[i], 0) end
   local sum = 0
   for _ = 1, n do sum = sum + smarm.recv() end
   return (smarm.now() - t0) * 1e3, sum / n
end

round()
print(string.format("%d actors: a plain round %.1f ms", n, (round())))
for r = 1, reloads do
   write(r + 1)
   local t0 = smarm.now()
   assert(smarm.reload("bench_hot"))
   local compile = (smarm.now() - t0) * 1e3
   local taking, mean = round()
   assert(mean == r + 1, "an actor answered with old code")
   local next_round = round()
   print(string.format("reload %d: compile %.2f ms; round taking it %.1f ms (%.1f us per "
      .. "actor over the plain round); next round %.1f ms", r, compile, taking,
      (taking - next_round) * 1e3 / n, next_round))
end
for i = 1, n do smarm.send(pids[i], "stop") end
os.execute("rm -rf " .. dir)
