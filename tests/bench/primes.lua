-- primes: count primes below N by trial division, split into C chunks done by
-- C actors that each send their count to the root.  The baseline is
-- primes_serial.lua (the same chunks, one after another, in plain LuaJIT).
-- Usage: smarm-lua [-S n] primes.lua [N=3e6] [C=64]   prints RESULT ms=...

local limit = math.floor(tonumber(arg[1]) or 3e6)
local chunks = math.floor(tonumber(arg[2]) or 64)

-- Count the primes in [lo, hi) by odd trial divisors and send {i, count} to root.
local function worker(root, i, lo, hi)
   local smarm = require "smarm"
   local c = 0
   for n = lo, hi - 1 do
      if n == 2 or n == 3 then
         c = c + 1
      elseif n > 4 and n % 2 ~= 0 then
         local prime = true
         local d = 3
         while d * d <= n do
            if n % d == 0 then
               prime = false
               break
            end
            d = d + 2
         end
         if prime then
            c = c + 1
         end
      end
   end
   smarm.send(root, {i = i, count = c})
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now or os.clock

local t0 = now()
local self = smarm.self()
for i = 0, chunks - 1 do
   smarm.spawn(worker, self, i, math.floor(i * limit / chunks),
               math.floor((i + 1) * limit / chunks))
end
local total, seen = 0, {}
for _ = 1, chunks do
   local m = smarm.recv()
   assert(not seen[m.i], "primes: chunk " .. m.i .. " reported twice")
   seen[m.i] = true
   total = total + m.count
end
local t1 = now()
if limit == 3e6 then
   assert(total == 216816, "primes: counted " .. total .. " primes, expected 216816")
end

print(string.format("primes=%d", total))
print(string.format("RESULT ms=%.1f", (t1 - t0) * 1e3))
