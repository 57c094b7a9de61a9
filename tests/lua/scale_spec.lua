-- Many actors: live at once, spawned in sequence, and crashes that stay contained.
local smarm = require "smarm"

local function rss_kb()
   local f = assert(io.open("/proc/self/status"))
   local s = f:read("*a")
   f:close()
   return tonumber(s:match("VmRSS:%s*(%d+)"))
end

describe("scale", function()
   it("holds 10,000 live actors at once, each answering", function()
      local N = 10000
      local pids = {}
      for i = 1, N do
         pids[i] = smarm.spawn(function(id)
            local s = require "smarm"
            local m = s.recv()
            s.send(m.reply_to, { id = id, echo = m.n })
         end, i)
      end
      local me = smarm.self()
      for i = 1, N do
         assert.is_true(smarm.send(pids[i], { reply_to = me, n = i * 2 }))
      end
      local seen, count = {}, 0
      for _ = 1, N do
         local m = assert(smarm.recv(30))
         assert.are.equal(m.id * 2, m.echo)
         assert.is_nil(seen[m.id])
         seen[m.id] = true
         count = count + 1
      end
      assert.are.equal(N, count)
   end)

   it("spawns 100,000 actors in sequence with resident memory returning near its start", function()
      -- a sanitizer's allocator keeps freed memory in quarantine: RSS says nothing there
      if os.getenv("SMARM_TEST_SANITIZER") then
         pending("RSS is not measured under " .. os.getenv("SMARM_TEST_SANITIZER"))
         return
      end
      local function wave(n)
         for i = 1, n do
            smarm.spawn(function(parent, k)
               require("smarm").send(parent, k)
            end, smarm.self(), i)
            assert.are.equal(i, smarm.recv(30))
         end
      end
      wave(2000) -- warm the allocator and the stack pool
      collectgarbage()
      local before = rss_kb()
      wave(100000)
      collectgarbage()
      local after = rss_kb()
      -- generous: a leak of even 100 bytes per actor would exceed it
      assert.is_true(after - before < 8192, ("RSS grew from %d to %d KiB"):format(before, after))
   end)

   it("sums a tree of 111,111 actors, 10 children per parent down to 100,000 leaves", function()
      -- each parent waits in recv for its 10 children while they run: most of the tree
      -- is alive at once
      local function node(parent, num, size)
         local s = require "smarm"
         if size == 1 then
            s.send(parent, num)
            return
         end
         local self_fn = debug.getinfo(1, "f").func
         local me, sub = s.self(), size / 10
         for i = 0, 9 do
            s.spawn(self_fn, me, num + i * sub, sub)
         end
         -- no timeout here (111,111 armed wakes would linger in the timer heap for later
         -- specs); the root's recv below bounds the test
         local sum = 0
         for _ = 1, 10 do
            sum = sum + s.recv()
         end
         s.send(parent, sum)
      end
      local n = 100000
      smarm.spawn(node, smarm.self(), 0, n)
      assert.are.equal(n * (n - 1) / 2, smarm.recv(120))
   end)

   it("keeps a crash in one actor from disturbing its siblings", function()
      local me = smarm.self()
      local sib = smarm.spawn(function(parent)
         local s = require "smarm"
         while true do
            local m = s.recv()
            if m == "stop" then return end
            s.send(parent, m * 2)
         end
      end, me)
      smarm.spawn(function()
         error("deliberate crash")
      end)
      smarm.spawn(function()
         local t = nil
         return t.field -- a runtime error
      end)
      for i = 1, 100 do
         smarm.send(sib, i)
         assert.are.equal(i * 2, smarm.recv(5))
      end
      smarm.send(sib, "stop")
   end)
end)
