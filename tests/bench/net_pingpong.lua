-- net_pingpong: one client actor and one echo actor exchanging N lines over a TCP
-- connection on 127.0.0.1; every exchange parks both actors and wakes them through the
-- network poller.
-- Usage: smarm-lua [-S k] net_pingpong.lua [N=20000]   prints RESULT us_per_round_trip=...

local n = math.floor(tonumber(arg[1]) or 20000)

-- Echoes lines until the peer closes.
local function echo(sock)
   while true do
      local l = sock:recv("*l")
      if not l then return end
      sock:send(l .. "\n")
   end
end

-- Required below the actor body so it cannot capture them as upvalues.
local smarm = require "smarm"
local net = require "smarm.net"
local srv = assert(net.listen("127.0.0.1", 0))
local c = assert(net.connect("127.0.0.1", srv:port(), 5))
smarm.spawn(echo, assert(srv:accept(5)))
local t0 = smarm.now()
for _ = 1, n do
   assert(c:send("ping\n"))
   assert(c:recv("*l") == "ping")
end
local dt = smarm.now() - t0
print(string.format("%d round trips in %.2f s", n, dt))
print(string.format("RESULT us_per_round_trip=%.1f", dt / n * 1e6))
c:close()
