--- The start handshake shared by behaviours (gen_server, gen_statem, supervisor).
-- An actor started by a supervisor, or by a behaviour's start/start_link, reports
-- once it is initialised: "started" after its init returned, or why it failed.
-- Plain function children count as started when they begin.
local smarm = require "smarm"

local M = {}

--- Who waits for this actor's start report (a pid), set by whoever spawned it.
M.ack_to = nil

--- Whether to link to ack_to before reporting a successful start (start_link: the
-- link comes only once init succeeded, so a failing init does not take the caller down).
M.link = false

--- Reports the outcome of initialisation to the waiting spawner, once.
-- @param ok true if init succeeded
-- @param reason why it failed (any sendable value) when ok is false
function M.started(ok, reason)
   local to = M.ack_to
   if not to then return end
   M.ack_to = nil
   if ok and M.link then smarm.link(to) end
   smarm.send(to, { smarm_started = smarm.self(), ok = ok and true or false, reason = reason })
end

--- Waits for the start report of pid (spawned with its ack_to set to this actor).
-- Other messages that arrive meanwhile stay queued in order.
-- @param pid the started actor
-- @param mon a monitor on pid (its down notice means it died before reporting)
-- @param timeout seconds, nil = forever
-- @return true | nil, reason
function M.await(pid, mon, timeout)
   local deadline = timeout and smarm.now() + timeout
   local held = {}
   local result, why
   while true do
      local left = deadline and math.max(0, deadline - smarm.now())
      -- the inbox first: a report sent just before dying must win over the down notice
      local i, v = smarm.select({ smarm.inbox, mon }, left)
      if not i then
         result, why = nil, "timeout"
         break
      elseif i == 2 then
         result, why = nil, v and v.reason or "noproc"
         break
      elseif type(v) == "table" and v.smarm_started == pid then
         if v.ok then result = true else result, why = nil, v.reason end
         break
      else
         held[#held + 1] = v
      end
   end
   -- put back what was not ours, in order, ahead of anything newer
   if #held > 0 then
      local me = smarm.self()
      local rest = {}
      while true do
         local m, err = smarm.recv(0)
         if m == nil and err == "timeout" then break end
         rest[#rest + 1] = m
      end
      for _, m in ipairs(held) do smarm.send(me, m) end
      for _, m in ipairs(rest) do smarm.send(me, m) end
   end
   return result, why
end

return M
