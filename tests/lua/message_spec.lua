-- Messages: per-sender FIFO, copy semantics, and what cannot be sent.
local smarm = require "smarm"

describe("messages", function()
   it("arrive in the order one sender sent them, interleaved fairly between senders", function()
      local N = 5000
      for s = 1, 3 do
         smarm.spawn(function(parent, id, n)
            local sm = require "smarm"
            for i = 1, n do
               sm.send(parent, { from = id, seq = i })
            end
         end, smarm.self(), s, N)
      end
      local last = { 0, 0, 0 }
      for _ = 1, 3 * N do
         local m = assert(smarm.recv(10))
         assert.are.equal(last[m.from] + 1, m.seq)
         last[m.from] = m.seq
      end
      assert.are.same({ N, N, N }, last)
   end)

   it("are copies: mutating after the send does not change what was received", function()
      local t = { list = { 1, 2, 3 }, name = "before" }
      smarm.send(smarm.self(), t)
      t.name = "after"
      t.list[1] = 100
      local got = smarm.recv(0)
      assert.are.equal("before", got.name)
      assert.are.same({ 1, 2, 3 }, got.list)
      assert.are_not.equal(t, got)
   end)

   it("carry every sendable kind intact", function()
      local ffi = require "ffi"
      local v = {
         n = 1.5, i = -7, big = 2 ^ 53, nan_free = 1 / 0, s = "a\0b", t = true, f = false,
         nested = { { { deep = "yes" } } }, [10] = "ten", [1.5] = "float key",
         [true] = "bool key", i64 = ffi.new("int64_t", -5), u64 = ffi.new("uint64_t", 7),
      }
      smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, s.recv())
      end, smarm.self())
      -- through a second actor and back
      local pid = smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, s.recv())
      end, smarm.self())
      smarm.send(pid, v)
      local got = assert(smarm.recv(5))
      assert.are.equal(1.5, got.n)
      assert.are.equal(-7, got.i)
      assert.are.equal(2 ^ 53, got.big)
      assert.are.equal(math.huge, got.nan_free)
      assert.are.equal("a\0b", got.s)
      assert.is_true(got.t)
      assert.is_false(got.f)
      assert.are.equal("yes", got.nested[1][1].deep)
      assert.are.equal("ten", got[10])
      assert.are.equal("float key", got[1.5])
      assert.are.equal("bool key", got[true])
      assert.are.equal("-5LL", tostring(got.i64))
      assert.are.equal("7ULL", tostring(got.u64))
   end)

   it("copy shared subtables and drop metatables", function()
      local shared = { 1 }
      local v = setmetatable({ a = shared, b = shared }, { __index = function() return 1 end })
      smarm.send(smarm.self(), v)
      local got = smarm.recv(0)
      assert.is_nil(getmetatable(got))
      assert.are.same({ 1 }, got.a)
      got.a[1] = 2
      assert.are.equal(1, got.b[1])
   end)

   local refused = {
      { "a function", function() return { handler = print } end, "msg.handler" },
      { "a function", function() return { list = { 1, function() end } } end, "msg.list[2]" },
      { "a coroutine", function() return { co = coroutine.create(print) } end, "msg.co" },
      { "a userdata", function() return { f = io.stdout } end, "msg.f" },
      { "a cyclic table", function()
         local t = { a = { } }
         t.a.b = t
         return t
      end, "msg.a.b" },
      { "a function", function() return { ["two words"] = print } end, 'msg["two words"]' },
   }
   for _, case in ipairs(refused) do
      it("refuses " .. case[1] .. " and names where it sits: " .. case[3], function()
         local ok, err = pcall(smarm.send, smarm.self(), case[2]())
         assert.is_false(ok)
         assert.is_truthy(err:find("smarm.send: cannot send " .. case[1], 1, true), err)
         assert.is_truthy(err:find("(at " .. case[3] .. ")", 1, true), err)
         -- nothing was delivered
         assert.are.same({ nil, "timeout" }, { smarm.recv(0) })
      end)
   end

   it("refuses a non-int64 cdata", function()
      local ffi = require "ffi"
      local ok, err = pcall(smarm.send, smarm.self(), { p = ffi.new("int[2]") })
      assert.is_false(ok)
      assert.matches("msg.p", err)
   end)
end)
