-- A wall clock for the compute benchmarks, the same under plain luajit and inside an
-- actor: clock_gettime(CLOCK_MONOTONIC) through the FFI.
local ffi = require "ffi"
pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]])
local ts = ffi.new("bench_timespec")
return function()
   ffi.C.clock_gettime(1, ts)
   return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
