-- skynet: the root spawns 10 children, each of them 10 more, down to N leaves
-- (N a power of 10) that send their number to their parent; each parent sums
-- its children's replies and sends the sum up. 1 + 10 + ... + N actors, most
-- of them alive at once (a parent waits in recv for its children).
-- Usage: smarm-lua [-S n] skynet.lua [N=1000000]
--   prints RESULT ms=... us_per_actor=... peak_rss_mb=...

local n = math.floor(tonumber(arg[1]) or 1e6)

-- Actor `num` of a subtree with `size` leaves: a leaf replies with its number,
-- a parent with the sum of its children's replies.
local function node(parent, num, size)
   local smarm = require "smarm"
   if size == 1 then
      smarm.send(parent, num)
      return
   end
   -- a spawned function has no upvalues, so it finds itself to spawn its children
   local self_fn = debug.getinfo(1, "f").func
   local me, spawn, recv = smarm.self(), smarm.spawn, smarm.recv
   local sub = size / 10
   for i = 0, 9 do
      spawn(self_fn, me, num + i * sub, sub)
   end
   local sum = 0
   for _ = 1, 10 do
      sum = sum + recv()
   end
   smarm.send(parent, sum)
end

-- Peak resident set size of this process in bytes, from /proc/self/status.
local function peak_rss()
   local f = assert(io.open("/proc/self/status", "r"))
   local s = f:read("*a")
   f:close()
   return assert(tonumber(s:match("VmHWM:%s*(%d+)")), "no VmHWM") * 1024
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local now = smarm.now or os.clock

local size, actors = 1, 1
while size < n do
   size = size * 10
   actors = actors + size
end
assert(size == n, "skynet: N must be a power of 10")

local t0 = now()
smarm.spawn(node, smarm.self(), 0, n)
local sum = smarm.recv()
local t1 = now()
assert(sum == n * (n - 1) / 2, "skynet: the sum is " .. tostring(sum))

print(string.format("RESULT ms=%.1f us_per_actor=%.3f peak_rss_mb=%.1f", (t1 - t0) * 1e3,
                    (t1 - t0) * 1e6 / actors, peak_rss() / 1048576))
