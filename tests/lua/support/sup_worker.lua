--- Child bodies for supervisor_spec: each reports to a collector pid as it starts
-- ({started = id, pid = pid}) and, when it traps exits, as it complies with a
-- shutdown ({stopped = id}).
local smarm = require "smarm"

local M = {}

--- Serves commands until told otherwise: "crash" raises, "stop" returns normally,
-- {exit = r} exits with reason r. With trap set, a shutdown request is reported and
-- obeyed (a normal exit). Its spec says init_ack: it reports its start to the
-- supervisor after reporting to the collector, so the collector sees start order.
function M.run(id, collector, trap)
   local rx = trap and smarm.trap_exit(true)
   smarm.register(id)
   smarm.send(collector, { started = id, pid = smarm.self() })
   require("smarm.proc").started(true)
   while true do
      local i, m
      if rx then
         i, m = smarm.select({ rx, smarm.inbox })
      else
         i, m = 2, smarm.recv()
      end
      if i == 1 then
         if m.reason == "shutdown" then
            smarm.send(collector, { stopped = id })
            return
         end
      elseif m == "crash" then
         error("crash " .. id)
      elseif m == "stop" then
         return
      elseif type(m) == "table" and m.exit then
         smarm.exit(m.exit)
      end
   end
end

--- run, except that while an actor holds the name "supervisor_spec.poison" its start
-- fails (a report, not a crash, so a long run of failures prints nothing).
function M.poisonable(id, collector)
   if smarm.whereis("supervisor_spec.poison") then
      return require("smarm.proc").started(false, "poisoned")
   end
   return M.run(id, collector, false)
end

--- Reports, then raises at once: a crash loop under a permanent restart.
function M.crash_on_start(id, collector)
   smarm.send(collector, { started = id, pid = smarm.self() })
   error("crash on start " .. id)
end

--- Traps exits and ignores shutdown requests: only a kill ends it.
function M.stubborn(id, collector)
   local rx = smarm.trap_exit(true)
   smarm.send(collector, { started = id, pid = smarm.self() })
   while true do
      local sig = rx:recv()
      smarm.send(collector, { ignored = id, reason = sig.reason })
   end
end

return M
