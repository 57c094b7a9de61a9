--- Child bodies for supervisor_otp_spec: a dynamic worker reports its start arguments to a
-- collector and then obeys commands ("crash", "stop").
local smarm = require "smarm"

local M = {}

--- base comes from the template, extra from start_child.
function M.run(collector, base, extra)
   smarm.send(collector, { started = smarm.self(), base = base, extra = extra })
   while true do
      local m = smarm.recv()
      if m == "crash" then error("dyn_worker crash") end
      if m == "stop" then return end
   end
end

--- Reports every start argument after the collector and their count, then obeys as run.
function M.run_all(collector, ...)
   smarm.send(collector, { started = smarm.self(), n = select("#", ...), args = { ... } })
   while true do
      if smarm.recv() == "crash" then error("dyn_worker crash") end
   end
end

--- A worker that reports the gen_server-style terminate it takes, slowly: it traps exits
-- and, asked to shut down, spends seconds before it reports and ends.
function M.slow_stop(collector, seconds)
   local rx = smarm.trap_exit(true)
   smarm.send(collector, { started = smarm.self() })
   local sig = rx:recv()
   smarm.sleep(seconds)
   smarm.send(collector, { stopped = smarm.self(), reason = sig.reason })
end

return M
