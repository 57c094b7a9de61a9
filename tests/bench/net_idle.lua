-- net_idle: N TCP connections over 127.0.0.1, each with an actor parked in sock:recv; the
-- process's CPU time while they idle (one scheduler sleeps in epoll_wait, nothing polls).
-- Usage: smarm-lua net_idle.lua [N=5000] (2 fds per connection: mind ulimit -n)
--   prints RESULT idle_cpu_s=... rss_mb=...

local n = math.floor(tonumber(arg[1]) or 5000)

-- user + system CPU seconds of this process, from /proc/self/stat
local function cpu()
   local f = assert(io.open("/proc/self/stat", "r"))
   local s = f:read("*a")
   f:close()
   local fields = {}
   for w in s:gmatch("%S+") do fields[#fields + 1] = w end
   return (tonumber(fields[14]) + tonumber(fields[15])) / 100
end

local function rss_mb()
   for l in io.lines("/proc/self/status") do
      local kb = l:match("^VmRSS:%s+(%d+)")
      if kb then return math.floor(tonumber(kb) / 1024) end
   end
end

-- Parks in recv until its peer sends a line or closes.
local function conn(sock) sock:recv("*l") end

-- Required below the actor body so it cannot capture them as upvalues.
local smarm = require "smarm"
local net = require "smarm.net"
local srv = assert(net.listen("127.0.0.1", 0, { backlog = 4096 }))
local clients = {}
for i = 1, n do
   clients[i] = assert(net.connect("127.0.0.1", srv:port(), 5))
   smarm.spawn(conn, assert(srv:accept(5)))
end
smarm.sleep(0.5)
local c0, t0 = cpu(), smarm.now()
smarm.sleep(3)
print(string.format("%d idle connections: %.2f s CPU in %.1f s", n, cpu() - c0, smarm.now() - t0))
print(string.format("RESULT idle_cpu_s=%.2f rss_mb=%d", cpu() - c0, rss_mb()))
for i = 1, n do clients[i]:close() end
