--- The simple_one_for_one supervisor (OTP's dynamic supervisor): one child template,
-- children started on request with supervisor.start_child(sup, args...) (the args are
-- appended to the template's start arguments), all alike. Every per-child operation
-- costs O(1) however many children run: children are kept by pid in a table, their
-- down notices all arrive on one channel (smarm.monitor(pid, rx)), the counts are kept
-- as they change, and the restart intensity is the supervisor's O(1) ring.
local smarm = require "smarm"

local M = {}

-- h: the helpers of smarm.supervisor handed over by supervisor.run (child_main, allowed,
-- is_abnormal, warn, is_tx, reply: answers a request and spends its tx, started, await_down:
-- a child's down notice, the others held back in st.pending for the loop).
local h

-- The state: template (a checked child spec), kids (pid -> the ref of its monitor),
-- args and nargs (pid -> its start_child arguments and their count, for a child started
-- with some), count, downs_rx/downs_tx, trap, parent, parent_mon, ring (C intensity
-- ring), start_timeout, pending (down notices held back while a stop waits for one
-- child). A child without arguments costs the supervisor's heap one object, its ref, and
-- not a record and an empty table as well: each collection of a supervisor marks and
-- sweeps what it keeps, 100,000 children's worth in a large one.

-- No arguments (never written to).
local NO_ARGS = {}

-- Spawns a child with the template's start arguments followed by args[1..n], linked,
-- owned and monitored into downs_rx, and waits for its start report.
-- -> pid | nil, reason
local function start(st, args, n)
   local t = st.template
   local s = t.start
   local all, k = {}, 0
   for i = 3, #s do
      k = k + 1
      all[k] = s[i]
   end
   for i = 1, n do all[k + i] = args[i] end
   local tx, rx = smarm.channel()
   local ok, pid = pcall(smarm.spawn_opt,
      { link = true, owned = true, stack = t.stack, max_heap = t.max_heap },
      h.child_main, tx, smarm.self(), t.init_ack, s[1], s[2], unpack(all, 1, k + n))
   if not ok then
      tx:release()
      return nil, pid
   end
   local ref = smarm.monitor(pid, st.downs_rx)
   -- from here only the child's copy of tx keeps rx open: its death reads "closed"
   tx:release()
   local v, err = rx:recv(st.start_timeout)
   if type(v) == "table" and v.ok then
      st.kids[pid] = ref
      if n > 0 then st.args[pid], st.nargs[pid] = args, n end
      st.count = st.count + 1
      return pid
   end
   -- its down notice (if any comes) finds no record and is ignored
   if err == "timeout" then
      smarm.unlink(pid)
      smarm.kill(pid)
      return nil, "timeout"
   end
   if type(v) == "table" then return nil, v.reason == nil and "init_failed" or v.reason end
   return nil, smarm.terminal_reason(pid) or "init_failed"
end

-- Takes child pid out of the books.
local function drop(st, pid)
   st.kids[pid], st.args[pid], st.nargs[pid] = nil, nil, nil
   st.count = st.count - 1
end

-- Takes a child's down notice out of the books: true and the child's start_child
-- arguments and their count, or nil for a stale notice.
local function forget(st, d)
   local pid = d.pid
   local ref = st.kids[pid]
   if ref == nil or ref ~= d.ref then return nil end
   local args, n = st.args[pid] or NO_ARGS, st.nargs[pid] or 0
   drop(st, pid)
   return true, args, n
end

-- Stops one child as the template's shutdown says.
local function stop(st, pid)
   if not st.kids[pid] then return end
   local grace = st.template.shutdown
   local down
   if grace == "brutal_kill" then
      smarm.kill(pid)
   else
      smarm.shutdown(pid)
      if grace ~= "infinity" then
         down = h.await_down(st, pid, grace)
         if not down then smarm.kill(pid) end
      end
   end
   if not down then h.await_down(st, pid) end
   drop(st, pid)
end

-- An exit signal: "stop" (an ordered shutdown), "exit", reason (the parent went), or nil.
local function on_signal(st, sig)
   if sig.request and sig.reason == "shutdown" then return "stop" end
   if sig.from == st.parent then
      if sig.reason == "shutdown" then return "stop" end
      return "exit", sig.reason
   end
   -- a request from a live actor that is not a child (a child's death is seen through
   -- its monitor; its exit signal comes from a dead actor)
   if sig.reason == "shutdown" and not st.kids[sig.from]
      and smarm.terminal_reason(sig.from) == nil then
      return "stop"
   end
end

-- Stops every child at once, as OTP stops a simple_one_for_one's: all are asked, then
-- those still running when the grace is over are killed.
local function stop_all(st)
   -- notices a single stop held back are deaths already: no other notice comes for them
   for _, d in ipairs(st.pending) do forget(st, d) end
   st.pending = {}
   local grace = st.template.shutdown
   for pid in pairs(st.kids) do
      if grace == "brutal_kill" then smarm.kill(pid) else smarm.shutdown(pid) end
   end
   local deadline = type(grace) == "number" and smarm.now() + grace or nil
   while st.count > 0 do
      local left = deadline and math.max(0, deadline - smarm.now())
      local d = st.downs_rx:recv(left)
      if d == nil then
         for pid in pairs(st.kids) do smarm.kill(pid) end
         deadline = nil
      else
         forget(st, d)
      end
   end
end

local function terminate(st, reason)
   stop_all(st)
   smarm.exit(reason)
end

-- A child's down notice: restarted with the same arguments if its restart type says so
-- and the intensity allows.
local function on_down(st, d)
   local known, args, n = forget(st, d)
   if not known then return end
   local restart = st.template.restart
   if restart == "temporary" or (restart == "transient" and not h.is_abnormal(d.reason)) then
      return
   end
   while true do
      if not h.allowed(st) then terminate(st, "shutdown") end
      if start(st, args, n) then return end
   end
end

local handlers = {}

function handlers.start_child(st, req)
   local args = type(req.args) == "table" and req.args or NO_ARGS
   local n = type(req.n) == "number" and req.n or #args
   return start(st, args, n)
end

function handlers.terminate_child(st, req)
   local pid = req.id
   if not st.kids[pid] then return nil, "not_found" end
   stop(st, pid)
   return true
end

function handlers.restart_child() return nil, "simple_one_for_one" end

handlers.delete_child = handlers.restart_child

function handlers.which_children(st)
   local out = {}
   for pid in pairs(st.kids) do out[#out + 1] = { pid = pid, type = st.template.type } end
   return out
end

function handlers.count_children(st)
   local sups = st.template.type == "supervisor" and st.count or 0
   return { specs = 1, active = st.count, supervisors = sups, workers = st.count - sups }
end

local function on_request(st, msg)
   local req = type(msg) == "table" and msg.smarm_sup
   if type(req) ~= "table" then
      return h.warn(("an unexpected message (a %s)"):format(type(msg)))
   end
   local f = handlers[req.op]
   if not f then
      return h.warn(("a malformed request (unknown op %s)"):format(tostring(req.op)))
   end
   if not h.is_tx(req.reply) then
      return h.warn(("a malformed %s request (reply is not a channel tx)"):format(req.op))
   end
   local a, b, c = f(st, req)
   -- the request's copy of the reply tx lets go with the answer (no finalizer left)
   h.reply(req.reply, { a, b, c })
end

--- Runs a simple_one_for_one supervisor inline (supervisor.run calls it).
-- @param spec the checked supervisor spec; template the checked child spec
-- @param st the base state (ring, trap, parent, parent_mon, start_timeout)
-- @param helpers see h above
function M.run(template, st, helpers)
   h = helpers
   st.template = template
   st.kids, st.args, st.nargs, st.count, st.pending = {}, {}, {}, 0, {}
   st.downs_tx, st.downs_rx = smarm.channel()
   local arms = { st.trap, smarm.inbox, st.downs_rx }
   if st.parent_mon then arms[4] = st.parent_mon end
   h.started(true)
   while true do
      -- one at a time off the list, so that a shutdown in the middle finds the rest there
      while #st.pending > 0 do on_down(st, table.remove(st.pending, 1)) end
      local i, v = smarm.select(arms)
      if i == 1 then
         local what, reason = on_signal(st, v)
         if what == "stop" then
            stop_all(st)
            return "shutdown"
         elseif what == "exit" then
            terminate(st, reason)
         end
      elseif i == 2 then
         on_request(st, v)
      elseif i == 3 then
         on_down(st, v)
      else
         terminate(st, v.reason)
      end
   end
end

return M
