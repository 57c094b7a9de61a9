--- An echo server for the network specs: listens on an ephemeral 127.0.0.1 port and spawns
-- an actor that echoes lines on the first connection until "bye" or a 30 s silence.
local smarm = require "smarm"
local net = require "smarm.net"

local M = {}

--- Starts the server; returns the port to connect to.
function M.start()
   local srv = assert(net.listen("127.0.0.1", 0))
   local port = srv:port()
   smarm.spawn(function(server)
      local sk = assert(server:accept(30))
      while true do
         local line = sk:recv("*l", 30)
         if not line or line == "bye" then break end
         assert(sk:send(line .. "\n"))
      end
      sk:close()
   end, srv)
   return port
end

return M
