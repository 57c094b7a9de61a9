-- One physical copy of the interpreter's dispatch table (vm/dispatch_share.h): a state that
-- has parked 64 times gets the shared page mapped over its own dispatch page, a private
-- mapping of one memfd page ("smarm-dispatch" in /proc/self/smaps), so a state that writes
-- its table (a hook, a trace being recorded) gets its own copy back and nobody else sees the
-- write. Each looper below tells whether its own page is the shared one
-- (smarm_ffi_dispatch_shared); /proc/self/smaps shows the mappings (a page mapped by many has
-- a proportional share, Pss, below its size).
local smarm = require "smarm"

local T = 30 -- the bound of every wait that should succeed

-- mappings of the dispatch page, and how many of them are the shared page (not a copy)
local function dispatch_pages()
   local f = assert(io.open("/proc/self/smaps", "r"))
   local total, shared, in_dispatch = 0, 0, false
   for line in f:lines() do
      if line:match("^%x+%-%x+ ") then
         in_dispatch = line:find("smarm-dispatch", 1, true) ~= nil
         if in_dispatch then total = total + 1 end
      elseif in_dispatch then
         local pss = line:match("^Pss:%s+(%d+) kB")
         if pss and tonumber(pss) < 4 then shared = shared + 1 end
      end
   end
   f:close()
   return total, shared
end

-- A message loop: answers each message with its own, until "stop" (its own parks are the
-- waits of its recv).
local function looper()
   local s = require "smarm"
   local C = require "smarm.ffi"
   while true do
      local m = s.recv()
      if m == "stop" then return end
      if type(m) == "table" and m.ask then
         s.send(m.from, { shared = C.smarm_ffi_dispatch_shared() })
      elseif type(m) == "table" and m.hook then
         -- a count hook in a state whose table is the shared page: the write that arms it
         -- copies the page, and the hook runs
         local n = 0
         debug.sethook(function() n = n + 1 end, "", 100)
         local x = 0
         for i = 1, 1e5 do x = x + i % 3 end
         debug.sethook()
         s.send(m.from, { hooked = n, x = x })
      elseif type(m) == "table" and m.trace then
         -- loops that compile: recording switches this state's table to the recorder
         local x = 0
         for k = 1, 20 do
            local f = load("local x = 0 for i = 1, 3000 do x = x + i % " .. (k + 2) ..
               " end return x")
            x = x + f()
         end
         s.send(m.from, { traced = x })
      else
         s.send(m, "pong")
      end
   end
end

-- n round trips to each pid; other messages that arrive meanwhile go into the list `aside`
local function round_trips(pids, n, aside)
   local me = smarm.self()
   for _ = 1, n do
      for _, p in ipairs(pids) do smarm.send(p, me) end
      local got = 0
      while got < #pids do
         local m = smarm.recv(T)
         assert(m ~= nil, "a looper did not answer")
         if m == "pong" then
            got = got + 1
         else
            assert(aside, "an unexpected message: " .. tostring(m))
            aside[#aside + 1] = m
         end
      end
   end
end

-- how many of pids read the shared page
local function sharing(pids)
   for _, p in ipairs(pids) do smarm.send(p, { ask = true, from = smarm.self() }) end
   local n = 0
   for _ = 1, #pids do
      local r = smarm.recv(T)
      assert(type(r) == "table" and r.shared, "a looper did not answer")
      n = n + r.shared
   end
   return n
end

-- The first k of pids wrote their tables (copies of the page now), the others kept the
-- shared page; after 70 more round trips every one of them reads the shared page again.
local function copied_then_shared_again(pids, k)
   local copied, kept = {}, {}
   for i, p in ipairs(pids) do
      if i <= k then copied[#copied + 1] = p else kept[#kept + 1] = p end
   end
   assert.equal(0, sharing(copied))
   assert.equal(#kept, sharing(kept))
   round_trips(pids, 70)
   assert.equal(#pids, sharing(pids))
end

local function start(n)
   local pids = {}
   for i = 1, n do pids[i] = smarm.spawn(looper) end
   return pids
end

local function stop(pids)
   local mons = {}
   for i, p in ipairs(pids) do
      mons[i] = smarm.monitor(p)
      smarm.send(p, "stop")
   end
   for _, m in ipairs(mons) do assert(m:recv(T), "a looper did not stop") end
end

-- the expected sum of the loops in looper's trace branch
local function traced_sum()
   local x = 0
   for k = 1, 20 do
      local y = 0
      for i = 1, 3000 do y = y + i % (k + 2) end
      x = x + y
   end
   return x
end

describe("the shared dispatch page", function()
   it("is mapped into message loops that parked 64 times, one page for all", function()
      local pids = start(8)
      round_trips(pids, 70)
      local total, shared = dispatch_pages()
      print(string.format("\ndispatch page mappings: %d, %d of them the shared page",
         total, shared))
      assert.equal(8, sharing(pids))
      assert.is_true(shared >= 8, "smaps shows only " .. shared .. " shared mappings")
      stop(pids)
   end)

   it("lets a state on it arm a hook, which runs, and run on with its neighbours", function()
      local pids = start(4)
      round_trips(pids, 70)
      smarm.send(pids[1], { hook = true, from = smarm.self() })
      local r = smarm.recv(T)
      assert.is_table(r, "the hooked looper did not answer")
      assert.is_true(r.hooked > 0, "the count hook never ran")
      local x = 0
      for i = 1, 1e5 do x = x + i % 3 end
      assert.equal(x, r.x)
      -- arming the hook copied its page, not the others'; its neighbours and itself still
      -- answer, and it gets the shared page again
      copied_then_shared_again(pids, 1)
      stop(pids)
   end)

   it("keeps the others' tables as they were while one state records traces", function()
      local pids = start(6)
      round_trips(pids, 70)
      local want = traced_sum()
      for k = 1, 3 do
         smarm.send(pids[k], { trace = true, from = smarm.self() })
      end
      -- the other loopers answer while the three compile
      local replies = {}
      round_trips({ pids[4], pids[5], pids[6] }, 200, replies)
      while #replies < 3 do replies[#replies + 1] = smarm.recv(T) end
      for _, r in ipairs(replies) do
         assert.is_table(r, "a tracing looper did not answer")
         assert.equal(want, r.traced)
      end
      -- recording copied the tracing ones' pages, not the others', and the tracing ones get
      -- the shared page again at a later check
      copied_then_shared_again(pids, 3)
      stop(pids)
   end)

   it("works past the region's end, and new loops share the page after", function()
      -- more live states than the region has places (4,096 at most): the rest allocate
      -- their tables as before
      local n = 4200
      local pids = start(n)
      round_trips(pids, 64)
      -- the ones past the region's end have their own tables, and work as well
      local shared = sharing(pids)
      assert.is_true(shared > 0 and shared <= 4096,
         shared .. " of 4,200 states share the page; the region holds 4,096")
      stop(pids)
      -- the region's places are taken again: new loops get them, and the shared page
      pids = start(8)
      round_trips(pids, 70)
      assert.equal(8, sharing(pids))
      stop(pids)
   end)
end)
