-- Probes of a state's per-state JIT parameters, for specs.
local jit = require "jit"

local M = {}

local vmdef, jutil = require "jit.vmdef", require "jit.util"

-- LuaJIT's number for the abort "trace too short" (its vmdef lists the messages)
local TOO_SHORT
for i, msg in pairs(vmdef.traceerr) do
   if msg == "trace too short" then TOO_SHORT = i end
end
assert(TOO_SHORT, "jit.vmdef has no \"trace too short\"")

-- Whether the bytecode at pc of func is a loop's (where a loop's trace starts).
local function at_loop(func, pc)
   local ins = jutil.funcbc(func, pc)
   if not ins then return false end
   local op = ins % 256
   local name = vmdef.bcnames:sub(op * 6 + 1, op * 6 + 6):gsub(" +$", "")
   return name == "LOOP" or name == "FORL" or name == "ITERL" or name == "ITERN"
end

-- trace_counts() -> a table whose start, stop and abort fields count the calling state's
-- trace events from now on (loop_too_short: the aborts for "trace too short" of recordings
-- that began at a loop), and whose detach() stops that (jit.attach keeps one handler per
-- event: this one replaces any other)
function M.trace_counts()
   local c = { start = 0, stop = 0, abort = 0, loop_too_short = 0 }
   local from_loop = false
   local function on_trace(what, _, func, pc, err)
      if type(c[what]) == "number" then c[what] = c[what] + 1 end
      if what == "start" then
         from_loop = at_loop(func, pc)
      elseif what == "abort" and err == TOO_SHORT and from_loop then
         c.loop_too_short = c.loop_too_short + 1
      end
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
