--- Helpers for recv_gc_spec's actors: garbage whose __gc finalizers raise, and the
-- receive each of its cases takes messages with.
local smarm = require "smarm"

local M = {}

--- Leaves n unreachable proxies whose finalizers raise "finalizer raised".
function M.litter(n)
   for _ = 1, n do
      local p = newproxy(true)
      getmetatable(p).__gc = function() error("finalizer raised") end
   end
end

--- A function that takes the next message within timeout seconds, how: "inbox"
-- (smarm.recv), "channel" (rx:recv) or "select" (smarm.select over { rx, inbox }). It
-- returns the message, or nil and why (as recv does); it allocates nothing itself.
function M.taker(how, rx, timeout)
   if how == "inbox" then
      return function() return smarm.recv(timeout) end
   elseif how == "channel" then
      return function() return rx:recv(timeout) end
   end
   local arms = { rx, smarm.inbox } -- made once: a table made in take could run a finalizer
   return function()
      local i, v = smarm.select(arms, timeout)
      if i then return v end
      return nil, v
   end
end

return M
