-- The connection loop of smarm.http settles into compiled traces: after a warm-up, more
-- keep-alive requests start hardly any new traces. A trace stitched at a socket call could chain
-- around the loop and record a new trace at every call, for ever (see smarm.http_conn).
-- Several connections, each its own actor and LuaJIT state: which function compiles first
-- varies from one state to the next, and such a chain started in about one state in three
-- (before the loop ended its traces at the socket calls, this failed in most runs of eight
-- connections; it cannot fail for a chain every time). Every wait is bounded.
local http = require "smarm.http"
local keepalive = require "support.keepalive"

local CONNECTIONS = 8
-- enough for the connection loop to compile (a connection's loops compile after 56
-- iterations), then the requests that must start no trace
local WARM, MEASURED = 2600, 3000

-- A keep-alive client on one connection: get(path) -> body
local function client(port)
   local get_answer, sock = keepalive.client(port, "User-Agent: spec\r\nAccept: */*\r\n")
   local function get(path)
      local status, _, body = get_answer(path)
      assert(status == 200, status)
      return body
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
