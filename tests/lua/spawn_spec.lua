-- spawn, self, send and recv between actors; spawn's argument rules.
local smarm = require "smarm"

describe("spawn", function()
   it("runs the function in a new actor with copied arguments", function()
      local child = smarm.spawn(function(parent, a, b)
         local s = require "smarm"
         s.send(parent, { sum = a + b.x, me = s.self() })
      end, smarm.self(), 2, { x = 40 })
      local m = assert(smarm.recv(5))
      assert.are.equal(42, m.sum)
      assert.are.equal(child, m.me)
   end)

   it("builds tables from constructors in the spawned function as the spawner would", function()
      -- the function travels as bytecode: its constructors' computed fields must come out
      -- the same (nil fields absent, a call's missing results absent, not false)
      smarm.spawn(function(parent)
         local s = require "smarm"
         local function none() end
         local function nothing() return nil end
         local keys = require "support.shape"
         local x = 7
         s.send(parent, {
            keys({ hop = x + 1 }),
            keys({ a = nothing(), b = x, c = "k" }),
            keys({ "k", none() }),
            keys({ tag = "t", x, none() }),
            keys({ u = nothing() }),
         })
      end, smarm.self())
      local m = assert(smarm.recv(5))
      assert.are.same({ "hop=8", "b=7 c=k", "1=k", "1=7 tag=t", "" }, m)
   end)

   it("keeps a constructor's nil fields nil, in the child and in the spawner", function()
      -- {k = nil} has no store after it, a store after a branch or a call may not run
      -- first, and a local captured by a closure may be seen before its store: none of
      -- these keys may come out false (the spawn path fills the keys a constructor stores)
      local function shapes(x, parent)
         local keys = require "support.shape"
         local out = { keys({ unset_field_of_spawn_spec = nil, n = x }) }
         local t = { a = nil }
         if x > 100 then t.a = 1 end
         out[#out + 1] = keys(t)
         local t2 = { b = nil }
         t2.b = x
         out[#out + 1] = keys(t2)
         local t3 = { c = nil }
         local seen = keys(t3)
         t3.c = 1
         out[#out + 1] = seen
         local cap
         local function peek() return tostring(cap.z) end
         cap = { z = nil }
         local before = peek()
         cap.z = 1
         out[#out + 1] = before
         if parent then require("smarm").send(parent, out) end
         return out
      end
      local expected = { "n=7", "", "b=7", "", "nil" }
      -- the spawner drops its garbage first: a nil field's key may then name a freed string
      collectgarbage()
      collectgarbage()
      smarm.spawn(shapes, 7, smarm.self())
      assert.are.same(expected, assert(smarm.recv(5)))
      assert.are.same(expected, shapes(7))
      for _ = 1, 3 do
         smarm.spawn(function(parent, x)
            local s = require "smarm"
            local keys = require "support.shape"
            s.send(parent, { keys({ unset_field_of_spawn_spec = nil, n = x }) })
         end, smarm.self(), 7)
         collectgarbage()
      end
      for _ = 1, 3 do
         assert.are.same({ "n=7" }, assert(smarm.recv(5)))
      end
      assert.are.same(expected, shapes(7))
   end)

   it("gives every actor a distinct pid that prints as <0.IDX.GEN>", function()
      local a = smarm.spawn(function() end)
      local b = smarm.spawn(function() end)
      assert.are_not.equal(a, b)
      assert.is_number(a)
      assert.matches("^<0%.%d+%.%d+>$", smarm.pid_tostring(a))
   end)

   it("refuses a function with upvalues, naming the upvalue", function()
      local captured = 1
      local ok, err = pcall(smarm.spawn, function() return captured end)
      assert.is_false(ok)
      assert.matches("smarm.spawn: the function has upvalues %(captured%)", err)
   end)

   it("refuses non-functions and unsendable arguments", function()
      local ok, err = pcall(smarm.spawn, 42)
      assert.is_false(ok)
      assert.matches("a function expected, got number", err)
      ok, err = pcall(smarm.spawn, function() end, 1, { f = print })
      assert.is_false(ok)
      assert.matches("cannot send a function %(at arg 2.f%)", err)
   end)

   it("keeps the spawner's globals out of the child", function()
      rawset(_G, "leaked_global", "parent")
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, tostring(rawget(_G, "leaked_global")))
      end, smarm.self())
      rawset(_G, "leaked_global", nil)
      assert.are.equal("nil", smarm.recv(5))
   end)

   it("reports a dead pid on send", function()
      local child = smarm.spawn(function(parent)
         require("smarm").send(parent, "bye")
      end, smarm.self())
      assert.are.equal("bye", smarm.recv(5))
      -- the child has ended once its sweep is done; wait for its slot to die
      local ok, err
      for _ = 1, 1000 do
         ok, err = smarm.send(child, "late")
         if not ok then break end
         smarm.sleep(0.001)
      end
      assert.is_nil(ok)
      assert.are.equal("dead", err)
   end)

   it("rejects bad pids with a clear error", function()
      local ok, err = pcall(smarm.send, {}, 1)
      assert.is_false(ok)
      assert.matches("smarm.send: bad pid", err)
      assert.are.same({ nil, "unresolved" }, { smarm.send("nobody registered this", 1) })
      ok, err = pcall(smarm.send, 1.5, 1)
      assert.is_false(ok)
      assert.matches("is not a pid", err)
   end)

   it("yields to let others run", function()
      local child = smarm.spawn(function(parent)
         require("smarm").send(parent, "ran")
      end, smarm.self())
      assert.is_number(child)
      smarm.yield()
      assert.are.equal("ran", smarm.recv(5))
   end)
end)

describe("recv", function()
   it("times out with nil, 'timeout' when nothing arrives", function()
      local t0 = smarm.now()
      local v, err = smarm.recv(0.05)
      local dt = smarm.now() - t0
      assert.is_nil(v)
      assert.are.equal("timeout", err)
      assert.is_true(dt >= 0.05 and dt < 5, "elapsed " .. dt)
   end)

   it("polls with a zero timeout", function()
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
      smarm.send(smarm.self(), "x")
      assert.are.equal("x", smarm.recv(0))
   end)

   it("delivers nil and false as messages", function()
      smarm.send(smarm.self(), nil)
      smarm.send(smarm.self(), false)
      local a, ea = smarm.recv(0)
      local b = smarm.recv(0)
      assert.is_nil(a)
      assert.is_nil(ea)
      assert.is_false(b)
   end)

   it("wakes promptly when a message arrives during a long wait", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.sleep(0.02)
         s.send(parent, "late but here")
      end, smarm.self())
      local t0 = smarm.now()
      assert.are.equal("late but here", smarm.recv(10))
      assert.is_true(smarm.now() - t0 < 5)
   end)

   it("waits inside a C call boundary by holding the stack", function()
      smarm.spawn(function(parent)
         require("smarm").send(parent, "through gsub")
      end, smarm.self())
      local got
      string.gsub("x", "x", function()
         got = smarm.recv(5)
      end)
      assert.are.equal("through gsub", got)
   end)

   it("sleeps at least the given time", function()
      local t0 = smarm.now()
      smarm.sleep(0.03)
      local dt = smarm.now() - t0
      assert.is_true(dt >= 0.03 and dt < 5, "slept " .. dt)
   end)
end)

describe("exit", function()
   it("ends the actor with the given reason without a crash report", function()
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, "before")
         s.exit("done")
      end, smarm.self())
      assert.are.equal("before", smarm.recv(5))
   end)
   it("carries arguments of any size, and drops those of an actor killed before it ran", function()
      -- the payload (the function's bytecode and its arguments) is a block of the actor heap:
      -- it grows through the size classes and past them (malloc's), and is fitted to its length
      local self = smarm.self()
      for _, n in ipairs({ 0, 1, 60, 61, 200, 500, 1000, 3000, 3900, 4000, 4100, 5000, 70000 }) do
         smarm.spawn(function(parent, str, k)
            local sm = require "smarm"
            sm.send(parent, { len = #str, ok = str == string.rep("x", k) })
         end, self, string.rep("x", n), n)
         assert.are.same({ len = n, ok = true }, assert(smarm.recv(5)))
      end
      -- killed while queued, before their boot: the payload and the channel it carries are
      -- let go (the channel's last sender gone, its receiver reads closed)
      for _, n in ipairs({ 10, 3000, 70000 }) do
         local tx, rx = smarm.channel()
         local pid, mon = smarm.spawn_monitor(function(t, str)
            t:send(#str)
         end, tx, string.rep("y", n))
         tx = nil -- luacheck: ignore 311 (dropped for the collection below)
         collectgarbage()
         smarm.kill(pid)
         local reason = assert(mon:recv(5)).reason
         assert.is_truthy(reason == "killed" or reason == "normal")
         -- another scheduler may have run it before the kill (it sent, then was killed or
         -- ended): either way the channel's last sender is gone, or it would read timeout
         local got = { rx:recv(5) }
         if got[1] == n then
            got = { rx:recv(5) }
         end
         assert.are.same({ nil, "closed" }, got)
      end
   end)
end)
