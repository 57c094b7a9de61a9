-- Flat messages (scalars, and tables of scalars under string keys) take a fast path past the
-- codec: between actors they must arrive exactly as the codec's would, in order with the rest.
local smarm = require "smarm"
local ffi = require "ffi"

-- An actor that sends back everything it receives, until it receives "stop".
local function echo()
   local s = require "smarm"
   local parent = s.recv()
   while true do
      local m = s.recv()
      if m == "stop" then
         return
      end
      s.send(parent, { m })
   end
end

-- Same value: NaN equals NaN, -0.0 differs from 0.0, cdata by type and value.
local function same(a, b)
   if type(a) ~= type(b) then
      return false
   end
   if type(a) == "number" then
      if a ~= a then
         return b ~= b
      end
      if a == 0 and b == 0 then
         return 1 / a == 1 / b
      end
      return a == b
   end
   if type(a) == "cdata" then
      return ffi.typeof(a) == ffi.typeof(b) and a == b
   end
   if type(a) ~= "table" then
      return a == b
   end
   for k, v in pairs(a) do
      if not same(v, b[k]) then
         return false
      end
   end
   for k in pairs(b) do
      if a[k] == nil then
         return false
      end
   end
   return true
end

local values = {
   0, -0.0, 0 / 0, 1 / 0, -1 / 0, 127, 128, -1, -128, -129, 32767, -32769, 2 ^ 31 - 1, -2 ^ 31,
   2 ^ 31, 2 ^ 53, 1.5, -1e-300, true, false, "", "a\0b\0", string.rep("x", 63),
   string.rep("y", 64), string.rep("\0", 200), ffi.new("int64_t", -5),
   ffi.new("uint64_t", -1), ffi.new("int64_t", 2 ^ 62), {}, { hop = 7 }, { 1, 2, 3 },
   { "a", true, x = -0.0, y = 0 / 0, [""] = "\0" },
}

