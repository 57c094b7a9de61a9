-- primes_serial: count primes below N by trial division, in C chunks done one
-- after another in one plain LuaJIT state: the baseline for primes.lua.
-- Usage: luajit primes_serial.lua [N=3e6] [C=64]   prints RESULT ms=...

local ffi = require "ffi"

local limit = math.floor(tonumber(arg[1]) or 3e6)
local chunks = math.floor(tonumber(arg[2]) or 64)

-- Same as primes.lua's worker body: primes in [lo, hi) by odd trial divisors.
local function count(lo, hi)
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
   return c
end

ffi.cdef [[
struct bench_timespec { long tv_sec; long tv_nsec; };
int clock_gettime(int clk, struct bench_timespec *ts);
]]
local ts = ffi.new("struct bench_timespec")
local function now()
   ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local t0 = now()
local total = 0
for i = 0, chunks - 1 do
   total = total + count(math.floor(i * limit / chunks), math.floor((i + 1) * limit / chunks))
end
local t1 = now()
if limit == 3e6 then
   assert(total == 216816, "primes_serial: counted " .. total .. " primes, expected 216816")
end

print(string.format("primes=%d", total))
print(string.format("RESULT ms=%.1f", (t1 - t0) * 1e3))
