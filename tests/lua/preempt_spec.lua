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

-- Loops whose time goes into C functions called from compiled code: a system
-- call through the Lua C API (which the JIT stitches around) or the FFI, a C
-- function doing some microseconds of work, C calls nested under an FFI
-- callback. Each runs rounds of n steps (~0.1 s or more on a VM, where a system
-- call costs 1-2 us) and looks at its inbox only between rounds, so only
-- preemption lets others run meanwhile. Each keeps an LCG beside the C calls
-- and counts what they return, so the result can be checked exactly.
local c_hogs = {
   syscall = function(root, n)
      local s = require "smarm"
      local clock = os.clock
      local x, lcg, rounds = 0, 1, 0
      while true do
         for _ = 1, n do
            if clock() >= 0 then x = x + 1 end
            lcg = (lcg * 1103515245 + 12345) % 2147483648
         end
         rounds = rounds + 1
         if s.recv(0) == "stop" then
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n, want = rounds * n,
                                  info = s.info(s.self()) })
         end
      end
   end,
   dev_zero_read = function(root, n)
      local s = require "smarm"
      local f = assert(io.open("/dev/zero", "rb"))
      local x, lcg, rounds = 0, 1, 0
      while true do
         for _ = 1, n do
            x = x + #f:read(64)
            lcg = (lcg * 1103515245 + 12345) % 2147483648
         end
         rounds = rounds + 1
         if s.recv(0) == "stop" then
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n, want = 64 * rounds * n,
                                  info = s.info(s.self()) })
         end
      end
   end,
   ffi_syscall = function(root, n)
      local s = require "smarm"
      local ffi = require "ffi"
      ffi.cdef "int getpid(void);"
      local C = ffi.C
      local pid = C.getpid()
      local x, lcg, rounds = 0, 1, 0
      while true do
         for _ = 1, n do
            x = x + C.getpid() - pid + 1
            lcg = (lcg * 1103515245 + 12345) % 2147483648
         end
         rounds = rounds + 1
         if s.recv(0) == "stop" then
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n, want = rounds * n,
                                  info = s.info(s.self()) })
         end
      end
   end,
   c_work = function(root, n)
      local s = require "smarm"
      local band = require("bit").band
      local rep, format = string.rep, string.format
      local x, lcg, rounds, want = 0, 1, 0, 0
      while true do
         for i = 1, n do
            x = x + #rep("ab", 1000 + band(i, 255)) + #format("%d:%s", band(i, 7), "abc")
            lcg = (lcg * 1103515245 + 12345) % 2147483648
         end
         rounds = rounds + 1
         for i = 1, n do want = want + 2 * (1000 + band(i, 255)) + 5 end
         if s.recv(0) == "stop" then
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n, want = want,
                                  info = s.info(s.self()) })
         end
      end
   end,
   c_api_work = function(root, n)
      local s = require "smarm"
      local find = string.find
      local subject = ("a"):rep(3000) .. "b"
      local x, lcg, rounds = 0, 1, 0
      while true do
         for _ = 1, n do
            x = x + find(subject, "[b-c]")
            lcg = (lcg * 1103515245 + 12345) % 2147483648
         end
         rounds = rounds + 1
         if s.recv(0) == "stop" then
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n, want = 3001 * rounds * n,
                                  info = s.info(s.self()) })
         end
      end
   end,
   ffi_callback = function(root, n)
      local s = require "smarm"
      local ffi = require "ffi"
      ffi.cdef [[
         int getpid(void);
         void qsort(void *base, size_t nmemb, size_t size,
                    int (*compar)(const void *, const void *));
      ]]
      local C = ffi.C
      local pid = C.getpid()
      local calls = 0
      local cmp = ffi.cast("int (*)(const void *, const void *)", function(a, b)
         calls = calls + C.getpid() - pid + 1
         local x, y = ffi.cast("const int *", a)[0], ffi.cast("const int *", b)[0]
         return x < y and -1 or x > y and 1 or 0
      end)
      local len = 200
      local arr = ffi.new("int[?]", len)
      local x, lcg, rounds = 0, 1, 0
      while true do
         for _ = 1, n do
            for i = 0, len - 1 do
               lcg = (lcg * 1103515245 + 12345) % 2147483648
               arr[i] = lcg % 1000
            end
            C.qsort(arr, len, 4, cmp)
            for i = 1, len - 1 do assert(arr[i - 1] <= arr[i], "qsort left the array unsorted") end
            x = x + arr[0]
         end
         rounds = rounds + 1
         if s.recv(0) == "stop" then
            -- x: the sum of each round's minimum, recomputed from the same LCG below
            return s.send(root, { x = x, lcg = lcg, steps = rounds * n * len, want = nil,
                                  calls = calls, info = s.info(s.self()) })
         end
      end
   end,
}

-- steps of the hogs' LCG, from 1
local function lcg_after(steps)
   local lcg = 1
   for _ = 1, steps do lcg = (lcg * 1103515245 + 12345) % 2147483648 end
   return lcg
end

-- the ffi_callback hog's x: each round's minimum of len LCG draws % 1000, summed
local function callback_want(steps, len)
   local lcg, x = 1, 0
   for _ = 1, steps / len do
      local m = math.huge
      for _ = 1, len do
         lcg = (lcg * 1103515245 + 12345) % 2147483648
         m = math.min(m, lcg % 1000)
      end
      x = x + m
   end
   return x
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

describe("preemption of loops that spend their time in C", function()
   -- steps per round: ~0.1-0.3 s on a VM
   local rounds = { syscall = 1e5, dev_zero_read = 1e5, ffi_syscall = 1e5, c_work = 4e4,
                    c_api_work = 2e4, ffi_callback = 40 }
   for _, kind in ipairs({ "syscall", "dev_zero_read", "ffi_syscall", "c_work", "c_api_work",
                           "ffi_callback" }) do
      it("wakes a 10 ms sleep within 1.5 s while " .. kind .. " hogs fill every scheduler",
         function()
         local hog_pids = {}
         -- one more hog than schedulers, so every scheduler runs one
         for i = 1, 3 do hog_pids[i] = smarm.spawn(c_hogs[kind], smarm.self(), rounds[kind]) end
         smarm.sleep(0.05)
         local worst = 0
         for _ = 1, 20 do
            local t0 = smarm.now()
            smarm.sleep(0.01)
            worst = math.max(worst, smarm.now() - t0)
         end
         for _, pid in ipairs(hog_pids) do smarm.send(pid, "stop") end
         local total, c_return = 0, 0
         for _ = 1, #hog_pids do
            local m = assert(smarm.recv(120), "a hog did not answer")
            assert.are.equal(lcg_after(m.steps), m.lcg)
            assert.are.equal(m.want or callback_want(m.steps, 200), m.x)
            total = total + preemptions(m.info)
            c_return = c_return + m.info.preemptions.c_return
         end
         -- without preemption the sleep never ends (the hogs run until told to stop); the
         -- bound is generous for a loaded 2-core box: the usual worst is 10-60 ms, and
         -- tests/bench/preempt.lua measures the lateness
         assert.is_true(worst < 1.5, ("a 10 ms sleep took %.3f s"):format(worst))
         assert.is_true(total > 0, "the hogs were never preempted")
         print(("\n   %s: worst 10 ms sleep %.1f ms, %d preemptions (%d as C returned)"):format(
            kind, worst * 1e3, total, c_return))
      end)
   end
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
