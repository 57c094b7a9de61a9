-- loop_compiles() -> whether a fresh 200-iteration loop starts a trace in the calling state
-- (with its JIT parameters as they are now): for specs of per-state JIT parameters.
local jit = require "jit"

local M = {}

function M.loop_compiles()
   local starts = 0
   local function on_trace(what)
      if what == "start" then starts = starts + 1 end
   end
   jit.attach(on_trace, "trace")
   local f = assert(load("local s = 0 for i = 1, 200 do s = s + i end return s"))
   local sum = f()
   jit.attach(on_trace)
   assert(sum == 20100)
   return starts > 0
end

-- trace_counts() -> a table whose start, stop and abort fields count the calling state's
-- trace events from now on (jit.attach keeps one handler per event: this one replaces any
-- other, and loop_compiles above replaces it)
function M.trace_counts()
   local c = { start = 0, stop = 0, abort = 0 }
   jit.attach(function(what)
      if c[what] then c[what] = c[what] + 1 end
   end, "trace")
   return c
end

return M
