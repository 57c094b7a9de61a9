-- The handler the smarm.http specs serve: a route per behaviour under test.
local smarm = require "smarm"

local M = {}

local routes = {}

routes["/hello"] = function()
   return 200, { ["Content-Type"] = "text/plain" }, "hello\n"
end

-- the request as the handler saw it: method, path, query, version, body, a header
routes["/echo"] = function(req)
   local h = req.headers
   return 200, { ["X-Method"] = req.method, ["X-Query"] = req.query,
      ["X-Version"] = tostring(req.version), ["X-Test"] = h["x-test"] or "-" }, req.body
end

routes["/boom"] = function()
   error("handler blew up")
end

routes["/badstatus"] = function()
   return "two hundred", {}, "x"
end

routes["/close"] = function()
   return 200, { Connection = "close" }, "bye"
end

routes["/slow"] = function(req)
   smarm.sleep(tonumber(req.query:match("s=([%d.]+)")) or 0.1)
   return 200, nil, "slow"
end

-- holds the connection open until told (a connection the 503 test keeps busy)
routes["/hold"] = function()
   smarm.sleep(2)
   return 200, nil, "held"
end

-- the connection actor's pid, as a number
routes["/pid"] = function()
   return 200, nil, tostring(smarm.self())
end

-- more than the loopback's socket buffers hold: its sending waits for a client that reads
local BIG = 32 * 1024 * 1024
routes["/big"] = function()
   return 200, nil, string.rep("x", BIG)
end

routes["/nocontent"] = function()
   return 204, nil, nil
end

function M.handle(req)
   local route = routes[req.path]
   if not route then return 404, { ["Content-Type"] = "text/plain" }, "no route " .. req.path end
   return route(req)
end

return M
