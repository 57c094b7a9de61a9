-- Hot code reload: a supervised counter gen_server and a plain ticker actor that asks it
-- for its count. Run it with --watch and edit counter.lua or ticker.lua while it runs:
--
--   build/smarm-lua --watch examples/hot_reload/main.lua
--
-- Arguments: [seconds to run (default: until Ctrl-C)] [seconds between ticks (default 1)]
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

local seconds = tonumber(arg[1])
local every = tonumber(arg[2]) or 1

assert(supervisor.start_link({ strategy = "one_for_one", intensity = 5, period = 10,
   children = { { id = "counter",
      start = { "smarm.gen_server", "run", "counter", 0, { name = "counter" } } } } }))

smarm.spawn(function(period)
   local s = require "smarm"
   local gen_server = require "smarm.gen_server"
   local ticker = require "ticker"
   s.on_reload(function(module, version)
      print(string.format("ticker: took %s version %d", module, version))
   end)
   while true do
      gen_server.cast("counter", "tick")
      print(ticker.line(gen_server.call("counter", "count")))
      io.stdout:flush()
      s.sleep(period)
   end
end, every)

if seconds then
   smarm.sleep(seconds)
else
   smarm.recv() -- until Ctrl-C
end
