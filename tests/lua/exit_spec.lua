-- Links, monitors, trap_exit, kill, shutdown, exit reasons and terminal reasons.
local smarm = require "smarm"

-- An actor that waits for messages forever (a target for links and monitors).
local function idler()
   local s = require "smarm"
   while true do s.recv() end
end

local wait_dead = require("support.inbox").wait_dead

describe("monitors", function()
   it("deliver a down notice with the pid and a Lua error's message and traceback", function()
      local pid, mon = smarm.spawn_monitor(function()
         require("smarm").recv()
         error("monitored failure")
      end)
      smarm.send(pid, "go")
      local down = assert(mon:recv(5))
      assert.are.equal(pid, down.pid)
      assert.are.equal("error", down.reason)
      assert.matches("monitored failure", down.error)
      assert.matches("stack traceback", down.traceback)
      -- one notice only: afterwards the monitor is closed
      assert.are.same({ nil, "closed" }, { mon:recv(5) })
   end)

   it("report normal, smarm.exit reasons and kills", function()
      local p1 = smarm.spawn(function() require("smarm").recv() end)
      local m1 = smarm.monitor(p1)
      smarm.send(p1, 1)
      assert.are.equal("normal", assert(m1:recv(5)).reason)

      local p2 = smarm.spawn(function() require("smarm").exit({ code = 7 }) end)
      local m2 = smarm.monitor(p2)
      local d2 = assert(m2:recv(5))
      -- the actor may have ended before the monitor: then noproc
      if d2.reason ~= "noproc" then assert.are.same({ code = 7 }, d2.reason) end

      local p3 = smarm.spawn(idler)
      local m3 = smarm.monitor(p3)
      smarm.kill(p3)
      assert.are.equal("killed", assert(m3:recv(5)).reason)
   end)

   it("say noproc at once for a dead pid", function()
      local p = smarm.spawn(function() end)
      assert.is_true(wait_dead(p))
      local down = assert(smarm.monitor(p):recv(1))
      assert.are.equal("noproc", down.reason)
      assert.are.equal(p, down.pid)
   end)

   it("demonitor removes exactly one of several and discards a queued notice", function()
      local p = smarm.spawn(idler)
      local a, b = smarm.monitor(p), smarm.monitor(p)
      assert.is_true(smarm.demonitor(a))
      smarm.kill(p)
      assert.are.equal("killed", assert(b:recv(5)).reason)
      assert.are.same({ nil, "closed" }, { a:recv(0.05) })

      -- a notice that already arrived is discarded; demonitor after firing is a no-op
      local q = smarm.spawn(function() end)
      local m = smarm.monitor(q)
      assert.is_true(wait_dead(q))
      smarm.sleep(0.01)
      assert.is_false(smarm.demonitor(m))
      assert.are.same({ nil, "closed" }, { m:recv(0) })
   end)

   it("whose handle was collected leave the target, while kept ones still fire", function()
      local p = smarm.spawn(idler)
      local kept = {}
      for i = 1, 100000 do
         local m = smarm.monitor(p) -- dropped at once
         if i % 1000 == 0 then
            if i % 10000 == 0 then kept[#kept + 1] = m end
            collectgarbage()
         end
      end
      local held = smarm.info(p).monitors
      assert.is_true(held < 5000, "monitors held: " .. held)
      smarm.kill(p)
      for _, m in ipairs(kept) do
         assert.are.equal("killed", assert(m:recv(5)).reason)
      end
   end)

   it("work as select arms", function()
      local p, mon = smarm.spawn_monitor(function() require("smarm").sleep(0.02) end)
      assert.is_number(p)
      local i, down = smarm.select({ smarm.inbox, mon }, 5)
      assert.are.equal(2, i)
      assert.are.equal("normal", down.reason)
   end)
end)

describe("links", function()
   it("propagate an abnormal exit to a non-trapping peer with the same reason", function()
      local watcher_of_b
      local a = smarm.spawn(idler)
      local b = smarm.spawn(function(peer)
         local s = require "smarm"
         s.link(peer)
         s.recv()
      end, a)
      watcher_of_b = smarm.monitor(b)
      smarm.sleep(0.02) -- b links
      local ma = smarm.monitor(a)
      smarm.kill(a)
      assert.are.equal("killed", assert(ma:recv(5)).reason)
      assert.are.equal("killed", assert(watcher_of_b:recv(5)).reason)
   end)

   it("turn into an exit signal for a trapping peer, which keeps running", function()
      local rx = smarm.trap_exit(true)
      local child = smarm.spawn_link(function()
         require("smarm").recv()
         error("child breaks")
      end)
      smarm.send(child, "go")
      local sig = assert(rx:recv(5))
      assert.are.equal(child, sig.from)
      assert.are.equal("error", sig.reason)
      assert.matches("child breaks", sig.error)
      smarm.trap_exit(false)
   end)

   it("leave trap_exit(false) a receiver reading closed once drained, signals in flight", function()
      -- linked actors die while their peer stops trapping: each exit signal is
      -- queued before the switch (read, then "closed") or not sent at all (the
      -- peer then dies of it); a poll of the old receiver never says "timeout"
      local reports = 0
      for _ = 1, 2000 do
         local w, mon = smarm.spawn_monitor(function(root)
            local s = require "smarm"
            s.trap_exit(true)
            for k = 1, 8 do -- their exits spread around the switch
               s.spawn_link(function(n)
                  local s2 = require "smarm"
                  for _ = 1, n do
                     s2.yield()
                  end
                  s2.exit("boom")
               end, k)
            end
            for _ = 1, 4 do
               s.yield()
            end
            local old = s.trap_exit(false)
            local v, why = old:recv(0)
            while v ~= nil do
               v, why = old:recv(0)
            end
            s.send(root, why)
            s.recv()
         end, smarm.self())
         local i, v = smarm.select({ smarm.inbox, mon }, 10)
         assert.is_number(i)
         if i == 1 then
            assert.are.equal("closed", v)
            reports = reports + 1
            smarm.kill(w)
            assert(mon:recv(5))
         end
      end
      assert.is_true(reports > 0)
   end)

   it("never propagate a normal exit", function()
      local rx = smarm.trap_exit(true)
      local child = smarm.spawn_link(function() end)
      assert.is_true(wait_dead(child))
      assert.are.same({ nil, "timeout" }, { rx:recv(0.05) })
      smarm.trap_exit(false)
   end)

   it("to a dead pid deliver noproc at once", function()
      local dead = smarm.spawn(function() end)
      assert.is_true(wait_dead(dead))
      local rx = smarm.trap_exit(true)
      smarm.link(dead)
      local sig = assert(rx:recv(1))
      assert.are.equal("noproc", sig.reason)
      assert.are.equal(dead, sig.from)
      smarm.trap_exit(false)
      -- a non-trapping actor dies of it
      local p, mon = smarm.spawn_monitor(function(d)
         local s = require "smarm"
         s.link(d)
         s.sleep(5)
      end, dead)
      assert.is_number(p)
      assert.are.equal("noproc", assert(mon:recv(5)).reason)
   end)

   it("can be removed with unlink", function()
      local a = smarm.spawn(idler)
      local b, mb = smarm.spawn_monitor(function(peer)
         local s = require "smarm"
         s.link(peer)
         s.unlink(peer)
         s.recv()
      end, a)
      smarm.sleep(0.02)
      smarm.kill(a)
      assert.are.same({ nil, "timeout" }, { mb:recv(0.1) })
      smarm.kill(b)
   end)
end)

describe("kill", function()
   it("stops a running, a queued and a parked actor", function()
      local running, mr = smarm.spawn_monitor(function()
         local x = 0
         while true do x = x + 1 end
      end)
      local parked, mp = smarm.spawn_monitor(idler)
      local queued, mq = smarm.spawn_monitor(function() end)
      smarm.kill(queued) -- likely before it ever ran
      smarm.sleep(0.02)
      smarm.kill(running)
      smarm.kill(parked)
      assert.are.equal("killed", assert(mr:recv(5)).reason)
      assert.are.equal("killed", assert(mp:recv(5)).reason)
      local dq = assert(mq:recv(5))
      assert.is_truthy(dq.reason == "killed" or dq.reason == "normal")
      assert.is_number(running + parked)
   end)

   it("cannot be caught by the target's pcall, xpcall or coroutines", function()
      local p, mon = smarm.spawn_monitor(function(parent)
         local s = require "smarm"
         while true do
            pcall(function()
               xpcall(function()
                  coroutine.wrap(function()
                     s.send(parent, "inside")
                     s.recv()
                  end)()
               end, debug.traceback)
            end)
            s.send(parent, "caught it")
         end
      end, smarm.self())
      assert.are.equal("inside", smarm.recv(5))
      smarm.kill(p)
      assert.are.equal("killed", assert(mon:recv(5)).reason)
      assert.are.same({ nil, "timeout" }, { smarm.recv(0.05) })
   end)
end)

describe("shutdown", function()
   it("sends a trapping target an exit signal and lets it decide", function()
      local p = smarm.spawn(function(parent)
         local s = require "smarm"
         local rx = s.trap_exit(true)
         s.send(parent, "trapping")
         local sig = rx:recv()
         s.send(parent, { got = sig.reason, from = sig.from })
         s.recv()
      end, smarm.self())
      assert.are.equal("trapping", smarm.recv(5))
      smarm.shutdown(p)
      local m = assert(smarm.recv(5))
      assert.are.equal("shutdown", m.got)
      assert.are.equal(smarm.self(), m.from)
      assert.is_truthy(smarm.info(p))
      smarm.kill(p)
   end)

   it("stops a non-trapping target, reported as shutdown", function()
      local p, mon = smarm.spawn_monitor(idler)
      smarm.sleep(0.01)
      smarm.shutdown(p)
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
   end)
end)

describe("terminal reasons", function()
   it("stay queryable by pid after death, not while alive", function()
      local p = smarm.spawn(function() require("smarm").recv() require("smarm").exit("done") end)
      assert.is_nil(smarm.terminal_reason(p))
      smarm.send(p, 1)
      assert.is_true(wait_dead(p))
      smarm.sleep(0.01)
      assert.are.equal("done", smarm.terminal_reason(p))
   end)

   it("survive the slot's next tenancy until that one dies", function()
      local old = smarm.spawn(function() require("smarm").exit({ why = "first" }) end)
      assert.is_true(wait_dead(old))
      local idx = smarm.pid_tostring(old):match("<0%.(%d+)%.")
      -- the others stay alive until the slot is found: a scheduler's cache of free slots
      -- gives the same few back to its next spawns, so killing each would cycle through them
      local tenant, others = nil, {}
      for _ = 1, 2000 do
         local p = smarm.spawn(idler)
         if smarm.pid_tostring(p):match("<0%.(%d+)%.") == idx then tenant = p break end
         others[#others + 1] = p
      end
      for _, p in ipairs(others) do smarm.kill(p) end
      assert.is_number(tenant)
      assert.are.same({ why = "first" }, smarm.terminal_reason(old))
      local mon = smarm.monitor(tenant)
      smarm.kill(tenant)
      mon:recv(5)
      assert.is_nil(smarm.terminal_reason(old))
      assert.are.equal("killed", smarm.terminal_reason(tenant))
   end)
end)
