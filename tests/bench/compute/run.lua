-- Runs one compute benchmark and prints its wall time: the same file under plain
-- luajit and as smarm-lua's root actor. Usage: run.lua NAME [SIZE]
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local name = assert(arg[1], "usage: run.lua NAME [SIZE]")
local bench = require(name)
local size = tonumber(arg[2]) or bench.size
local now = require "clock"
local t0 = now()
local check = bench.run(size)
local t1 = now()
io.stderr:write(name, " ", size, ": ", tostring(check), "\n")
print(string.format("RESULT ms=%.1f", (t1 - t0) * 1e3))
