-- The handler of examples/http.lua. smarm.http requires this module in each
-- connection's actor and calls handle(req) for every request on that connection.
local cjson = require "cjson"
local smarm = require "smarm"

local M = {}

local TEXT = { ["Content-Type"] = "text/plain" }
local JSON = { ["Content-Type"] = "application/json" }

function M.handle(req)
   if req.path == "/" then
      return 200, TEXT, "hello\n"
   elseif req.path == "/json" then
      if req.method == "GET" then
         return 200, JSON, cjson.encode({
            message = "hello", query = req.query,
            served_by = smarm.pid_tostring(smarm.self()),
         })
      elseif req.method == "POST" then
         -- echo a JSON object back with a count of its keys
         local ok, doc = pcall(cjson.decode, req.body)
         if not ok or type(doc) ~= "table" then
            return 400, JSON, cjson.encode({ error = "a JSON object expected" })
         end
         local keys = 0
         for _ in pairs(doc) do keys = keys + 1 end
         return 200, JSON, cjson.encode({ received = doc, keys = keys })
      end
      return 405, { Allow = "GET, POST" }, ""
   end
   return 404, TEXT, "not found\n"
end

return M
