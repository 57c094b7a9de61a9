-- smarm.exit(pid, reason): Erlang's exit/2, and the error object smarm.exit(reason) raises.
local smarm = require "smarm"

local function idler()
   local s = require "smarm"
   while true do s.recv() end
end

-- An actor that traps exits and reports each signal to parent.
local function trapper(parent)
   local s = require "smarm"
   local rx = s.trap_exit(true)
   s.send(parent, "trapping")
   while true do s.send(parent, { sig = rx:recv() }) end
end

describe("smarm.exit(pid, reason)", function()
   it("ends a non-trapping target with the reason", function()
      local p = smarm.spawn(idler)
      local mon = smarm.monitor(p)
      assert.is_true(smarm.exit(p, { code = 3 }))
      assert.are.same({ code = 3 }, assert(mon:recv(5)).reason)
   end)

   it("ignores normal for a non-trapping target", function()
      local p = smarm.spawn(idler)
      local mon = smarm.monitor(p)
      smarm.exit(p, "normal")
      assert.are.same({ nil, "timeout" }, { mon:recv(0.05) })
      smarm.kill(p)
      assert.are.equal("killed", assert(mon:recv(5)).reason)
   end)

   it("delivers normal and other reasons to a trapping target as signals", function()
      local p = smarm.spawn(trapper, smarm.self())
      assert.are.equal("trapping", smarm.recv(5))
      smarm.exit(p, "normal")
      smarm.exit(p, "other")
      local s1, s2 = smarm.recv(5).sig, smarm.recv(5).sig
      assert.are.same({ smarm.self(), smarm.self(), "normal" }, { s1.pid, s1.from, s1.reason })
      assert.are.equal("other", s2.reason)
      smarm.kill(p)
   end)

   it("kill stops a trapping target with reason killed", function()
      local p = smarm.spawn(trapper, smarm.self())
      assert.are.equal("trapping", smarm.recv(5))
      local mon = smarm.monitor(p)
      smarm.exit(p, "kill")
      assert.are.equal("killed", assert(mon:recv(5)).reason)
   end)

   it("to itself ends the caller uncatchably (not trapping)", function()
      local p, mon = smarm.spawn_monitor(function()
         local s = require "smarm"
         pcall(s.exit, s.self(), "own")
         s.exit("not reached")
      end)
      assert.is_number(p)
      assert.are.equal("own", assert(mon:recv(5)).reason)
   end)

   it("returns false for a dead pid and checks its arguments", function()
      local p, mon = smarm.spawn_monitor(function() end)
      mon:recv(5)
      assert.is_false(smarm.exit(p, "x"))
      assert.matches("bad pid", select(2, pcall(smarm.exit, "nope", "x")))
      local tx = smarm.channel()
      assert.matches("channel", select(2, pcall(smarm.exit, p, { tx })))
   end)

   it("racing trap_exit is either a signal or a death, never both or neither", function()
      local me = smarm.self()
      for _ = 1, 100 do
         local p = smarm.spawn(function(parent)
            local s = require "smarm"
            local rx = s.trap_exit(true)
            s.send(parent, { sig = rx:recv() })
         end, me)
         local mon = smarm.monitor(p)
         smarm.exit(p, "race")
         local down = assert(mon:recv(5))
         local m = smarm.recv(0)
         if down.reason == "race" or down.reason == "noproc" then
            assert.is_nil(m) -- ended by the signal (noproc: before the monitor was made)
         else
            assert.are.equal("normal", down.reason)
            assert.are.equal("race", m.sig.reason)
         end
      end
   end)
end)

describe("monitor refs", function()
   it("mon.ref is in the down notice; monitor(pid, rx) shares one open channel", function()
      local p = smarm.spawn(idler)
      local mon = smarm.monitor(p)
      assert.is_number(mon.ref)
      local tx, rx = smarm.channel()
      local pids, refs = {}, {}
      for i = 1, 3 do
         pids[i] = smarm.spawn(idler)
         refs[i] = smarm.monitor(pids[i], rx)
         assert.is_number(refs[i])
      end
      smarm.kill(p)
      assert.are.equal(mon.ref, assert(mon:recv(5)).ref)
      for i = 1, 3 do smarm.kill(pids[i]) end
      local seen = {}
      for _ = 1, 3 do
         local d = assert(rx:recv(5))
         seen[d.ref] = d.pid
      end
      for i = 1, 3 do assert.are.equal(pids[i], seen[refs[i]]) end
      -- the channel stays open: a dead pid's noproc notice comes on it too
      local r = smarm.monitor(p, rx)
      local d = assert(rx:recv(5))
      assert.are.same({ "noproc", r }, { d.reason, d.ref })
      assert.matches("channel rx", select(2, pcall(smarm.monitor, p, tx)))
   end)
end)

describe("the error smarm.exit(reason) raises", function()
   it("shows its reason and still ends the actor when raised again", function()
      local ok, e = pcall(smarm.exit, "bye")
      assert.is_false(ok)
      assert.are.equal("bye", e.reason)
      assert.are.equal("exit: bye", tostring(e))
      local _, e2 = pcall(smarm.exit, { code = 7 })
      assert.are.equal(7, e2.reason.code)
      assert.matches("code = 7", tostring(e2))
      local _, mon = smarm.spawn_monitor(function()
         local s = require "smarm"
         local _, err = pcall(s.exit, "again")
         error(err)
      end)
      assert.are.equal("again", assert(mon:recv(5)).reason)
   end)
end)
