-- Where an actor a ready fd woke runs. While its last scheduler (its home) is awake, it runs
-- there again: the poller puts it in that scheduler's home queue, whichever scheduler (or the
-- watchdog) happened to poll. Here busy actors that yield keep every scheduler awake, and
-- echo pairs over loopback park on their sockets, so nearly every run of theirs is a polled
-- run; the runtime stats count the polled runs that were on another scheduler than the
-- actor's last. Before home queues, the poller ran what it found itself or put it in the
-- shared queue, and about a third of those runs moved. And an actor whose home sits in a
-- blocking C call is still served: a spare that stands in releases the home queue and the
-- poller skips that home, and an idle spin takes from a home queue whose scheduler has run one
-- actor for the whole spin (without both, the echo pairs wait for the call to return).
local smarm = require "smarm"
local runtime_stats = require("support.stats").runtime

local T = 30 -- the bound of every wait that should succeed

local function polled()
   local st = runtime_stats()
   return tonumber(st.polled_runs), tonumber(st.polled_moved), tonumber(st.schedulers)
end

-- a busy actor: yields until told to stop (or for T seconds at most)
local function yielder()
   local s = require "smarm"
   local deadline = s.now() + 30
   local n = 0
   while s.now() < deadline do
      n = n + 1
      if n % 64 == 0 and s.recv(0) then return end
      s.yield()
   end
end

-- one echo pair: a client sends `rounds` lines to an echoing server actor and reports
local function echo_pair(rounds, parent)
   local s = require "smarm"
   local net = require "smarm.net"
   local port = require("support.echo").start()
   local c = assert(net.connect("127.0.0.1", port, 30))
   local ok = 0
   for i = 1, rounds do
      assert(c:send(i .. "\n"))
      if c:recv("*l", 30) == tostring(i) then ok = ok + 1 end
   end
   c:send("bye\n")
   c:close()
   s.send(parent, { echo_done = ok })
end

describe("an actor a ready fd woke", function()
   it("runs again on the scheduler it last ran on while every scheduler is busy", function()
      local runs0, moved0, nsched = polled()
      if nsched < 2 then
         pending("needs at least 2 schedulers")
         return
      end
      local busy = {}
      for i = 1, nsched + 2 do busy[i] = smarm.spawn(yielder) end
      local pairs_n, rounds = 16, 200
      for _ = 1, pairs_n do smarm.spawn(echo_pair, rounds, smarm.self()) end
      local done = 0
      for _ = 1, pairs_n do
         local m = smarm.recv(T)
         assert(type(m) == "table" and m.echo_done, "an echo pair did not finish")
         done = done + m.echo_done
      end
      for _, pid in ipairs(busy) do smarm.send(pid, "stop") end
      assert.are.equal(pairs_n * rounds, done)
      local runs1, moved1 = polled()
      local runs, moved = runs1 - runs0, moved1 - moved0
      -- every round trip parks the server and the client on their sockets, most of the time
      assert.is_true(runs >= pairs_n * rounds / 2, "too few polled runs: " .. runs)
      -- a generous bound: without home queues 28-39% moved here, with them about 7%
      assert.is_true(moved * 5 < runs, ("%d of %d polled runs moved"):format(moved, runs))
   end)

   it("is served while its home scheduler sits in a blocking C call", function()
      local _, _, nsched = polled()
      if nsched < 2 then
         pending("needs at least 2 schedulers")
         return
      end
      local me = smarm.self()
      local busy = {}
      for i = 1, nsched + 2 do busy[i] = smarm.spawn(yielder) end
      local pairs_n, rounds = 8, 500
      for _ = 1, pairs_n do smarm.spawn(echo_pair, rounds, me) end
      -- a C call that blocks its scheduler for 2 s (a spare stands in after about 10 ms);
      -- the echo pairs whose home it is must not wait for it
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.sleep(0.01)
         os.execute("sleep 2")
         s.send(parent, "unstuck")
      end, me)
      local done, order = 0, {}
      for _ = 1, pairs_n + 1 do
         local m = smarm.recv(T)
         assert(m, "an echo pair did not finish")
         if m == "unstuck" then
            order[#order + 1] = "unstuck"
         else
            done = done + m.echo_done
            order[#order + 1] = "echo"
         end
      end
      for _, pid in ipairs(busy) do smarm.send(pid, "stop") end
      assert.are.equal(pairs_n * rounds, done)
      assert.are.equal("unstuck", order[#order], "the echo pairs waited for the stuck call")
   end)
end)
