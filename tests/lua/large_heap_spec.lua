-- A state whose heap grows past 4 MiB takes an arena of its own for its small blocks
-- (vm/luavm.c): blocks it made before stay in the shared heap, so from then on a free or a
-- resize finds each block's allocator by its address. These actors move blocks between the
-- three allocators (shared heap, arena, malloc for large blocks) every way LuaJIT does and
-- check that nothing they hold is lost or mixed up.

-- Builds a heap past the threshold, with blocks of each origin, then reports.
local function large(parent)
   local s = require "smarm"
   -- made in the shared heap: a small table, a table whose array part is large (malloc),
   -- strings
   local early = { 1, 2, 3 }
   local wide = {}
   for i = 1, 2000 do wide[i] = i end
   local words = {}
   for i = 1, 100 do words[i] = "w" .. i end
   local before = s.info(s.self()).heap
   local keep = {}
   for i = 1, 120000 do keep[i] = { i } end
   local after = s.info(s.self()).heap
   -- a shared-heap table grows into the arena, then into malloc
   for i = 4, 3000 do early[i] = i end
   -- a malloc'd array part shrinks to a small block (the table is rehashed by new keys)
   for i = 9, 2000 do wide[i] = nil end
   for i = 1, 40 do wide["k" .. i] = i end
   -- churn: whole trees made and dropped, several collections
   local function tree(d)
      if d == 0 then return {} end
      return { tree(d - 1), tree(d - 1) }
   end
   local function count(t)
      if not t[1] then return 1 end
      return 1 + count(t[1]) + count(t[2])
   end
   local nodes = 0
   for _ = 1, 20 do
      nodes = nodes + count(tree(12))
      collectgarbage()
   end
   local sum = 0
   for i = 1, #keep do sum = sum + keep[i][1] end
   local esum = 0
   for i = 1, #early do esum = esum + early[i] end
   local wsum, wn = 0, 0
   for k, v in pairs(wide) do
      wn = wn + 1
      wsum = wsum + v
      assert(type(k) == "number" and k == v or k == "k" .. v, "wide: bad entry")
   end
   local wok = true
   for i = 1, 100 do wok = wok and words[i] == "w" .. i end
   local peak = s.info(s.self()).memory
   keep, early = nil, nil -- luacheck: ignore 311 (dropped for the collection below)
   collectgarbage()
   collectgarbage()
   s.send(parent, {
      before = before, after = after, sum = sum, esum = esum, wsum = wsum, wn = wn,
      words = wok, nodes = nodes, peak = peak, memory = s.info(s.self()).memory,
   })
end

-- Past the threshold, then past its max_heap.
local function large_then_over()
   local t = {} -- luacheck: ignore 241 (it only grows)
   while true do t[#t + 1] = { #t } end
end

-- Past the threshold, then a shrink that every allocator refuses: the table keeps its
-- entries (the block stays where it is).
local function large_shrink_refused(parent)
   local s = require "smarm"
   local keep = {}
   for i = 1, 120000 do keep[i] = { i } end
   local ok, err, n = require("support.shrink_refused").fill(2000)
   collectgarbage()
   s.send(parent, { ok = ok, err = tostring(err), n = n, heap = s.info(s.self()).heap, k = #keep })
end

-- Past the threshold: reports its reservation (base/arena_map.c) and where its new tables lie.
local function reserved(parent)
   local s = require "smarm"
   local amap = require "support.arena_map"
   local none = amap.running() == nil
   local keep = {}
   for i = 1, 120000 do keep[i] = { i } end
   local m = assert(amap.running(), "no reservation")
   local st = amap.stats(m)
   local inside = 0
   for _ = 1, 100 do
      if amap.holds(m, {}) then inside = inside + 1 end
   end
   s.send(parent, {
      none = none, heap = s.info(s.self()).heap, inside = inside, n = #keep,
      handed = st.handed, committed = st.committed, reserved = st.reserved, live = amap.live(),
   })
end

local smarm = require "smarm" -- below the bodies, so none can capture it

describe("a large heap", function()
   it("takes an arena and keeps every block it held before", function()
      local pid, mon = smarm.spawn_monitor(large, smarm.self())
      local r = assert(smarm.recv(60), "no result")
      assert.are.equal("shared", r.before)
      assert.are.equal("arena", r.after)
      assert.are.equal(120000 * 120001 / 2, r.sum)
      assert.are.equal(3000 * 3001 / 2, r.esum)
      assert.are.equal(8 + 40, r.wn)
      assert.are.equal(36 + 40 * 41 / 2, r.wsum)
      assert.is_true(r.words)
      assert.are.equal(20 * (2 ^ 13 - 1), r.nodes)
      assert.is_true(r.peak > 4 * 1024 * 1024, "peak " .. r.peak)
      -- what it dropped was given back (counted as its allocators were told)
      assert.is_true(r.memory < r.peak / 2, ("memory %d of peak %d"):format(r.memory, r.peak))
      local down = assert(mon:recv(10), "no down notice")
      assert.are.equal("normal", down.reason)
      assert.is_nil(smarm.info(pid))
   end)

   it("still ends with reason memory past its max_heap", function()
      local _, mon = smarm.spawn_opt({ monitor = true, max_heap = 16 * 1024 * 1024 },
         large_then_over)
      local down = assert(mon:recv(60), "no down notice")
      assert.are.equal("memory", down.reason)
   end)

   it("never fails a block that shrinks", function()
      smarm.spawn(large_shrink_refused, smarm.self())
      local r = assert(smarm.recv(60), "no result")
      assert.are.equal("arena", r.heap)
      assert.are.equal("nil", r.err)
      assert.is_true(r.ok)
      assert.are.equal(8 + 40, r.n)
      assert.are.equal(120000, r.k)
   end)

   it("takes its arena's memory from a reservation given back when it ends", function()
      local amap = require "support.arena_map"
      local _, mon = smarm.spawn_monitor(reserved, smarm.self())
      local r = assert(smarm.recv(60), "no result")
      assert.is_true(r.none, "a reservation before the arena")
      assert.are.equal("arena", r.heap)
      assert.are.equal(120000, r.n)
      -- every small block made since lies in the reservation
      assert.are.equal(100, r.inside)
      assert.is_true(r.handed > 2 * 1024 * 1024, "handed " .. r.handed)
      assert.is_true(r.committed >= r.handed)
      assert.is_true(r.reserved >= r.committed)
      assert.is_true(r.live >= 1)
      assert.are.equal("normal", assert(mon:recv(10), "no down notice").reason)
      -- the down notice goes out just before the state is closed; an actor of an earlier
      -- case may still be closing too, so the count can only fall
      local deadline = smarm.now() + 10
      while amap.live() >= r.live and smarm.now() < deadline do smarm.sleep(0.01) end
      assert.is_true(amap.live() < r.live, "its reservation is still there")
   end)

   it("many at once, on every scheduler, each end clean", function()
      local mons = {}
      for i = 1, 4 do
         local _, mon = smarm.spawn_monitor(large, smarm.self())
         mons[i] = mon
      end
      for _ = 1, 4 do
         local r = assert(smarm.recv(120), "no result")
         assert.are.equal("arena", r.after)
         assert.are.equal(120000 * 120001 / 2, r.sum)
      end
      for i = 1, 4 do
         assert.are.equal("normal", assert(mons[i]:recv(10)).reason)
      end
   end)
end)
