--- Introspection (smarm.info, smarm.snapshot): the Lua half of the smarm table, loaded
-- into a state on the first access to a field the C core does not define.
local M = {}

local STATES = { "queued", "running", "running", "parked", "blocking" }
local KINDS = { [1] = "worker", [2] = "supervisor" }

--- Facts about a live actor.
-- @param pid the actor
-- @return the table README.md lists under smarm.info, or nil if the actor is not alive
function M.info(pid)
   -- a pid of this node as smarm.dist.export marks it is that pid
   if type(pid) == "userdata" then pid = require("smarm.dist.raw").unexport(pid) end
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
      heap = out.arena ~= 0 and "arena" or "shared", -- who serves its small blocks
      tables = tonumber(C.smarm_ffi_table_memory(pid)), -- bytes of the smarm.tables it owns
      parks = tonumber(out.parks),
      yields = tonumber(out.yields),
      messages_in = tonumber(out.messages_in),
      messages_out = tonumber(out.messages_out),
      stack = {
         reserve = tonumber(out.stack_reserve),
         guard = tonumber(out.stack_guard),
         high_water = tonumber(out.stack_high_water),
         shrinks = tonumber(out.stack_shrinks),
         released = tonumber(out.stack_released),
         held = out.stack_held ~= 0, -- it holds a C stack now (running, or parked in place)
      },
      current = out.current[0] ~= 0 and ffi.string(out.current) or nil,
      id = out.child_id[0] ~= 0 and ffi.string(out.child_id) or nil,
      type = KINDS[out.kind],
      timeslices = tonumber(out.timeslices),
      slices = tonumber(out.timeslices),
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
      recycled = out.recycled ~= 0, -- its state is an ended actor's, reset (the state pool)
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

--- Folds a snapshot into the forest of who started whom: supervisors with their children
-- (each child's id and type as in its supervisor's spec), and every other actor under the
-- actor that spawned it, or at the top when that one is gone.
-- @param snap a snapshot (default: a fresh one)
-- @return array of root nodes {pid, id, name, type, state, children = {...}}; within each
-- level, supervisors first, then by id and pid
function M.tree(snap)
   snap = snap or M.snapshot()
   local nodes = {}
   for _, info in ipairs(snap) do
      nodes[info.pid] = {
         pid = info.pid, id = info.id, name = info.name, type = info.type or "actor",
         state = info.state, children = {},
      }
   end
   local roots = {}
   for _, info in ipairs(snap) do
      local up = info.parent and nodes[info.parent]
      local list = up and up.children or roots
      list[#list + 1] = nodes[info.pid]
   end
   local rank = { supervisor = 0, worker = 1, actor = 2 }
   local function before(a, b)
      if rank[a.type] ~= rank[b.type] then return rank[a.type] < rank[b.type] end
      if (a.id or "") ~= (b.id or "") then return (a.id or "") < (b.id or "") end
      return a.pid < b.pid
   end
   local function order(list)
      table.sort(list, before)
      for _, n in ipairs(list) do order(n.children) end
   end
   order(roots)
   return roots
end

--- A supervisor's hook: pid is its child with this id and type ("worker" or "supervisor"),
-- or with id nil, the supervisor itself.
function M.supervised(pid, id, kind)
   local C = require "smarm.ffi"
   C.smarm_ffi_set_child(pid, id, kind == "supervisor" and 2 or 1)
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
