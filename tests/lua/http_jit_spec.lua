-- The connection loop of smarm.http settles into compiled traces: after a warm-up, more
-- keep-alive requests start hardly any new traces. A trace stitched at a socket call could chain
-- around the loop and record a new trace at every call, for ever (see smarm.http_conn).
-- Several connections, each its own actor and LuaJIT state: which function compiles first
-- varies from one state to the next, and such a chain started in about one state in three
-- (before the loop ended its traces at the socket calls, this failed in most runs of eight
-- connections; it cannot fail for a chain every time). Every wait is bounded.
local net = require "smarm.net"
local http = require "smarm.http"
local parse = require "smarm.http_parse"

local CONNECTIONS = 8
-- enough for the connection loop to compile (a connection's loops compile after 56
-- iterations), then the requests that must start no trace
local WARM, MEASURED = 2600, 3000

-- A keep-alive client on one connection: get(path) -> body
local function client(port)
   local sock = assert(net.connect("127.0.0.1", port, 5))
   local buf = ""
   local function get(path)
      assert(sock:send("GET " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: spec\r\n" ..
         "Accept: */*\r\n\r\n", 5))
      while true do
         local r, next = parse.response_head(buf, 1, 65536)
         if r and #buf - next + 1 >= r.length then
            local body = buf:sub(next, next + r.length - 1)
            buf = buf:sub(next + r.length)
            assert(r.status == 200, r.status)
            return body
         end
         buf = buf .. assert(sock:recv("*r", 5))
      end
   end
   return get, sock
end

describe("smarm.http connection loop under the JIT", function()
   it("starts hardly any new traces once warm", function()
      local server = assert(http.serve({ port = 0, handler = "support.http_traces" }))
      local gets, socks = {}, {}
      for i = 1, CONNECTIONS do gets[i], socks[i] = client(server:port()) end
      -- in lock step, as a load generator's connections go
      for _ = 1, WARM do
         for i = 1, CONNECTIONS do assert.are.equal("hello\n", gets[i]("/")) end
      end
      local before = {}
      for i = 1, CONNECTIONS do before[i] = tonumber(gets[i]("/traces")) end
      for _ = 1, MEASURED do
         for i = 1, CONNECTIONS do gets[i]("/") end
      end
      for i = 1, CONNECTIONS do
         local after = tonumber(gets[i]("/traces"))
         -- (a few may still come: the loop's own trace if it compiles late, side traces
         -- of exits taken for the first time; a chain would start several per request)
         assert(after - before[i] <= 30, string.format(
            "connection %d: %d traces started during %d warm requests (%d before)", i,
            after - before[i], MEASURED, before[i]))
         socks[i]:close()
      end
      server:close()
   end)
   it("compiles a connection's loop at LuaJIT's pace (56 passes, not the runtime's 2000)",
      function()
         -- a keep-alive connection is a hot loop: its state compiles loops after 56 passes
         local server = assert(http.serve({ port = 0, handler = "support.http_traces" }))
         local get, sock = client(server:port())
         for _ = 1, 300 do assert.are.equal("hello\n", get("/")) end
         local started = tonumber(get("/traces"))
         assert(started > 0, "no trace started during 300 keep-alive requests")
         sock:close()
         server:close()
      end)
end)
