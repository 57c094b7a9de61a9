-- Timers: recv timeouts, sleeps, send_after and cancel_timer (deadlines, precision,
-- message-first resolution, stale timer entries, exactly-once cancel).
local smarm = require "smarm"
local inbox = require "support.inbox"

local function elapsed(t0) return smarm.now() - t0 end

describe("timers", function()
   it("deliver a queued message at once, even with a timeout", function()
      smarm.send(smarm.self(), "now")
      local t0 = smarm.now()
      assert.are.equal("now", smarm.recv(5))
      assert.is_true(elapsed(t0) < 0.5)
   end)

   it("time a recv out after its duration, not before", function()
      local t0 = smarm.now()
      local v, why = smarm.recv(0.05)
      local dt = elapsed(t0)
      assert.is_nil(v)
      assert.are.equal("timeout", why)
      assert.is_true(dt >= 0.05, "returned early: " .. dt)
      assert.is_true(dt < 1.0, "returned late: " .. dt)
   end)

   it("poll with a zero timeout", function()
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
      assert.is_true(elapsed(t0) < 0.05)
   end)

   it("wake a timed recv promptly when a message comes", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.sleep(0.02)
         s.send(parent, "late")
      end, smarm.self())
      local t0 = smarm.now()
      assert.are.equal("late", smarm.recv(5))
      assert.is_true(elapsed(t0) < 1.0)
   end)

   it("sleep with sub-millisecond precision", function()
      local t0 = smarm.now()
      smarm.sleep(0.0003)
      local dt = elapsed(t0)
      assert.is_true(dt >= 0.0003, "short sleep: " .. dt)
      assert.is_true(dt < 0.5, "sub-ms sleep took " .. dt) -- a sanity bound (a loaded box)
   end)

   it("leave no stale deadline that shortens a later wait", function()
      -- the recv wins by a message long before its deadline; its timer entry stays armed
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, "early")
      end, smarm.self())
      assert.are.equal("early", smarm.recv(0.1))
      -- the stale entry fires during this sleep, which must still last its full duration
      local t0 = smarm.now()
      smarm.sleep(0.2)
      assert.is_true(elapsed(t0) >= 0.2, "sleep cut short: " .. elapsed(t0))
      -- and a timed-out recv followed by a sleep
      assert.is_nil(smarm.recv(0.01))
      t0 = smarm.now()
      smarm.sleep(0.05)
      assert.is_true(elapsed(t0) >= 0.05)
   end)

   local function pending()
      return tonumber(require("smarm.ffi").smarm_ffi_timers_pending())
   end

   it("keep one timer entry, not one per wait, for waits messages end early", function()
      local before = pending()
      local tx, rx = smarm.channel()
      for i = 1, 20000 do
         smarm.send(smarm.self(), i)
         assert.are.equal(i, smarm.recv(60))
         tx:send(i)
         assert.are.equal(i, rx:recv(60))
      end
      -- 40,000 waits: an entry left by each would be 40,000
      assert.is_true(pending() - before < 1000, "timer entries left: " .. pending() - before)
      -- an earlier deadline than the armed one still times out on time
      local t0 = smarm.now()
      assert.is_nil(smarm.recv(0.05))
      assert.is_true(elapsed(t0) >= 0.05 and elapsed(t0) < 2, "recv(0.05) took " .. elapsed(t0))
   end)

   it("re-arm a wait whose armed wake was an earlier wait's and fired first", function()
      smarm.send(smarm.self(), "early")
      assert.are.equal("early", smarm.recv(0.05)) -- arms a wake at +0.05
      local t0 = smarm.now()
      -- arms nothing (the +0.05 wake comes first); woken by it, the wait arms its own
      assert.is_nil(smarm.recv(0.3))
      assert.is_true(elapsed(t0) >= 0.3 and elapsed(t0) < 2, "recv(0.3) took " .. elapsed(t0))
   end)

   it("sort a mixed run of 24 actors into 12 fed and 12 timed out, exactly", function()
      local pids = {}
      for i = 1, 24 do
         pids[i] = smarm.spawn(function(parent, i) -- luacheck: ignore 433
            local s = require "smarm"
            local t0 = s.now()
            local m, why = s.recv(0.2)
            s.send(parent, { i = i, got = m, why = why, dt = s.now() - t0 })
         end, smarm.self(), i)
      end
      for i = 1, 24, 2 do
         smarm.send(pids[i], "food")
      end
      local fed, timed = 0, 0
      for _ = 1, 24 do
         local r = assert(smarm.recv(10), "an actor never answered")
         if r.i % 2 == 1 then
            assert.are.equal("food", r.got)
            fed = fed + 1
         else
            assert.are.equal("timeout", r.why)
            assert.is_true(r.dt >= 0.2)
            timed = timed + 1
         end
      end
      assert.are.equal(12, fed)
      assert.are.equal(12, timed)
   end)

   it("fire while every scheduler is busy", function()
      local busy = {}
      for i = 1, 16 do
         busy[i] = smarm.spawn(function()
            local s = require "smarm"
            while s.recv(0) == nil do
               s.yield()
            end
         end)
      end
      smarm.sleep(0.01)
      local t0 = smarm.now()
      smarm.sleep(0.01)
      local dt = elapsed(t0)
      for i = 1, #busy do
         smarm.send(busy[i], "stop")
      end
      assert.is_true(dt >= 0.01)
      assert.is_true(dt < 2, "sleep under saturation took " .. dt) -- a sanity bound
   end)

   it("wake 100k actors each sleeping 10 ms", function()
      local N = 100000
      local self = smarm.self()
      for _ = 1, N do
         smarm.spawn(function(parent)
            local s = require "smarm"
            s.sleep(0.01)
            s.send(parent, 1)
         end, self)
      end
      local got = 0
      while got < N do
         if not smarm.recv(30) then
            break
         end
         got = got + 1
      end
      assert.are.equal(N, got)
   end)
