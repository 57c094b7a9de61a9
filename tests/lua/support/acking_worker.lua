--- Child bodies for supervisor_spec whose module, not their spec, says that they report
-- their own start (init_ack): each reports {started = id} to a collector as it starts.
local smarm = require "smarm"
local proc = require "smarm.proc"

local M = {}

M.init_ack = { slow_start = true, refuse = true }

--- Takes a while to initialise, then reports to the collector and to the supervisor.
function M.slow_start(id, collector)
   smarm.sleep(0.05)
   smarm.send(collector, { started = id, pid = smarm.self() })
   proc.started(true)
   smarm.recv()
end

--- Reports a failed start.
function M.refuse(id, collector)
   smarm.send(collector, { refusing = id })
   proc.started(false, "refused")
end

--- Not in init_ack: started as soon as it begins.
function M.plain(id, collector)
   smarm.send(collector, { started = id, pid = smarm.self() })
   smarm.recv()
end

return M
