-- Channels: many senders and one receiver, endpoints in messages, closing, and the
-- reference counts that decide when a channel closes.
local smarm = require "smarm"

-- Drops the calling actor's garbage endpoints now (their __gc releases references).
local function gc()
   collectgarbage()
   collectgarbage()
end

describe("channels", function()
   it("carry values in order, and poll or time out when empty", function()
      local tx, rx = smarm.channel()
      assert.matches("^channel tx 0x", tostring(tx))
      assert.matches("^channel rx 0x", tostring(rx))
      for i = 1, 100 do
         assert.is_true(tx:send({ i = i }))
      end
      for i = 1, 100 do
         assert.are.equal(i, rx:recv(1).i)
      end
      assert.are.same({ nil, "timeout" }, { rx:recv(0) })
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { rx:recv(0.03) })
      assert.is_true(smarm.now() - t0 >= 0.03)
   end)

   it("wake a waiting receiver promptly", function()
      local tx, rx = smarm.channel()
      smarm.spawn(function(tx) -- luacheck: ignore 431
         local s = require "smarm"
         s.sleep(0.02)
         tx:send("hi")
      end, tx)
      local t0 = smarm.now()
      assert.are.equal("hi", rx:recv(5))
      assert.is_true(smarm.now() - t0 < 1)
   end)

   it("travel in messages across 3 actors: tx passed on twice, the receiver gets all", function()
      local tx, rx = smarm.channel()
      local b = smarm.spawn(function(n)
         local s = require "smarm"
         local m = assert(s.recv(5))
         for i = 1, n do
            assert(m.tx:send({ from = "b", i = i }))
         end
      end, 50)
      local a = smarm.spawn(function(n, next)
         local s = require "smarm"
         local m = assert(s.recv(5))
         for i = 1, n do
            assert(m.tx:send({ from = "a", i = i }))
         end
         s.send(next, { tx = m.tx }) -- passed on a second time
      end, 50, b)
      smarm.send(a, { tx = tx })
      local last = { a = 0, b = 0 }
      for _ = 1, 100 do
         local m = assert(rx:recv(5))
         assert.are.equal(last[m.from] + 1, m.i)
         last[m.from] = m.i
      end
      assert.are.same({ a = 50, b = 50 }, last)
   end)

   it("close: sends fail, the receiver drains, then sees closed (not timeout)", function()
      local tx, rx = smarm.channel()
      tx:send(1)
      tx:send(2)
      tx:close()
      assert.are.same({ nil, "closed" }, { tx:send(3) })
      assert.are.equal(1, rx:recv(1))
      assert.are.equal(2, rx:recv(1))
      assert.are.same({ nil, "closed" }, { rx:recv(1) })
      assert.are.same({ nil, "closed" }, { rx:recv(0) })
      assert.are.same({ nil, "closed" }, { rx:recv() })
   end)

   it("close for senders when the receiver dies", function()
      local child = smarm.spawn(function(parent)
         local s = require "smarm"
         local tx, rx = s.channel() -- luacheck: ignore 431
         s.send(parent, tx)
         s.recv(5) -- dies when told (rx stays referenced until then)
         return rx
      end, smarm.self())
      local tx = assert(smarm.recv(5))
      assert.is_true(tx:send("while alive"))
      smarm.send(child, "die")
      local ok, why
      for _ = 1, 500 do
         ok, why = tx:send("x")
         if not ok then
            break
         end
         smarm.sleep(0.002)
      end
      assert.is_nil(ok)
      assert.are.equal("closed", why)
   end)

   it("close for the receiver when the last sender dies", function()
      local tx, rx = smarm.channel()
      smarm.spawn(function(tx) -- luacheck: ignore 431
         tx:send("last words")
      end, tx)
      tx = nil -- luacheck: ignore 311
      gc()
      assert.are.equal("last words", rx:recv(5))
      assert.are.same({ nil, "closed" }, { rx:recv(5) })
   end)

   it("release a tx carried by a message that is never delivered", function()
      local tx, rx = smarm.channel()
      local dead = smarm.spawn(function() end)
      -- never received: the child's inbox is closed at its death with the message in it
      local idle = smarm.spawn(function() local s = require "smarm"; s.sleep(0.02) end)
      smarm.send(idle, { tx = tx })
      smarm.sleep(0.02)
      smarm.send(dead, { tx = tx }) -- dead pid: freed at once
      tx = nil -- luacheck: ignore 311
      gc()
      assert.are.same({ nil, "closed" }, { rx:recv(5) })
   end)

   it("move rx to the actor it is sent to; the old rx raises", function()
      local tx, rx = smarm.channel()
      local child = smarm.spawn(function(parent)
         local s = require "smarm"
         local m = assert(s.recv(5))
         local v = m.rx:recv(5)
         s.send(parent, { got = v })
      end, smarm.self())
      smarm.send(child, { rx = rx })
      assert.has_error(function() rx:recv(0) end,
         "rx:recv: this rx was sent to another actor and can no longer receive")
      assert.matches("sent away", tostring(rx))
      assert.has_error(function() smarm.send(child, rx) end)
      tx:send("for the new owner")
      assert.are.equal("for the new owner", assert(smarm.recv(5)).got)
   end)

   it("refuse misuse with errors naming the call", function()
      local tx, rx = smarm.channel()
      assert.has_error(function() tx.send(rx, 1) end)
      assert.has_error(function() rx.recv(tx) end)
      assert.has_error(function() tx:send(print) end, "tx:send: cannot send a function (at msg)")
      assert.has_error(function() rx:recv(-1) end)
      assert.has_error(function() smarm.send(smarm.self(), { rx, rx }) end)
   end)

   it("tx:release lets go of one sender without closing the channel for the others", function()
      local tx, rx = smarm.channel()
      smarm.spawn(function(t)
         local s = require "smarm"
         s.sleep(0.02)
         t:send("from the copy")
      end, tx)
      tx:release()
      local ok, err = pcall(tx.send, tx, 1)
      assert.is_false(ok)
      assert.matches("tx:send: this tx was released", err)
      assert.are.equal("from the copy", rx:recv(5))
      -- the copy died with its actor: no sender is left
      assert.are.same({ nil, "closed" }, { rx:recv(5) })
   end)

   it("rx:release lets go of the receiver: senders see closed, the object is dead", function()
      local tx, rx = smarm.channel()
      assert.is_true(tx:send("queued"))
      rx:release()
      assert.are.same({ nil, "closed" }, { tx:send(1) })
      local ok, err = pcall(rx.recv, rx, 0)
      assert.is_false(ok)
      assert.matches("rx:recv: this rx was released", err)
      ok, err = pcall(rx.release, rx)
      assert.is_false(ok)
      assert.matches("rx:release: this rx was released", err)
      assert.are.equal("channel rx (released)", tostring(rx))
      -- a copy of the tx in another actor sees closed too
      local pid, mon = smarm.spawn_monitor(function(t)
         local s = require "smarm"
         local r, why = t:send(2)
         s.exit(r == nil and why or "sent")
      end, tx)
      local down = mon:recv(5)
      assert.are.equal(pid, down.pid)
      assert.are.equal("closed", down.reason)
      gc()
   end)

   it("a released tx or rx cannot be sent or selected on: a clear error, not a crash", function()
      local tx, rx = smarm.channel()
      tx:release()
      rx:release()
      local ok, err = pcall(smarm.send, smarm.self(), { t = tx })
      assert.is_false(ok)
      assert.matches("cannot send a channel tx that was released %(at msg.t%)", err)
      ok, err = pcall(smarm.send, smarm.self(), rx)
      assert.is_false(ok)
      assert.matches("cannot send a channel rx that was released or sent to another actor", err)
      ok, err = pcall(smarm.spawn, function() end, tx)
      assert.is_false(ok)
      assert.matches("cannot send a channel tx that was released", err)
      ok, err = pcall(smarm.select, { rx }, 0)
      assert.is_false(ok)
      assert.matches("arm 1 is an rx released or sent to another actor", err)
      assert.are.equal("channel tx (released)", tostring(tx))
      assert.are.equal("channel rx (released)", tostring(rx))
      -- the inbox is untouched: nothing was queued by the failed sends
      assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
   end)

   it("a released endpoint has no finalizer left (debug.getmetatable shows no __gc)", function()
      local tx, rx = smarm.channel()
      assert.is_function(debug.getmetatable(tx).__gc)
      assert.is_function(debug.getmetatable(rx).__gc)
      tx:release()
      rx:release()
      assert.is_nil(debug.getmetatable(tx).__gc)
      assert.is_nil(debug.getmetatable(rx).__gc)
      -- the methods and the protected metatable stay
      assert.are.equal("smarm channel", getmetatable(tx))
      assert.is_function(tx.send)
      assert.is_function(rx.recv)
      local ok, err = pcall(tx.send, tx, 1)
      assert.is_false(ok)
      assert.matches("tx:send: this tx was released", err)
      gc()
   end)

   it("lets go of the tx in the arguments of an actor killed before its first run", function()
      for _ = 1, 20 do
         local tx, rx = smarm.channel()
         local pid = smarm.spawn(function(t) require("smarm").sleep(10, t) end, tx)
         smarm.kill(pid)
         tx:release()
         -- the only tx left was in the spawn arguments: gone with the actor, booted or not
         assert.are.same({ nil, "closed" }, { rx:recv(5) })
      end
   end)

   it("keep working after Lua code empties the runtime's registry entries", function()
      -- the runtime keeps its metatables and a wait's anchor under light userdata keys, and
      -- caches them in roots no Lua code reaches: clearing the registry must neither crash
      -- (a cached object freed) nor break channels, waits or calls
      smarm.spawn(function(parent)
         local s = require "smarm"
         local gen_server = require "smarm.gen_server"
         local tx, rx = s.channel()
         tx:send(1)
         assert(rx:recv(1) == 1)
         local server = assert(gen_server.start("support.counter", {}))
         assert(gen_server.call(server, { "add", 2 }) == 2)
         local reg = debug.getregistry()
         local keys = {}
         for k in pairs(reg) do
            if type(k) == "userdata" then keys[#keys + 1] = k end
         end
         for _, k in ipairs(keys) do reg[k] = nil end
         collectgarbage()
         collectgarbage()
         -- the old endpoints, new ones, a wait that parks, a monitor, a call
         tx:send(2)
         assert(rx:recv(1) == 2)
         local tx2, rx2 = s.channel()
         s.spawn(function(t) require("smarm").sleep(0.01); t:send("late") end, tx2)
         assert(rx2:recv(5) == "late")
         assert(gen_server.call(server, { "add", 3 }) == 5)
         local mon = s.monitor(server)
         assert(gen_server.stop(server, "normal", 5))
         assert(mon:recv(5))
         s.send(parent, { ok = #keys })
      end, smarm.self())
      local m = smarm.recv(10)
      assert.is_table(m)
      assert.is_true(m.ok > 0)
   end)
end)
