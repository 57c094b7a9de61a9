-- A handler for http_jit_spec: "hello" on every path but /traces, which answers how many
-- traces LuaJIT has started in this connection actor's state since the module loaded.
local jit = require "jit"

local started = 0
jit.attach(function(what)
   if what == "start" then started = started + 1 end
end, "trace")

local M = {}
local HEADERS = { ["Content-Type"] = "text/plain" }

function M.handle(req)
   if req.path == "/traces" then return 200, nil, tostring(started) end
   return 200, HEADERS, "hello\n"
end

return M
