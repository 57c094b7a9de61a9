-- Helpers the specs share for reading the calling actor's inbox, each bounded in time.
local smarm = require "smarm"

local M = {}

--- The next table message carrying field key (others are dropped), or nil after timeout
-- seconds (default 5).
function M.first(key, timeout)
   local deadline = smarm.now() + (timeout or 5)
   while true do
      local m = smarm.recv(math.max(0, deadline - smarm.now()))
      if m == nil then return nil end
      if type(m) == "table" and m[key] ~= nil then return m end
   end
end

--- Like first, but an error if none came.
function M.expect(key, timeout)
   return M.first(key, timeout) or error("no message with " .. key, 2)
end

--- Asserts that no message with field key arrives within s seconds.
function M.none(key, s)
   local deadline = smarm.now() + s
   while smarm.now() < deadline do
      local m = smarm.recv(deadline - smarm.now())
      if type(m) == "table" and m[key] ~= nil then
         error("unexpected message with " .. key .. ": " .. tostring(m[key]), 2)
      end
   end
end

--- Drops every message already in the inbox (nil and false ones included).
function M.drain()
   while select(2, smarm.recv(0)) ~= "timeout" do end
end

--- Waits (up to 5 s) until pid is gone; true if it went.
function M.wait_dead(pid)
   for _ = 1, 1000 do
      if not smarm.info(pid) then return true end
      smarm.sleep(0.005)
   end
   return false
end

return M