describe("flat messages", function()
   it("round-trip every scalar kind and small table exactly, through a fresh actor", function()
      local pid = smarm.spawn(echo)
      smarm.send(pid, smarm.self())
      for i, v in ipairs(values) do
         assert(smarm.send(pid, v))
         local got = assert(smarm.recv(5), "no echo")[1]
         assert(same(v, got), "value " .. i .. " changed to " .. tostring(got))
      end
      smarm.send(pid, "stop")
   end)

   it("of one key carry every scalar kind as its value, both ways", function()
      -- {v = x} takes the one-key record's path in each direction: its value is read inline
      -- for the integer forms (fixint, 16 and 32 bits) and by the general case for the rest
      local pid = smarm.spawn(function()
         local s = require "smarm"
         local parent = s.recv()
         while true do
            local m = s.recv()
            if m.stop then
               return
            end
            s.send(parent, { v = m.v })
         end
      end)
      smarm.send(pid, smarm.self())
      for i, v in ipairs(values) do
         if type(v) ~= "table" then
            assert(smarm.send(pid, { v = v }))
            local got = assert(smarm.recv(5), "no echo")
            assert(same(v, got.v), "value " .. i .. " changed to " .. tostring(got.v))
         end
      end
      smarm.send(pid, { stop = true })
   end)

   it("arrive as nil too", function()
      smarm.send(smarm.self(), nil)
      local got, err = smarm.recv(1)
      assert.is_nil(got)
      assert.is_nil(err)
   end)

   it("keep their order among messages the codec takes", function()
      local pid = smarm.spawn(function(parent, n)
         local s = require "smarm"
         for i = 1, n do
            -- flat, nested, flat scalar, a flat table too big for the fast path
            s.send(parent, { seq = i })
            s.send(parent, { seq = i, nested = { i } })
            s.send(parent, i)
            s.send(parent, { seq = i, pad = string.rep("p", 300) })
         end
      end, smarm.self(), 500)
      assert.is_number(pid)
      for i = 1, 500 do
         local a, b, c, d = smarm.recv(5), smarm.recv(5), smarm.recv(5), smarm.recv(5)
         assert.are.equal(i, a.seq)
         assert.is_nil(a.nested)
         assert.are.same({ i }, b.nested)
         assert.are.equal(i, c)
         assert.are.equal(i, d.seq)
         assert.are.equal(300, #d.pad)
      end
   end)

   it("are picked by a selective receive, the rest left in order", function()
      local me = smarm.self()
      for i = 1, 6 do
         smarm.send(me, { n = i, even = i % 2 == 0 })
      end
      local m = smarm.recv(function(v)
         return v.n == 4
      end, 1)
      assert.are.equal(4, m.n)
      for _, want in ipairs({ 1, 2, 3, 5, 6 }) do
         assert.are.equal(want, smarm.recv(1).n)
      end
   end)

   it("carry int64 cdata into an actor that never loaded the FFI", function()
      local pid = smarm.spawn(function(parent)
         local s = require "smarm"
         local a, b = s.recv(), s.recv()
         s.send(parent, { tostring(a.v), tostring(b), type(a.v), type(b) })
      end, smarm.self())
      smarm.send(pid, { v = ffi.new("int64_t", -7) })
      smarm.send(pid, ffi.new("uint64_t", 9))
      assert.are.same({ "-7LL", "9ULL", "cdata", "cdata" }, smarm.recv(5))
   end)

   it("of one shape arrive as fresh tables, in actors on recycled states too", function()
      -- each actor takes the shape often enough to make a template of it, changes what it
      -- got, and reports; the next actor may get the same state back from the pool
      for round = 1, 20 do
         local pid = smarm.spawn(function(parent)
            local s = require "smarm"
            local sum = 0
            for _ = 1, 5 do
               local m = s.recv()
               sum = sum + m.hop + #m.tag
               m.hop, m.tag, m.other = nil, nil, true
            end
            s.send(parent, { sum = sum })
         end, smarm.self())
         for i = 1, 5 do
            smarm.send(pid, { hop = round * i, tag = string.rep("t", i) })
         end
         assert.are.equal(round * 15 + 15, smarm.recv(5).sum)
      end
   end)

   it("of one key keep their key's string across collections, and tell keys apart", function()
      -- the receiver keeps the string of a key it sees twice in a row; the keys here are made
      -- at run time, so nothing but that keeping holds them between the messages, and each
      -- pair has the same length and first and last bytes (hop/hip, key1/kez1)
      local pid = smarm.spawn(function(parent, n)
         local s = require "smarm"
         local got = {}
         for i = 1, n do
            local m = s.recv()
            collectgarbage()
            collectgarbage()
            local k, v = next(m)
            assert(next(m, k) == nil, "more than one key")
            -- a key that is the interned string: a lookup by a string made here finds it
            local again = string.char(k:byte(1, -1))
            got[i] = m[again] == v and k .. "=" .. v or "bad " .. tostring(k)
         end
         s.send(parent, table.concat(got, " "))
      end, smarm.self(), 12)
      local keys = { "hop", "hop", "hop", "hip", "hop", "hip", "hip", "hop", "key1", "key1",
                     "kez1", "key1" }
      local want = {}
      for i, k in ipairs(keys) do
         local dyn = k:sub(1, 1) .. k:sub(2)
         smarm.send(pid, { [dyn] = i })
         want[i] = k .. "=" .. i
      end
      assert.are.equal(table.concat(want, " "), smarm.recv(10))
   end)

   it("with metamethods' names work as metatables", function()
      -- made key by key, one key and several, and from a template (a shape seen twice)
      for _ = 1, 3 do
         smarm.send(smarm.self(), { __mode = "k" })
         smarm.send(smarm.self(), { __index = "abc", other = 1 })
         local a, b = smarm.recv(1), smarm.recv(1)
         local weak = setmetatable({}, a)
         weak[{}] = true
         collectgarbage()
         collectgarbage()
         assert.is_nil(next(weak), "a received {__mode = 'k'} made no weak table")
         local t = setmetatable({}, b)
         assert.are.equal(string.len, t.len, "a received {__index = 'abc'} did not index")
      end
   end)

   it("go through channels and timers exactly, in order with the rest", function()
      local tx, rx = smarm.channel()
      for i, v in ipairs(values) do
         assert.is_true(tx:send(v))
         assert.is_true(tx:send({ i, nested = { v } }))
      end
      for i, v in ipairs(values) do
         assert(same(v, rx:recv(1)), "value " .. i .. " changed in a channel")
         local n = rx:recv(1)
         assert.are.equal(i, n[1])
         assert(same(v, n.nested[1]), "nested value " .. i .. " changed in a channel")
      end
      smarm.send_after(0, smarm.self(), { late = "yes", n = -0.0 })
      local m = smarm.recv(5)
      assert.are.equal("yes", m.late)
      assert.are.equal(-math.huge, 1 / m.n)
   end)

   it("are copies: later changes of the sent table do not show", function()
      local t = { a = 1, b = "x" }
      smarm.send(smarm.self(), t)
      t.a, t.b = 2, "y"
      assert.are.same({ a = 1, b = "x" }, smarm.recv(1))
   end)

   -- Nested tables with channel txs among the values take a fast path of their own (what a
   -- gen_server call sends): the same message as the codec's, references and all.
   it("nested, with channel txs, round-trip exactly and carry their channels", function()
      local pid = smarm.spawn(echo)
      smarm.send(pid, smarm.self())
      local nested = {
         { a = { b = { c = { d = { e = { f = { g = "eight tables" } } } } } } },
         { list = { { id = 1, name = "a" }, { id = 2 } }, pos = { x = 1.5, y = -0.0 } },
         { { 1, 2 }, { 3, x = { 4 } }, "five", n = { true, false } },
         { a = { b = { c = { d = { e = { f = { g = { h = { i = "nine" } } } } } } } } },
      }
      for i, v in ipairs(nested) do
         assert(smarm.send(pid, v))
         local got = assert(smarm.recv(5), "no echo")[1]
         assert(same(v, got), "nested value " .. i .. " changed")
      end
      -- two txs in a call-shaped request: the echo's copies send into the channel, and the
      -- channel closes once every copy is gone
      local tx, rx = smarm.channel()
      local request = { tag = "call", req = { 41 }, from = { pid = 1, tx = tx }, more = { tx } }
      assert(smarm.send(pid, request))
      tx:release()
      do
         local back = assert(smarm.recv(5))[1]
         assert.are.equal(41, back.req[1])
         assert(back.from.tx:send({ via = "from" }))
         assert(back.more[1]:send({ via = "more" }))
         assert.are.equal("from", rx:recv(5).via)
         assert.are.equal("more", rx:recv(5).via)
         -- the echo dropped its copies (it keeps nothing), the test releases its own
         back.from.tx:release()
         back.more[1]:release()
      end
      collectgarbage()
      collectgarbage()
      smarm.send(pid, "stop")
      local v, err = rx:recv(5)
      assert.is_nil(v)
      assert.are.equal("closed", err)
   end)
end)
