--- The start handshake of behaviours (gen_server, gen_statem, supervisor) and of
-- supervisor children that report their own start. The starter spawns the actor with
-- the tx of a fresh channel and waits on its rx and on a monitor of the new actor, so
-- neither actor's inbox is touched. The started actor reports once it is initialised:
-- started(true) after its init returned, or started(false, reason).
local smarm = require "smarm"

local M = {}

--- Where this actor's start report goes (a channel tx), until it is sent.
M.ack_to = nil

--- The actor that started this one (a behaviour ends when it exits, as in OTP).
M.parent = nil

--- Whether to link to parent before reporting a successful start (start_link: the
-- link comes only once init succeeded, so a failing init does not take the caller down).
M.link = false

--- Reports the outcome of initialisation to the waiting starter, once.
-- @param ok true if init succeeded
-- @param reason why it failed (any sendable value) when ok is false
function M.started(ok, reason)
   local to = M.ack_to
   if not to then return end
   M.ack_to = nil
   if ok and M.link and M.parent then smarm.link(M.parent) end
   to:send({ ok = ok and true or false, reason = reason })
   to:release()
end

--- Spawns fn(ack, ...) and waits for its start report. fn either sets ack_to = ack
-- (and parent) so that its init reports through started, or sends {ok = true} on ack.
-- @param opts smarm.spawn_opt options (monitor is added)
-- @param timeout seconds, nil = forever; on timeout the actor is unlinked and killed
-- @return pid, mon (the monitor of the started actor, still active)
--   | nil, reason (its reported reason, the reason it died with before reporting,
--     or "timeout")
--   | false, err (spawn_opt raised err, e.g. an argument that cannot be sent)
function M.start(opts, timeout, fn, ...)
   local tx, rx = smarm.channel()
   opts.monitor = true
   local ok, pid, mon = pcall(smarm.spawn_opt, opts, fn, tx, ...)
   if not ok then
      tx:release()
      return false, pid
   end
   -- the report comes first when it and the down notice are both ready
   local i, v = smarm.select({ rx, mon }, timeout)
   tx:release()
   if i == 1 then
      if type(v) == "table" and v.ok then return pid, mon end
      smarm.demonitor(mon)
      local why = type(v) == "table" and v.reason or nil
      return nil, why == nil and "init_failed" or why
   elseif i == 2 then
      return nil, v.reason
   end
   smarm.demonitor(mon)
   smarm.unlink(pid)
   smarm.kill(pid)
   return nil, "timeout"
end

return M
