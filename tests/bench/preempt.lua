-- preempt: the root pings a responder actor every 1 ms while 4 hog actors spin,
-- and measures each pong's lateness against the ping's scheduled send time
-- (t0 + k ms), so a late wake-up of the root counts as well as a late pong.
-- KIND picks the hogs' loop: interp (jit.off()), jit (arithmetic loop the JIT
-- compiles), alloc (allocating tables), ffi (calling ffi.C.abs), and loops whose
-- time goes into C called from compiled code: syscall (os.clock, a Lua C API
-- function the JIT stitches around, a system call each), ffi_syscall
-- (ffi.C.getpid from the trace), cwork (string.rep and string.format: LuaJIT's
-- C helpers doing a few microseconds of work per call).
-- Usage: smarm-lua -S 1 preempt.lua KIND [N=500]
--   prints RESULT p50_ms=... p99_ms=... max_ms=...

local kind = arg[1] or "jit"
local pings = math.floor(tonumber(arg[2]) or 500)
local HOGS = 4
local PERIOD = 1e-3

-- Spin in rounds of ~10 ms of KIND work; between rounds, end on "stop".
local function hog(root, hog_kind)
   local smarm = require "smarm"
   local jit = require "jit"
   local ffi = require "ffi"
   local band = require("bit").band
   local recv = smarm.recv
   local x = 1
   local round
   if hog_kind == "interp" or hog_kind == "jit" then
      if hog_kind == "interp" then
         jit.off()
      end
      round = function()
         for _ = 1, 2e6 do
            x = (x * 1103515245 + 12345) % 2147483648
         end
      end
   elseif hog_kind == "alloc" then
      local buf = {}
      round = function()
         for i = 1, 3e5 do
            buf[band(i, 63) + 1] = {i, x}
            x = x + buf[band(i, 63) + 1][1]
         end
      end
   elseif hog_kind == "ffi" then
      ffi.cdef "int abs(int);"
      local C = ffi.C
      round = function()
         for i = 1, 3e6 do
            x = x + C.abs(band(i, 1023) - 512)
         end
      end
   elseif hog_kind == "syscall" then
      local clock = os.clock
      round = function()
         for _ = 1, 5e3 do
            x = x + clock()
         end
      end
   elseif hog_kind == "ffi_syscall" then
      ffi.cdef "int getpid(void);"
      local C = ffi.C
      round = function()
         for _ = 1, 7e3 do
            x = x + C.getpid()
         end
      end
   elseif hog_kind == "cwork" then
      local rep, format = string.rep, string.format
      round = function()
         for i = 1, 2.5e3 do
            x = x + #rep("ab", 1000 + band(i, 255)) + #format("%d:%s:%.3f", i, "abcdef", i / 7)
         end
      end
   else
      error("preempt: unknown hog kind " .. tostring(hog_kind))
   end
   repeat
      round()
   until recv(0) == "stop"
   smarm.send(root, {done = smarm.self(), x = x})
end

-- Echo every ping back to the root; "stop" ends the actor.
local function responder(root)
   local smarm = require "smarm"
   local send, recv = smarm.send, smarm.recv
   while true do
      local m = recv()
      if m == "stop" then
         return
      end
      send(root, m)
   end
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now, send, recv, sleep = smarm.now, smarm.send, smarm.recv, smarm.sleep

local self = smarm.self()
local echo = smarm.spawn(responder, self)
local hogs = {}
for i = 1, HOGS do
   hogs[i] = smarm.spawn(hog, self, kind)
end
sleep(0.05) -- let the hogs start and their loops compile

local lat = {}
local t0 = now()
for k = 1, pings do
   local t_sched = t0 + k * PERIOD
   local wait = t_sched - now()
   if wait > 0 then
      sleep(wait)
   end
   send(echo, {k = k})
   local m = recv()
   assert(type(m) == "table" and m.k == k, "preempt: unexpected reply")
   lat[k] = now() - t_sched
end

local pre, slices = {hook = 0, jit = 0, safe_point = 0, c_return = 0}, 0
for i = 1, HOGS do
   local info = smarm.info(hogs[i])
   if info then
      for key, v in pairs(info.preemptions or {}) do
         pre[key] = (pre[key] or 0) + v
      end
      slices = slices + (info.timeslices or 0)
   end
end
for i = 1, HOGS do
   send(hogs[i], "stop")
end
send(echo, "stop")
for _ = 1, HOGS do
   local m = recv()
   assert(type(m) == "table" and m.done, "preempt: unexpected message while stopping")
end

table.sort(lat)
local function pct(p)
   return lat[math.max(1, math.ceil(p * pings))] * 1e3
end
io.stderr:write(string.format(
   "preempt %s: hog timeslices=%d preemptions hook=%d jit=%d safe_point=%d c_return=%d\n",
   kind, slices, pre.hook, pre.jit, pre.safe_point, pre.c_return))
print(string.format("RESULT p50_ms=%.3f p99_ms=%.3f max_ms=%.3f", pct(0.5), pct(0.99),
                    lat[pings] * 1e3))
