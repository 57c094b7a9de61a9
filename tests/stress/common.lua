-- Shared by the stress programs: the command line (size and seed), checks that fail the run,
-- waiting for actors to end, and the one-line report each program prints.
local smarm = require "smarm"

local M = {}

--- Parses `small|large [seed]` (the arguments scripts/stress passes).
-- @param ... the program's arguments
-- @return "small" or "large", and the seed (a number, default 1)
function M.args(...)
   local size, seed = ...
   size = size or "small"
   if size ~= "small" and size ~= "large" then
      error("usage: smarm-lua tests/stress/NAME.lua [small|large] [seed]", 2)
   end
   return size, tonumber(seed) or 1
end

--- Raises an error (ending the run with status 1) unless cond holds.
-- @param cond the condition
-- @param fmt a string.format pattern for the failure, then its arguments
function M.check(cond, fmt, ...)
   if not cond then
      error("stress check failed: " .. fmt:format(...), 2)
   end
end

--- The number of live actors other than the caller.
function M.others()
   return #smarm.snapshot() - 1
end

--- Waits until at most `keep` other actors are alive; raises after `timeout` seconds.
-- @param keep actors allowed to remain (default 0)
-- @param timeout seconds (default 30)
function M.wait_others(keep, timeout)
   keep = keep or 0
   local deadline = smarm.now() + (timeout or 30)
   while M.others() > keep do
      M.check(smarm.now() < deadline, "%d actors still alive, want %d", M.others(), keep)
      smarm.sleep(0.002)
   end
end

--- The line a program prints: `name: what it verified (seconds)`.
-- @param name the program's name
-- @param t0 smarm.now() at the start
-- @param fmt a string.format pattern, then its arguments
function M.report(name, t0, fmt, ...)
   return ("%s: %s (%.1f s)"):format(name, fmt:format(...), smarm.now() - t0)
end

--- The tail of every program: run as the application (`smarm-lua NAME.lua small 7`), it
-- runs `run(size, seed)` and prints its report; required (by soak.lua, as NAME), it returns
-- `run` for the caller to repeat.
-- @param name the program's name
-- @param run function(size, seed) -> report line
-- @param ... the chunk's arguments
function M.main(name, run, ...)
   if (...) == name then
      return run
   end
   print(run(M.args(...)))
end

return M
