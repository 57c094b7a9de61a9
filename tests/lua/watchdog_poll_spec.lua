-- The watchdog's look at the network. While no scheduler sleeps in the poller's set, busy
-- schedulers look at it only every 16 picks, so the watchdog polls it at its ticks. But a
-- scheduler that runs out of work polls right then, and it does so again at its next drain:
-- while some scheduler has drained since the last tick, the watchdog leaves the network
-- alone. Echo pairs over loopback make that load (short runs, each scheduler draining often,
-- nobody asleep in the set for long): the watchdog used to poll at most of its ticks there,
-- and place what it found as a busy scheduler's poll would, waking a sleeping sibling for it.
-- The runtime stats count the watchdog's ticks and the ticks that polled.
local smarm = require "smarm"
local runtime_stats = require("support.stats").runtime

local T = 30 -- the bound of every wait that should succeed

local function stats()
   local st = runtime_stats()
   return tonumber(st.watchdog_ticks), tonumber(st.watchdog_polls), tonumber(st.schedulers)
end

-- one echo pair: a client sends lines to an echoing server actor until the deadline, then
-- reports how many round trips it made
local function echo_pair(deadline, parent)
   local s = require "smarm"
   local net = require "smarm.net"
   local port = require("support.echo").start()
   local c = assert(net.connect("127.0.0.1", port, 30))
   local n = 0
   while s.now() < deadline do
      n = n + 1
      assert(c:send(n .. "\n"))
      assert(c:recv("*l", 30) == tostring(n))
   end
   c:send("bye\n")
   c:close()
   s.send(parent, { echo_done = n })
end

describe("the watchdog", function()
   it("leaves the network to schedulers that drain and poll it themselves", function()
      local ticks0, polls0, nsched = stats()
      if nsched < 2 then
         pending("needs at least 2 schedulers")
         return
      end
      local pairs_n = 16
      local deadline = smarm.now() + 1
      for _ = 1, pairs_n do smarm.spawn(echo_pair, deadline, smarm.self()) end
      local trips = 0
      for _ = 1, pairs_n do
         local m = smarm.recv(T)
         assert(type(m) == "table" and m.echo_done, "an echo pair did not finish")
         trips = trips + m.echo_done
      end
      local ticks1, polls1 = stats()
      local ticks, polls = ticks1 - ticks0, polls1 - polls0
      print(string.format("\n%d round trips; watchdog: %d ticks, %d polled the network",
         trips, ticks, polls))
      assert.is_true(trips >= pairs_n, "the echo pairs made no round trips")
      -- a second of busy schedulers is about 2,000 ticks (a quarter slice each), fewer when
      -- calm or when the machine is loaded; a handful is enough to judge
      assert.is_true(ticks >= 20, "the watchdog ticked only " .. ticks .. " times")
      -- measured: 0.5-2% of the ticks polled (98% before), 14% under the thread sanitizer
      assert.is_true(polls * 2 < ticks, polls .. " of " .. ticks .. " ticks polled the network")
   end)
end)