end)

describe("send_after", function()
   it("delivers to a pid after the delay", function()
      local t0 = smarm.now()
      local t = smarm.send_after(0.03, smarm.self(), { hello = "later" })
      assert.are.equal("number", type(t))
      local m = assert(smarm.recv(5))
      assert.are.equal("later", m.hello)
      assert.is_true(elapsed(t0) >= 0.03)
      assert.is_false(smarm.cancel_timer(t)) -- it fired
   end)

   it("drops a message for a dead pid silently", function()
      local pid = smarm.spawn(function() end)
      smarm.sleep(0.02)
      smarm.send_after(0.005, pid, "lost")
      smarm.sleep(0.03)
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
   end)

   it("is cancelled before it fires: true, and nothing arrives", function()
      local t = smarm.send_after(0.05, smarm.self(), "never")
      assert.is_true(smarm.cancel_timer(t))
      assert.is_false(smarm.cancel_timer(t))
      assert.are.same({ nil, "timeout" }, { smarm.recv(0.1) })
   end)

   it("drops cancelled timers from the heap long before they would fire", function()
      local before = tonumber(require("smarm.ffi").smarm_ffi_timers_pending())
      for i = 1, 10000 do
         assert.is_true(smarm.cancel_timer(smarm.send_after(3600, smarm.self(), i)))
      end
      local left = tonumber(require("smarm.ffi").smarm_ffi_timers_pending()) - before
      assert.is_true(left < 1000, "cancelled timers left in the heap: " .. left)
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
   end)

   it("races cancel against the fire: exactly one of delivered / cancelled", function()
      local N, cancelled = 2000, 0
      local pid = smarm.spawn(function(parent)
         local s = require "smarm"
         local got = 0
         while true do
            local m = s.recv(2)
            if m == nil or m == "done" then
               break
            end
            got = got + 1
         end
         s.send(parent, got)
      end, smarm.self())
      for i = 1, N do
         local t = smarm.send_after(0.00002 * (i % 5), pid, i)
         if i % 3 == 0 then
            smarm.yield()
         end
         if smarm.cancel_timer(t) then
            cancelled = cancelled + 1
         end
      end
      smarm.sleep(0.05)
      smarm.send(pid, "done")
      local delivered = assert(smarm.recv(10))
      assert.are.equal(N, delivered + cancelled)
   end)

   it("refuses an unsendable message at the call", function()
      assert.has_error(function()
         smarm.send_after(1, smarm.self(), { f = print })
      end, "smarm.send_after: cannot send a function (at msg.f)")
      assert.has_error(function()
         smarm.send_after(-1, smarm.self(), 1)
      end)
   end)

   describe("to a name", function()
      it("resolves when it fires: a restarted holder gets it, nobody drops it", function()
         local function holder(parent, tag)
            local s = require "smarm"
            s.register("timer_spec.named")
            s.send(parent, "registered")
            local m = s.recv()
            s.send(parent, { tag = tag, m = m })
         end
         local first = smarm.spawn(holder, smarm.self(), "first")
         assert.are.equal("registered", smarm.recv(5))
         smarm.send_after(0.05, "timer_spec.named", "late hello")
         local mon = smarm.monitor(first)
         smarm.kill(first)
         mon:recv(5)
         smarm.spawn(holder, smarm.self(), "second")
         assert.are.equal("registered", smarm.recv(5))
         local got = assert(smarm.recv(5))
         assert.are.same({ tag = "second", m = "late hello" }, got)
         -- nobody holds the name now: the message is dropped, nothing crashes
         smarm.send_after(0.01, "timer_spec.nobody", 1)
         assert.are.same({ nil, "timeout" }, { smarm.recv(0.1) })
      end)
   end)

   describe("handles", function()
      it("cancel only for the actor that armed them (foreign, guessed, stale: false)", function()
         local t = smarm.send_after(3600, smarm.self(), "mine")
         -- another actor holding the handle cannot cancel it
         local function canceller(parent, h)
            local s = require "smarm"
            s.send(parent, { foreign = s.cancel_timer(h) })
         end
         smarm.spawn(canceller, smarm.self(), t)
         assert.is_false(inbox.expect("foreign").foreign)
         -- numbers near it are not timers of this actor
         local hits = 0
         for d = -2000, 2000 do
            if d ~= 0 and smarm.cancel_timer(t + d) then hits = hits + 1 end
         end
         assert.are.equal(0, hits)
         -- small integers (what handles used to be) are not timers either
         local other = smarm.spawn(function(parent)
            local s = require "smarm"
            local mine = {}
            for i = 1, 50 do mine[i] = s.send_after(3600, s.self(), i) end
            s.send(parent, { armed = true })
            local m = s.recv(10)
            local kept = 0
            for i = 1, 50 do
               if s.cancel_timer(mine[i]) then kept = kept + 1 end
            end
            s.send(parent, { kept = kept, m = m })
         end, smarm.self())
         inbox.expect("armed")
         for guess = 1, 5000 do smarm.cancel_timer(guess) end
         smarm.send(other, "go")
         assert.are.equal(50, inbox.expect("kept").kept)
         -- the owner still can, once
         assert.is_true(smarm.cancel_timer(t))
         assert.is_false(smarm.cancel_timer(t))
      end)
   end)
end)

