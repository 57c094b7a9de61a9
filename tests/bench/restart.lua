-- restart: a one_for_one supervisor whose only child exits with reason "crash"
-- as soon as it starts; the supervisor restarts it N times, then its intensity
-- (N within an hour) trips and it stops; then again with N = 1000. Times crash +
-- restart cycles: the child's spawn, start report, exit, the supervisor's down
-- notice, restart decision and intensity accounting.
-- Usage: smarm-lua restart.lua [N=20000]
--   prints RESULT us_per_restart=... us_per_restart_1k=...

local n = math.floor(tonumber(arg[1]) or 20000)

local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

smarm.trap_exit(true) -- the supervisor ends with reason "shutdown"; it is linked to us
-- no supervisor report per restart, as the twin sets logger's level to none
require("smarm.logger").set_level("none")

-- us per cycle over `restarts` restarts, the intensity allowing exactly that many.
local function cycles(restarts)
   local t0 = smarm.now()
   local sup = assert(supervisor.start_link({
      strategy = "one_for_one",
      intensity = restarts,
      period = 3600,
      children = { { id = "crasher", start = { "smarm", "exit", "crash" } } },
   }))
   local down = assert(smarm.monitor(sup):recv(300), "restart: the supervisor did not stop")
   assert(down.reason == "shutdown" or down.reason == "noproc",
      "restart: the supervisor ended with " .. tostring(down.reason))
   return (smarm.now() - t0) * 1e6 / restarts
end

-- OTP walks its list of the period's restarts on every restart, so its cost per
-- restart grows with the intensity; a second metric keeps that list at 1000.
local us = cycles(n)
local us_1k = cycles(1000)
print(string.format("RESULT us_per_restart=%.3f us_per_restart_1k=%.3f", us, us_1k))
