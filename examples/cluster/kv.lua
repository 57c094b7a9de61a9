--- A key-value store as a gen_server, callable from Erlang/Elixir nodes and from other
-- smarm-lua nodes alike: {put, K, V} -> ok, {get, K} -> V | undefined, keys -> [K],
-- cast {delete, K}. Keys and values are whatever the caller sends (atoms are smarm.atom
-- values, binaries are strings).
local smarm = require "smarm"
local A = smarm.atom

local M = {}

function M.init() return { data = {}, n = 0 } end

function M.handle_call(req, _, s)
   if smarm.is_tuple(req) and req[1] == A("put") then
      if s.data[req[2]] == nil then s.n = s.n + 1 end
      s.data[req[2]] = req[3]
      return "reply", A("ok"), s
   elseif smarm.is_tuple(req) and req[1] == A("get") then
      local v = s.data[req[2]]
      if v == nil then v = A("undefined") end
      return "reply", v, s
   elseif req == A("keys") then
      local keys = {}
      for k in pairs(s.data) do keys[#keys + 1] = k end
      return "reply", keys, s
   end
   return "reply", smarm.tuple(A("error"), A("unknown_request")), s
end

function M.handle_cast(msg, s)
   if smarm.is_tuple(msg) and msg[1] == A("delete") and s.data[msg[2]] ~= nil then
      s.data[msg[2]] = nil
      s.n = s.n - 1
   end
   return "noreply", s
end

function M.handle_info(msg, s)
   -- a plain message {From, ping} gets {pong, Node}
   if smarm.is_tuple(msg) and msg[2] == A("ping") then
      smarm.send(msg[1], smarm.tuple(A("pong"), A(smarm.node())))
   end
   return "noreply", s
end

return M
