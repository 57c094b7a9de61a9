--- The runtime's counters (smarm_ffi_runtime_stats), for the specs that check where actors
-- ran or what the runtime did: a fresh snapshot each call.
local ffi = require "ffi"
local C = require "smarm.ffi"

local M = {}

--- A snapshot of the runtime stats (a smarm_runtime_stats cdata: tonumber its fields).
function M.runtime()
   local st = ffi.new("smarm_runtime_stats")
   C.smarm_ffi_runtime_stats(st)
   return st
end

--- The states the pools hold and the spawns took from them so far: pooled (the once-a-second
--- trim's closes counted as still pooled, so that a spec counting what went to the pools does
--- not see them go) plus recycled. A state that goes to a pool moves it by one.
function M.pool_count()
   local st = M.runtime()
   return tonumber(st.states_pooled) + tonumber(st.states_trimmed) + tonumber(st.states_recycled)
end

--- Waits (bounded, 2 s) until pool_count() stays the same for three looks 20 ms apart: the
--- actors that ended before have been pooled or closed.
function M.pool_settle()
   local smarm = require "smarm"
   local last, still = -1, 0
   local deadline = smarm.now() + 2
   while still < 3 and smarm.now() < deadline do
      local n = M.pool_count()
      if n == last then still = still + 1 else still, last = 0, n end
      smarm.sleep(0.02)
   end
end

return M
