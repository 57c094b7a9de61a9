-- What the two smarm-lua nodes of dist_pg_test.sh share.
local smarm = require "smarm"

local M = {}

--- The members of group "workers" on other nodes (remote pids are not numbers).
function M.remote_members()
   local t = {}
   for _, p in ipairs(smarm.pg.members("workers")) do
      if type(p) ~= "number" then t[#t + 1] = p end
   end
   return t
end

--- Polls pred for up to secs seconds; whether it held.
function M.poll(pred, secs)
   local deadline = smarm.now() + secs
   while not pred() do
      if smarm.now() > deadline then return false end
      smarm.sleep(0.05)
   end
   return true
end

return M
