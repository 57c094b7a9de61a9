-- Probes of a state's per-state JIT parameters, for specs.
local jit = require "jit"

local M = {}

-- LuaJIT's number for the abort "trace too short" (its vmdef lists the messages)
local TOO_SHORT
for i, msg in pairs(require("jit.vmdef").traceerr) do
   if msg == "trace too short" then TOO_SHORT = i end
end
assert(TOO_SHORT, "jit.vmdef has no \"trace too short\"")

-- trace_counts() -> a table whose start, stop and abort fields count the calling state's
-- trace events from now on (too_short the aborts for "trace too short"), and whose detach()
-- stops that (jit.attach keeps one handler per event: this one replaces any other)
function M.trace_counts()
   local c = { start = 0, stop = 0, abort = 0, too_short = 0 }
   local function on_trace(what, _, _, _, err)
      if type(c[what]) == "number" then c[what] = c[what] + 1 end
      if what == "abort" and err == TOO_SHORT then c.too_short = c.too_short + 1 end
   end
   function c.detach() jit.attach(on_trace) end
   jit.attach(on_trace, "trace")
   return c
end

-- loop_compiles([counts]) -> whether a fresh 200-iteration loop starts a trace in the calling
-- state (with its JIT parameters as they are now). counts: the state's trace_counts(), if
-- it has them; without, a handler of its own is attached for the probe and taken off after
function M.loop_compiles(counts)
   local c = counts or M.trace_counts()
   local before = c.start
   local f = assert(load("local s = 0 for i = 1, 200 do s = s + i end return s"))
   local sum = f()
   if not counts then c.detach() end
   assert(sum == 20100)
   return c.start > before
end

return M
