-- smarm.blocking: a call that blocks its OS thread runs off the schedulers, while other
-- actors keep running; results, errors, upvalues, kills, waits inside, nesting, sends, and
-- more calls at once than the pool has threads.
local smarm = require "smarm"
local inbox = require "support.inbox"

describe("smarm.blocking", function()
   before_each(inbox.drain)

   it("keeps the schedulers for other actors while calls block their threads", function()
      -- more blocked calls than this machine has schedulers: made in place, they would
      -- hold every scheduler and the ticking below would stop for their whole length
      local n = 8
      local pids = {}
      for i = 1, n do
         pids[i] = smarm.spawn(function(parent)
            local s = require "smarm"
            local ok = s.blocking(os.execute, "sleep 0.4")
            s.send(parent, { done = ok })
         end, smarm.self())
      end
      local ticks, done, seen_blocking = 0, 0, false
      local t0 = smarm.now()
      while done < n and smarm.now() - t0 < 10 do
         smarm.sleep(0.01)
         ticks = ticks + 1
         -- each call runs on a pool thread, not in a scheduler a spare would stand in for
         local info = smarm.info(pids[1])
         seen_blocking = seen_blocking or (info and info.state == "blocking")
         while true do
            local m = smarm.recv(0)
            if m == nil then break end
            if type(m) == "table" and m.done ~= nil then
               assert.is_truthy(m.done)
               done = done + 1
            end
         end
      end
      assert.are.equal(n, done)
      assert.is_true(seen_blocking)
      assert.is_true(ticks >= 10, "the sleeping actor ticked only " .. ticks .. " times")
   end)

   it("returns every result, nils included, and passes every argument", function()
      local function pack(...) return { n = select("#", ...), ... } end
      local r = pack(smarm.blocking(function(...) return ... end, 1, nil, "x", nil))
      assert.are.equal(4, r.n)
      assert.are.same({ 1, nil, "x", nil }, { r[1], r[2], r[3], r[4] })
      assert.are.equal(0, select("#", smarm.blocking(function() end)))
      assert.are.equal(3, smarm.blocking(math.max, 1, 3, 2))
   end)

   it("raises fn's error in the caller, where pcall catches it", function()
      local e = { code = 7 }
      local ok, err = pcall(smarm.blocking, error, e)
      assert.is_false(ok)
      assert.are.equal(e, err) -- the very value: fn ran in this state
      local ok2, err2 = pcall(smarm.blocking, function() error("deep failure") end)
      assert.is_false(ok2)
      assert.matches("deep failure", err2)
      -- and the actor carries on as usual, waits included
      smarm.send(smarm.self(), "still here")
      assert.are.equal("still here", smarm.recv(1))
   end)

   it("runs fn in the caller's state: upvalues and globals are shared", function()
      local count = 0
      local t = {}
      smarm.blocking(function()
         count = count + 1
         t.seen = true
         rawset(_G, "blocking_spec_global", "set")
      end)
      assert.are.equal(1, count)
      assert.is_true(t.seen)
      assert.are.equal("set", rawget(_G, "blocking_spec_global"))
      rawset(_G, "blocking_spec_global", nil)
   end)

   it("takes a callable table", function()
      local callable = setmetatable({}, { __call = function(_, x) return x * 2 end })
      assert.are.equal(10, smarm.blocking(callable, 5))
   end)

   it("refuses a non-callable with a clear error", function()
      assert.has_error(function() smarm.blocking(42) end,
         "smarm.blocking: a function expected (argument 1), got number")
      assert.has_error(function() smarm.blocking() end,
         "smarm.blocking: a function expected (argument 1), got no value")
   end)

   it("lets a kill that comes meanwhile take effect when fn returns", function()
      local pid, mon = smarm.spawn_monitor(function(parent)
         local s = require "smarm"
         s.blocking(function()
            s.send(parent, { inside = true })
            os.execute("sleep 0.3")
            s.send(parent, { finished = true })
         end)
         s.send(parent, { after = true }) -- never: the kill ends it as fn returns
      end, smarm.self())
      inbox.expect("inside")
      assert.are.equal("blocking", smarm.info(pid).state)
      smarm.kill(pid)
      -- fn still runs to its end (its side effect is seen), then the actor dies
      inbox.expect("finished")
      local down = assert(mon:recv(5))
      assert.are.equal("killed", down.reason)
      assert.are.equal("killed", smarm.terminal_reason(pid))
      inbox.none("after", 0.05)
   end)

   it("refuses waits inside fn with a clear error", function()
      local rx = select(2, smarm.channel())
      local waits = {
         recv = function() return smarm.recv() end,
         timed_recv = function() return smarm.recv(0.01) end,
         sleep = function() return smarm.sleep(0.01) end,
         select = function() return smarm.select { rx, smarm.inbox } end,
         rx_recv = function() return rx:recv() end,
      }
      for name, wait in pairs(waits) do
         local ok, err = pcall(smarm.blocking, wait)
         assert.is_false(ok, name)
         assert.matches("cannot wait inside smarm.blocking", err, 1, true)
      end
      -- a poll does not wait
      assert.are.same({ nil, "timeout" }, { smarm.blocking(smarm.recv, 0) })
   end)

   it("calls fn in place when nested", function()
      assert.are.equal(42, smarm.blocking(function()
         return smarm.blocking(function() return 42 end)
      end))
      local ok, err = pcall(smarm.blocking, smarm.blocking, error, "inner")
      assert.is_false(ok)
      assert.matches("inner", err)
   end)

   it("sends, spawns and yields from inside fn", function()
      local me = smarm.self()
      smarm.blocking(function()
         smarm.send(me, { from_inside = 1 })
         smarm.yield()
         smarm.spawn(function(p) require("smarm").send(p, { child = true }) end, me)
      end)
      assert.are.equal(1, inbox.expect("from_inside").from_inside)
      inbox.expect("child")
   end)

   it("ends the actor with smarm.exit's reason when fn calls it", function()
      local pid, mon = smarm.spawn_monitor(function()
         local s = require "smarm"
         s.blocking(s.exit, "from inside")
      end)
      assert.are.equal("from inside", assert(mon:recv(5)).reason)
      assert.are.equal("from inside", smarm.terminal_reason(pid))
   end)

   it("ends an actor whose heap outgrows max_heap inside fn with reason memory", function()
      local _, mon = smarm.spawn_opt({ max_heap = 4 * 1024 * 1024, monitor = true }, function()
         local s = require "smarm"
         s.blocking(function()
            local t = {}
            for i = 1, 1e7 do t[i] = { i } end
            return #t
         end)
      end)
      assert.are.equal("memory", assert(mon:recv(10)).reason)
   end)

   it("finishes more calls at once than the pool has threads", function()
      local n = 40
      for i = 1, n do
         smarm.spawn(function(parent, k)
            local s = require "smarm"
            local v = s.blocking(function()
               os.execute("sleep 0.02")
               return k * 10
            end)
            s.send(parent, { result = v })
         end, smarm.self(), i)
      end
      local sum = 0
      for _ = 1, n do
         sum = sum + inbox.expect("result", 30).result
      end
      assert.are.equal(10 * n * (n + 1) / 2, sum)
   end)
end)
