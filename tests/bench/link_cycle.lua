-- link_cycle: the bare spawn_link + trap_exit crash cycle. The root traps
-- exits, then N times spawns a linked actor that raises a Lua error and waits
-- for its exit signal. (Each crash report goes to stderr; scripts/bench keeps
-- stderr out of its output.) A second metric does the same with an actor that
-- ends by smarm.exit("crash"), which prints no report (BEAM's exit(crash)).
-- Usage: smarm-lua link_cycle.lua [N=20000]
--   prints RESULT us_per_cycle=... us_per_exit_cycle=...

local n = math.floor(tonumber(arg[1]) or 20000)

local function crasher()
   error("crash")
end

local function exiter()
   require("smarm").exit("crash")
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now

local rx = smarm.trap_exit(true)
local spawn_link = smarm.spawn_link

local function cycles(body, reason)
   local t0 = now()
   for _ = 1, n do
      local pid = spawn_link(body)
      local sig = assert(rx:recv(5), "link_cycle: no exit signal within 5 s")
      assert(sig.from == pid and sig.reason == reason, "link_cycle: unexpected exit signal")
   end
   return (now() - t0) * 1e6 / n
end

local us = cycles(crasher, "error")
local us_exit = cycles(exiter, "crash")
print(string.format("RESULT us_per_cycle=%.3f us_per_exit_cycle=%.3f", us, us_exit))
