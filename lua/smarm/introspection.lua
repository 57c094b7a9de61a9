--- Introspection (smarm.info, smarm.snapshot): the Lua half of the smarm table, loaded
-- into a state on the first access to a field the C core does not define.
local M = {}

local STATES = { "queued", "running", "running", "parked", "blocking" }

--- Facts about a live actor.
-- @param pid the actor
-- @return the table README.md lists under smarm.info, or nil if the actor is not alive
function M.info(pid)
   if type(pid) ~= "number" then
      error("smarm.info: bad pid (a number expected, got " .. type(pid) .. ")", 2)
   end
   local ffi = require "ffi"
   local C = require "smarm.ffi"
   local out = ffi.new("smarm_actor_info")
   if C.smarm_ffi_actor_info(pid, out) ~= 0 then
      return nil
   end
   return {
      pid = tonumber(out.pid),
      parent = out.parent ~= 0 and tonumber(out.parent) or nil,
      state = STATES[out.state],
      mailbox = tonumber(out.mailbox),
      memory = tonumber(out.memory),
      tables = tonumber(C.smarm_ffi_table_memory(pid)), -- bytes of the smarm.tables it owns
      parks = tonumber(out.parks),
      yields = tonumber(out.yields),
      messages_in = tonumber(out.messages_in),
      stack = { reserve = tonumber(out.stack_reserve), guard = tonumber(out.stack_guard) },
      timeslices = tonumber(out.timeslices),
      migrations = tonumber(out.migrations),
      preemptions = {
         hook = tonumber(out.preempt_hook),
         jit = tonumber(out.preempt_jit),
         safe_point = tonumber(out.preempt_safe),
         c_return = tonumber(out.preempt_cret),
      },
      max_heap = out.max_heap ~= 0 and tonumber(out.max_heap) or nil,
      links = tonumber(out.links),
      monitors = tonumber(out.monitors),
      trapping = out.trapping ~= 0,
      name = out.name[0] ~= 0 and ffi.string(out.name) or nil,
   }
end

--- Info tables of every live actor (each read at some instant, like ps).
-- @return array of info tables
function M.snapshot()
   local ffi = require "ffi"
   local C = require "smarm.ffi"
   local max = tonumber(C.smarm_ffi_actor_count()) + 64
   local pids = ffi.new("uint64_t[?]", max)
   local n = C.smarm_ffi_pids(pids, max)
   local out = {}
   for i = 0, n - 1 do
      local info = M.info(tonumber(pids[i]))
      if info then
         out[#out + 1] = info
      end
   end
   return out
end

-- smarm.task, smarm.table, smarm.logger: their modules load on the first use of a field.
for _, name in ipairs({ "task", "table", "logger" }) do
   M[name] = setmetatable({}, {
      __index = function(proxy, k)
         setmetatable(proxy, nil)
         for f, v in pairs(require("smarm." .. name)) do rawset(proxy, f, v) end
         return rawget(proxy, k)
      end,
   })
end

return M
