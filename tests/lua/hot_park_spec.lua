-- Hot parks. A wait (recv, rx:recv, select, sleep) that could give its C stack back by
-- yielding its coroutine keeps it instead when the actor's last park was short, on the same
-- scheduler (a ping-pong's sides, a call and its server): its wake switches straight back
-- into the wait. Each scheduler grants at most 4 such parks at a time, so a ring of many
-- members, or any number of idle actors, parks as before. The runtime stats count the hot
-- parks granted (hot_parks) and the actors parked so now (hot_parked).
local smarm = require "smarm"
local stats = require "support.stats"
local runtime_stats, pool_count = stats.runtime, stats.pool_count

local T = 30 -- the bound of every wait that should succeed

local function hot()
   local st = runtime_stats()
   return tonumber(st.hot_parks), tonumber(st.hot_parked), tonumber(st.schedulers)
end

-- echoes every message to parent; a message "stop" ends it, {wait = s} answers what a
-- recv with that timeout returned, {sleep = s} sleeps and answers "slept"
local function ponger(parent)
   local s = require "smarm"
   while true do
      local m = s.recv()
      if m == "stop" then
         return
      elseif type(m) == "table" and m.wait then
         s.send(parent, { s.recv(m.wait) })
      elseif type(m) == "table" and m.sleep then
         s.sleep(m.sleep)
         s.send(parent, "slept")
      else
         s.send(parent, m)
      end
   end
end

-- bounces n messages off pid, checking each comes back whole and in order
local function bounce(pid, n)
   for i = 1, n do
      smarm.send(pid, { n = i, s = "x" .. i })
      local m = assert(smarm.recv(T))
      assert.are.equal(i, m.n)
      assert.are.equal("x" .. i, m.s)
   end
end

-- waits (bounded) until hot_parked is at most limit; returns the last value seen
local function settle(limit)
   local parked
   for _ = 1, 500 do
      parked = select(2, hot())
      if parked <= limit then
         break
      end
      smarm.sleep(0.01)
   end
   return parked
end

describe("a hot park", function()
   it("is what a ping-pong's sides take, with every message whole and in order", function()
      local before = hot()
      local pid = smarm.spawn(ponger, smarm.self())
      bounce(pid, 2000)
      local after = hot()
      -- both sides park after nearly every message; a wake that another scheduler took
      -- parks as before, so only half is asserted
      assert.is_true(after - before >= 2000, "hot parks: " .. (after - before))
      smarm.send(pid, "stop")
   end)

   it("is not taken in a ring of more members than a scheduler grants", function()
      local n, laps = 40, 25
      local function member(next_pid)
         local s = require "smarm"
         while true do
            local m = s.recv()
            s.send(next_pid, m)
            if m < 0 then
               return
            end
         end
      end
      local next_pid = smarm.self()
      for _ = 1, n - 1 do
         next_pid = smarm.spawn(member, next_pid)
      end
      local first = next_pid
      smarm.send(first, 0)
      assert.are.equal(0, smarm.recv(T)) -- every member has booted
      local before = hot()
      for lap = 1, laps do
         smarm.send(first, lap)
         assert.are.equal(lap, smarm.recv(T))
      end
      local after = hot()
      smarm.send(first, -1)
      assert.are.equal(-1, smarm.recv(T))
      -- n * laps parks: a member's last park was n switches before, never 4
      assert.is_true(after - before < n * laps / 10, "hot parks: " .. (after - before))
   end)

   it("is granted to at most 4 actors per scheduler, however many go idle after one", function()
      local pairs_n = 30
      local pids = {}
      local _, parked0, schedulers = hot()
      for i = 1, pairs_n do
         pids[i] = smarm.spawn(ponger, smarm.self())
         bounce(pids[i], 20)
      end
      -- all of them wait now, each after a short park: those parked hot hold their stack
      local holding = 0
      for i = 1, pairs_n do
         local info = assert(smarm.info(pids[i]))
         if info.state == "parked" and info.stack.held then
            holding = holding + 1
         end
      end
      assert.is_true(holding >= 1, "parked hot: " .. holding)
      assert.is_true(holding <= 4 * schedulers, "parked hot: " .. holding)
      local _, parked = hot()
      assert.is_true(parked <= 4 * schedulers, "parked hot: " .. parked)
      for i = 1, pairs_n do
         smarm.send(pids[i], "stop")
      end
      assert.is_true(settle(parked0) <= parked0)
   end)

   it("is not taken by an actor with a stack of its own shape (given back as it waits)", function()
      local pid = smarm.spawn_opt({ stack = 256 * 1024 }, ponger, smarm.self())
      for _ = 1, 50 do
         bounce(pid, 10)
         local info = assert(smarm.info(pid))
         assert.is_false(info.state == "parked" and info.stack.held, "parked holding its stack")
      end
      smarm.send(pid, "stop")
   end)

   it("times out, sleeps and wakes like any other park", function()
      local pid = smarm.spawn(ponger, smarm.self())
      for _ = 1, 5 do
         bounce(pid, 50)
         smarm.send(pid, { wait = 0.02 })
         assert.are.same({ nil, "timeout" }, smarm.recv(T))
         bounce(pid, 50)
         smarm.send(pid, { sleep = 0.02 })
         assert.are.equal("slept", smarm.recv(T))
         bounce(pid, 50)
         -- a message while it waits with a timeout wakes it with the message
         smarm.send(pid, { wait = T })
         smarm.send(pid, "late")
         assert.are.same({ "late" }, smarm.recv(T))
      end
      smarm.send(pid, "stop")
   end)

   it("can be killed: the monitor sees it, the count comes back, the state is pooled", function()
      local pid = smarm.spawn(ponger, smarm.self())
      local mon = smarm.monitor(pid)
      -- bounce until it is parked hot, holding its stack (a wake that another scheduler took
      -- parks as before)
      local info
      for _ = 1, 200 do
         bounce(pid, 10)
         info = assert(smarm.info(pid))
         if info.state == "parked" and info.stack.held then
            break
         end
      end
      assert.are.equal("parked", info.state)
      assert.is_true(info.stack.held, "never parked hot")
      local _, parked = hot()
      assert.is_true(parked >= 1)
      stats.pool_settle()
      local n0 = pool_count()
      smarm.kill(pid)
      assert.are.equal("killed", assert(mon:recv(T)).reason)
      assert.is_true(settle(parked - 1) <= parked - 1)
      -- switched back into its wait, it yielded its coroutine and ended as a coroutine park
      -- does: its state is whole, and goes to a pool (dropping its frames left it inside a
      -- C call, to be closed)
      local deadline = smarm.now() + 5
      while pool_count() == n0 and smarm.now() < deadline do
         smarm.sleep(0.01)
      end
      assert.are.equal(n0 + 1, pool_count())
      -- a spawn after it boots and answers as before
      local again = smarm.spawn(ponger, smarm.self())
      bounce(again, 10)
      smarm.send(again, "stop")
   end)
end)
