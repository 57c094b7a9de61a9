--- A gen_server for the distribution tests: a counter that BEAM and smarm-lua nodes call.
local smarm = require "smarm"

local M = {}

function M.init(n) return n end

function M.handle_call(req, _, n)
   if req == smarm.atom("get") then return "reply", n, n end
   if smarm.is_tuple(req) and req[1] == smarm.atom("add") then
      return "reply", n + req[2], n + req[2]
   end
   if smarm.is_tuple(req) and req[1] == smarm.atom("echo") then return "reply", req[2], n end
   return "reply", smarm.atom("unknown"), n
end

function M.handle_cast(msg, n)
   if smarm.is_tuple(msg) and msg[1] == smarm.atom("add") then return "noreply", n + msg[2] end
   return "noreply", n
end

return M
