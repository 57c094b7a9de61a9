-- echo: TCP echo over 127.0.0.1. A server actor accepts C connections and gives each an
-- actor that sends back what it reads; C client actors each make R round trips of a
-- 64-byte message. Prints the wall time per round trip over all clients.
-- Usage: smarm-lua echo.lua [C=16] [R=20000]   prints RESULT ns_per_round_trip=...

local clients = math.floor(tonumber(arg[1]) or 16)
local rounds = math.floor(tonumber(arg[2]) or 20000)

local function acceptor(server, n)
   local smarm = require "smarm"
   -- an echoer sends back whatever arrives until the peer closes
   local function echoer(sock)
      sock:setoption("nodelay", true)
      while true do
         local data = sock:recv("*r")
         if not data or not sock:send(data) then break end
      end
      sock:close()
   end
   for _ = 1, n do
      local sock = assert(server:accept(30))
      smarm.spawn(echoer, sock)
   end
end

local function client(parent, port, r)
   local smarm = require "smarm"
   local net = require "smarm.net"
   local sock = assert(net.connect("127.0.0.1", port, 10))
   sock:setoption("nodelay", true)
   local msg = ("x"):rep(64)
   smarm.send(parent, "ready")
   smarm.recv()
   for _ = 1, r do
      assert(sock:send(msg))
      assert(sock:recv(64) == msg)
   end
   sock:close()
   smarm.send(parent, "done")
end

-- Required below the actor bodies so none of them can capture it as an upvalue.
local smarm = require "smarm"
local net = require "smarm.net"

local server = assert(net.listen("127.0.0.1", 0))
local port = server:port()
smarm.spawn(acceptor, server, clients)
local pids = {}
for i = 1, clients do pids[i] = smarm.spawn(client, smarm.self(), port, rounds) end
for _ = 1, clients do assert(smarm.recv(30) == "ready") end
local t0 = smarm.now()
for _, pid in ipairs(pids) do smarm.send(pid, "go") end
for _ = 1, clients do assert(smarm.recv(300) == "done") end
local elapsed = smarm.now() - t0
print(("RESULT ns_per_round_trip=%.1f"):format(elapsed * 1e9 / (clients * rounds)))
