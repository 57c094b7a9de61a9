-- smarm.table: shared tables (named, owned, access modes, copy semantics, heir, counters,
-- readers racing the owner's death).
local smarm = require "smarm"

local n = 0
local function fresh_name()
   n = n + 1
   return "spec_table_" .. n .. "_" .. smarm.self()
end

-- Runs fn(name, parent) in a new actor, returns what it sends back.
local function in_actor(fn, ...)
   smarm.spawn(function(f, parent, ...)
      local s = require "smarm"
      s.send(parent, { pcall(loadstring(f), ...) })
   end, string.dump(fn), smarm.self(), ...)
   return smarm.recv(5)
end

describe("smarm.table", function()
   it("keeps a set of keys with copied values", function()
      local t = smarm.table.new(fresh_name())
      local v = { a = 1, list = { 1, 2, 3 } }
      t:insert("k", v)
      v.a = 2
      local got = t:lookup("k")
      assert.are.same({ a = 1, list = { 1, 2, 3 } }, got)
      got.a = 3
      assert.are.equal(1, t:lookup("k").a)
      t:insert("k", "replaced")
      t:insert(1, true)
      t:insert(false, 2.5)
      assert.are.equal("replaced", t:lookup("k"))
      assert.are.equal(true, t:lookup(1))
      assert.are.equal(true, t:lookup(1.0))
      assert.are.equal(2.5, t:lookup(false))
      assert.is_nil(t:lookup("absent"))
      assert.are.equal(3, t:size())
      assert.is_true(t:delete("k"))
      assert.is_false(t:delete("k"))
      assert.are.equal(2, t:size())
      t:insert(1, nil) -- a nil value deletes
      assert.is_nil(t:lookup(1))
      local info = t:info()
      assert.are.equal(1, info.size)
      assert.are.equal("protected", info.access)
      assert.are.equal(smarm.self(), info.owner)
      assert.is_false(info.deleted)
      assert.is_true(info.memory > 0)
      assert.matches("^smarm table 'spec_table_", tostring(t))
   end)

   it("returns values on both sides of the size a lookup copies", function()
      -- up to 256 bytes of the message format are copied under the stripe's read lock, a
      -- longer value's blob is held while it is decoded: strings of 240 to 280 bytes (a few
      -- bytes of header each) and records that big cross from one to the other
      local t = smarm.table.new(fresh_name())
      for len = 240, 280 do
         local s = string.rep(string.char(65 + len % 26), len)
         t:insert(len, s)
         t:insert(-len, { s = s:sub(1, len - 20), n = len, list = { len, true } })
      end
      for len = 240, 280 do
         local s = string.rep(string.char(65 + len % 26), len)
         assert.are.equal(s, t:lookup(len))
         assert.are.same({ s = s:sub(1, len - 20), n = len, list = { len, true } },
            t:lookup(-len))
      end
   end)

   it("grows past its first buckets and keeps every key", function()
      local t = smarm.table.new(fresh_name())
      for i = 1, 5000 do t:insert(i, i * 2) end
      assert.are.equal(5000, t:size())
      for i = 1, 5000 do assert.are.equal(i * 2, t:lookup(i)) end
      assert.are.equal(5000 * 5001, t:foldl(function(_, v, acc) return acc + v end, 0))
   end)

   it("matches with a predicate and folds", function()
      local t = smarm.table.new(fresh_name())
      for i = 1, 10 do t:insert("k" .. i, i) end
      local m = t:match(function(_, v) return v % 2 == 0 end)
      assert.are.equal(5, #m)
      table.sort(m, function(a, b) return a[2] < b[2] end)
      assert.are.same({ "k2", 2 }, m[1])
      assert.are.equal(55, t:foldl(function(_, v, acc) return acc + v end, 0))
   end)

   it("counts atomically with update_counter", function()
      local name = fresh_name()
      local t = smarm.table.new(name, { access = "public" })
      assert.are.equal(5, t:update_counter("c", 5, 0))
      assert.are.equal(4, t:update_counter("c", -1))
      assert.has_error(function() t:update_counter("none", 1) end)
      t:insert("s", "text")
      assert.has_error(function() t:update_counter("s", 1) end)
      local mons = {}
      for i = 1, 4 do
         local _, mon = smarm.spawn_monitor(function(nm)
            local tt = require("smarm").table.open(nm)
            for _ = 1, 1000 do tt:update_counter("c", 1) end
         end, name)
         mons[i] = mon
      end
      for i = 1, 4 do assert.are.equal("normal", mons[i]:recv(10).reason) end
      assert.are.equal(4004, t:lookup("c"))
   end)

   it("is found by name from other actors, with protected and private access", function()
      local pub, prot, priv = fresh_name(), fresh_name(), fresh_name()
      local a = smarm.table.new(pub, { access = "public" })
      local b = smarm.table.new(prot)
      local c = smarm.table.new(priv, { access = "private" })
      a:insert("x", 1)
      b:insert("x", 2)
      c:insert("x", 3)
      local r = in_actor(function(p1, p2, p3)
         local T = require("smarm").table
         local ta, tb, tc = T.open(p1), T.open(p2), T.open(p3)
         ta:insert("y", 10)
         local okw, errw = pcall(tb.insert, tb, "y", 20)
         local okr, errr = pcall(tc.lookup, tc, "x")
         return ta:lookup("x"), tb:lookup("x"), okw, errw, okr, errr, T.open("no such table")
      end, pub, prot, priv)
      assert.is_true(r[1])
      assert.are.equal(1, r[2])
      assert.are.equal(2, r[3])
      assert.is_false(r[4])
      assert.matches("is protected: only its owner may write it", r[5])
      assert.is_false(r[6])
      assert.matches("is private: only its owner may read it", r[7])
      assert.is_nil(r[8])
      assert.are.equal(10, a:lookup("y"))
   end)

   it("refuses bad keys, values and names, and a name in use", function()
      local name = fresh_name()
      local t = smarm.table.new(name)
      assert.has_error(function() smarm.table.new(name) end,
         "smarm.table.new: a table named '" .. name .. "' exists")
      assert.has_error(function() t:insert({}, 1) end)
      assert.has_error(function() t:insert(0 / 0, 1) end)
      assert.has_error(function() t:insert("f", function() end) end)
      local tx, rx = smarm.channel()
      assert.has_error(function() t:insert("ch", { rx }) end,
         "smarm.table: insert: a table cannot hold channel endpoints or sockets")
      tx:send("still mine")
      assert.are.equal("still mine", rx:recv(1))
      assert.has_error(function() t.lookup(1, 2) end)
      assert.has_error(function() smarm.table.new(42) end)
      assert.has_error(function() smarm.table.new(fresh_name(), { access = "open" }) end)
      local cyc = {}
      cyc.self = cyc
      assert.has_error(function() t:insert("c", cyc) end)
   end)

   it("dies with its owner, or passes to a live heir", function()
      local gone, kept = fresh_name(), fresh_name()
      local me = smarm.self()
      local pid, mon = smarm.spawn_monitor(function(n1, n2, heir)
         local s = require "smarm"
         s.table.new(n1, { access = "public" }):insert("a", 1)
         s.table.new(n2, { access = "public", heir = heir }):insert("b", 2)
         s.send(heir, "made")
         s.recv()
      end, gone, kept, me)
      assert.are.equal("made", smarm.recv(5))
      local t1, t2 = smarm.table.open(gone), smarm.table.open(kept)
      assert.are.equal(pid, t2:info().owner)
      smarm.kill(pid)
      mon:recv(5)
      assert.is_nil(smarm.table.open(gone))
      assert.has_error(function() t1:lookup("a") end,
         "smarm.table: lookup: table '" .. gone .. "' was deleted (its owner died)")
      assert.are.equal(me, t2:info().owner)
      assert.are.equal(2, t2:lookup("b"))
      assert.are.equal(2, smarm.table.open(kept):lookup("b"))
   end)

   it("shows in the owner's memory", function()
      local t = smarm.table.new(fresh_name())
      local before = smarm.info(smarm.self()).tables
      t:insert("big", string.rep("x", 100000))
      local after = smarm.info(smarm.self()).tables
      assert.is_true(after - before >= 100000, "tables: " .. before .. " -> " .. after)
   end)

   it("serves readers while its owner dies under them", function()
      for _ = 1, 5 do
         local name = fresh_name()
         local owner = smarm.spawn(function(nm)
            local s = require "smarm"
            local t = s.table.new(nm, { access = "public" })
            for i = 1, 200 do t:insert(i, { i = i }) end
            s.recv()
         end, name)
         while not smarm.table.open(name) do smarm.sleep(0.001) end
         local readers = {}
         for r = 1, 3 do
            local pid, mon = smarm.spawn_monitor(function(nm, parent)
               local s = require "smarm"
               local t = s.table.open(nm)
               if not t then -- deleted before this reader came
                  s.send(parent, { seen = 0, errors = 1 })
                  return
               end
               local seen, errors = 0, 0
               for i = 1, 20000 do
                  local ok, v = pcall(t.lookup, t, i % 200 + 1)
                  if not ok then
                     assert(v:match("was deleted"), v)
                     errors = errors + 1
                     break
                  end
                  if v then seen = seen + 1 end
               end
               s.send(parent, { seen = seen, errors = errors })
            end, name, smarm.self())
            readers[r] = { pid = pid, mon = mon }
         end
         smarm.sleep(0.001)
         smarm.kill(owner)
         for r = 1, 3 do
            local res = smarm.recv(10)
            assert.is_table(res)
            assert.is_true(res.seen > 0 or res.errors == 1)
            local down = readers[r].mon:recv(10)
            assert.are.equal("normal", down.reason)
         end
         assert.is_nil(smarm.table.open(name))
      end
   end)
end)
