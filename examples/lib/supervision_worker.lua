--- Workers for examples/supervision.lua, started by its supervisor.
local smarm = require "smarm"

local M = {}

--- Ticks every interval seconds and reports each tick to the watcher (by name).
function M.ticker(name, interval)
   smarm.register(name)
   local n = 0
   while true do
      smarm.sleep(interval)
      n = n + 1
      smarm.send("watcher", { tick = name, n = n })
   end
end

--- Does some work now and then, and crashes on every third job: its supervisor
-- starts it afresh each time (the newest loaded code runs).
function M.flaky(name, interval)
   smarm.register(name)
   smarm.send("watcher", { started = name, pid = smarm.self() })
   for job = 1, 3 do
      smarm.sleep(interval)
      if job == 3 then
         error(name .. ": job " .. job .. " went wrong")
      end
   end
end

return M
