-- Preemption: any Lua code, interpreted or JIT-compiled, gives up the CPU after
-- its timeslice while others wait; results stay exact across preemptions.
local smarm = require "smarm"

-- Each hog spins in an inner loop of one kind and looks at its inbox only
-- between long inner loops (~10 ms or more), so only preemption lets others run.
local hogs = {
   interpreted = function()
      local s = require "smarm"
      jit.off()
      local x = 0
      while true do
         for i = 1, 1e6 do x = x + i end
         if s.recv(0) == "stop" then return x end
      end
   end,
   jit_arithmetic = function()
      local s = require "smarm"
      local x = 0
      while true do
         for _ = 1, 2e7 do x = x + 1 end
         if s.recv(0) == "stop" then return x end
      end
   end,
   allocating = function()
      local s = require "smarm"
      local t
      while true do
         for i = 1, 1e6 do t = { i, i + 1 } end
         if s.recv(0) == "stop" then return t end
      end
   end,
   ffi_calling = function()
      local s = require "smarm"
      local ffi = require "ffi"
      ffi.cdef "int abs(int);"
      local C, x = ffi.C, 0
      while true do
         for i = 1, 1e7 do x = x + C.abs(-i) end
         if s.recv(0) == "stop" then return x end
      end
   end,
   c_function_calling = function()
      local s = require "smarm"
      local getenv, x = os.getenv, 0
      while true do
         for _ = 1, 1e5 do x = x + #(getenv("PATH") or "") end
         if s.recv(0) == "stop" then return x end
      end
   end,
}

local function responder()
   local s = require "smarm"
   while true do
      local m = s.recv()
      if m == "stop" then return end
      s.send(m, "pong")
   end
end

local function preemptions(info)
   local p = info.preemptions
   return p.hook + p.jit + p.safe_point + p.c_return
end

describe("preemption", function()
   for _, kind in ipairs({ "interpreted", "jit_arithmetic", "allocating", "ffi_calling",
                          "c_function_calling" }) do
      it("keeps a responder answering while " .. kind .. " hogs fill every scheduler", function()
         local resp = smarm.spawn(responder)
         local hog_pids = {}
         -- one more hog than schedulers, so every scheduler runs one
         for i = 1, 3 do hog_pids[i] = smarm.spawn(hogs[kind]) end
         smarm.sleep(0.05)
         local worst = 0
         for _ = 1, 20 do
            local t0 = smarm.now()
            smarm.send(resp, smarm.self())
            assert.are.equal("pong", smarm.recv(10))
            worst = math.max(worst, smarm.now() - t0)
            smarm.sleep(0.002)
         end
         local total = 0
         for _, pid in ipairs(hog_pids) do
            total = total + preemptions(assert(smarm.info(pid)))
         end
         for _, pid in ipairs(hog_pids) do smarm.send(pid, "stop") end
         smarm.send(resp, "stop")
         -- generous: a hog left unpreempted would hold its scheduler for seconds
         assert.is_true(worst < 1.0, ("worst round trip %.3f s"):format(worst))
         assert.is_true(total > 0, "the hogs were never preempted")
      end)
   end

   it("leaves JIT-compiled results exact across preemptions and migrations", function()
      local function work(parent, kind, n)
         local s = require "smarm"
         local r
         if kind == "lcg" then
            local x = 12345
            for _ = 1, n do x = (x * 1103515245 + 12345) % 2147483648 end
            r = x
         elseif kind == "float" then
            local acc = 0.0
            for i = 1, n do acc = acc + math.sqrt(i) * 0.5 - i * 1e-9 end
            r = acc
         elseif kind == "bits" then
            local bit = require "bit"
            local h = 0
            for i = 1, n do h = bit.bxor(bit.rol(h, 5), i) end
            r = h
         else
            local a, b, c, d = 1.5, 2.25, 3.125, 4.0625
            for _ = 1, n do a, b, c, d = b * 0.5 + c, c - d * 0.25, d + a * 0.125, a - b end
            r = a + b + c + d
         end
         s.send(parent, { kind = kind, r = r, info = s.info(s.self()) })
      end
      local n = 3e7
      local expected = {}
      -- the same functions computed here first, in this actor
      for _, kind in ipairs({ "lcg", "float", "bits", "vector" }) do
         local pid = smarm.spawn(work, smarm.self(), kind, n)
         local m = assert(smarm.recv(120))
         assert.is_number(pid)
         expected[kind] = m.r
      end
      local jobs = 0
      for _ = 1, 2 do
         for _, kind in ipairs({ "lcg", "float", "bits", "vector" }) do
            smarm.spawn(work, smarm.self(), kind, n)
            jobs = jobs + 1
         end
      end
      local preempted, migrated = 0, 0
      for _ = 1, jobs do
         local m = assert(smarm.recv(120))
         assert.are.equal(expected[m.kind], m.r)
         preempted = preempted + preemptions(m.info)
         migrated = migrated + m.info.migrations
      end
      assert.is_true(preempted > 0, "nothing was preempted")
      print(("\n   %d jobs exact after %d preemptions, %d migrations"):format(jobs, preempted,
                                                                             migrated))
   end)
end)

describe("max_heap", function()
   it("stops an actor whose heap would exceed it, and nothing else", function()
      local sib = smarm.spawn(responder)
      local pig = smarm.spawn_opt({ max_heap = 4 * 1024 * 1024 }, function()
         local t = {}
         while true do t[#t + 1] = ("x"):rep(100) .. #t end
      end)
      local info = smarm.info(pig)
      if info then assert.are.equal(4 * 1024 * 1024, info.max_heap) end
      local gone = false
      for _ = 1, 500 do
         if not smarm.info(pig) then gone = true break end
         smarm.sleep(0.01)
      end
      assert.is_true(gone, "the actor over max_heap kept running")
      smarm.send(sib, smarm.self())
      assert.are.equal("pong", smarm.recv(5))
      smarm.send(sib, "stop")
   end)
end)
