-- Selective receive: smarm.recv(match [, timeout]) over the inbox in arrival order.
local smarm = require "smarm"
local selective = require "smarm.selective"

-- Empties the calling actor's inbox.
local function flush()
   while smarm.recv(0) ~= nil do end
end

local function is(n)
   return function(m) return type(m) == "table" and m.n == n end
end

describe("selective receive", function()
   before_each(flush)

   it("takes the first match and leaves the others queued in order", function()
      local me = smarm.self()
      for i = 1, 6 do smarm.send(me, { n = i % 3, i = i }) end
      local m = smarm.recv(is(2))
      assert.are.equal(2, m.i)
      assert.are.same({ nil, "timeout" }, { smarm.recv(is(7), 0) })
      local order = {}
      for _ = 1, 5 do order[#order + 1] = smarm.recv(0).i end
      assert.are.same({ 1, 3, 4, 5, 6 }, order)
      assert.is_nil(smarm.recv(0))
   end)

   it("waits for a matching message and times out without one", function()
      local me = smarm.self()
      smarm.send(me, "early")
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.sleep(0.02)
         s.send(parent, "noise")
         s.send(parent, { n = 42 })
      end, me)
      assert.are.equal(42, smarm.recv(is(42), 5).n)
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { smarm.recv(is(1), 0.05) })
      assert.is_true(smarm.now() - t0 >= 0.04)
      assert.are.equal("early", smarm.recv(0))
      assert.are.equal("noise", smarm.recv(0))
   end)

   it("decodes a kept message once: the next scan sees the same value", function()
      local me = smarm.self()
      smarm.send(me, { n = 1 })
      smarm.send(me, { n = 2 })
      local seen = {}
      assert.is_nil(smarm.recv(function(m) seen[#seen + 1] = m end, 0))
      local again = {}
      assert.is_nil(smarm.recv(function(m) again[#again + 1] = m end, 0))
      assert.are.equal(2, #again)
      assert.is_true(rawequal(seen[1], again[1]) and rawequal(seen[2], again[2]))
      -- a plain recv hands out the cached value too
      assert.is_true(rawequal(seen[1], smarm.recv(0)))
      assert.is_true(rawequal(seen[2], smarm.recv(0)))
   end)

   it("keeps the channels of a scanned message working", function()
      local tx, rx = smarm.channel()
      smarm.send(smarm.self(), { tx = tx })
      tx:release()
      assert.is_nil(smarm.recv(function() return false end, 0))
      local m = smarm.recv(0)
      assert.is_true(m.tx:send("hello"))
      assert.are.equal("hello", rx:recv(1))
      m.tx:release()
      assert.are.same({ nil, "closed" }, { rx:recv(1) })
   end)

   it("releases the channels of scanned messages an ending actor never took", function()
      local tx, rx = smarm.channel()
      local pid = smarm.spawn(function()
         local s = require "smarm"
         s.recv(function(m) return m == "go" end)
      end)
      smarm.send(pid, { tx = tx })
      tx:release()
      smarm.sleep(0.02)
      smarm.send(pid, "go")
      assert.are.same({ nil, "closed" }, { rx:recv(5) })
   end)

   it("finds a reply after a mark without looking at what was queued before", function()
      local me = smarm.self()
      for i = 1, 20000 do smarm.send(me, { n = 0, i = i }) end
      local mark = selective.mark()
      smarm.send(me, { n = 1 })
      local calls = 0
      local m = smarm.recv(function(x)
         calls = calls + 1
         return x.n == 1
      end, 5, mark)
      assert.are.equal(1, m.n)
      assert.are.equal(1, calls)
      -- the queue before the mark is intact
      assert.are.equal(1, smarm.recv(0).i)
      local n = 1
      while smarm.recv(0) do n = n + 1 end
      assert.are.equal(20000, n)
   end)

   it("a mark survives the taking of the message it points at", function()
      local me = smarm.self()
      smarm.send(me, "a")
      smarm.send(me, "b")
      local mark = selective.mark()
      assert.are.equal("b", smarm.recv(function(x) return x == "b" end, 0))
      smarm.send(me, "c")
      local calls = 0
      assert.are.equal("c", smarm.recv(function(x)
         calls = calls + 1
         return x == "c"
      end, 0, mark))
      assert.are.equal(1, calls)
      assert.are.equal("a", smarm.recv(0))
   end)

   it("finds a reply that arrives while it scans a long queue", function()
      local me = smarm.self()
      for round = 1, 20 do
         for i = 1, 500 do smarm.send(me, { n = 0, i = i }) end
         smarm.spawn(function(parent, r)
            require("smarm").send(parent, { n = 1, round = r })
         end, me, round)
         local m = smarm.recv(function(x)
            -- a slow match, so that the reply lands mid-scan
            local s = 0
            for k = 1, 200 do s = s + k end
            return s > 0 and x.n == 1
         end, 5)
         assert.are.equal(round, m.round)
         local prev = 0
         for _ = 1, 500 do
            local x = smarm.recv(0)
            assert.are.equal(prev + 1, x.i)
            prev = x.i
         end
         assert.is_nil(smarm.recv(0))
      end
   end)

   it("leaves the queue intact when the match function raises", function()
      local me = smarm.self()
      for i = 1, 3 do smarm.send(me, i) end
      local ok, err = pcall(smarm.recv, function(m)
         if m == 2 then error("no twos") end
      end, 0)
      assert.is_false(ok)
      assert.matches("no twos", err)
      assert.are.same({ 1, 2, 3 }, { smarm.recv(0), smarm.recv(0), smarm.recv(0) })
   end)

   it("refuses a receive nested in the match function", function()
      local me = smarm.self()
      smarm.send(me, 1)
      smarm.send(me, 2)
      local ok, err = pcall(smarm.recv, function() return smarm.recv(0) == 99 end, 0)
      assert.is_false(ok)
      assert.matches("during a selective receive", err)
      flush()
   end)

   it("rejects a bad timeout and a bad match", function()
      assert.has_error(function() smarm.recv(function() end, -1) end,
         "smarm.recv: timeout must not be negative")
      assert.matches("match must be a function", select(2, pcall(selective.recv, 5)))
   end)
end)
