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

return M
