--- Selective receive: smarm.recv(match [, timeout [, mark]]) takes the first message in
-- arrival order for which match(msg) is true and leaves the others queued in their order.
-- The scan walks the inbox in place (nothing is re-sent); a message it passes is decoded
-- once and its value kept for the next scan. A mark (M.mark(), made before sending a
-- request) lets the scan for the reply skip everything queued before the request, so a
-- call's reply is found at once however long the queue is.
local raw = require "smarm.selective.raw"

local M = {}

local begin, nxt, take, wait, deadline = raw.begin, raw.next, raw.take, raw.wait, raw.deadline

--- Where a later recv(match, timeout, mark) may begin its scan: after everything queued now.
M.mark = raw.mark

--- Selective receive.
-- @param match function(msg) -> truthy for the message wanted
-- @param timeout seconds (nil: forever; 0: look at what is queued only)
-- @param mark from M.mark(): skip what was queued when it was made
-- @return msg | nil, "timeout"
function M.recv(match, timeout, mark)
   if type(match) ~= "function" then
      error("smarm.recv: match must be a function, got " .. type(match), 2)
   end
   local d = deadline(timeout)
   begin(mark)
   while true do
      local got, v = nxt()
      if got then
         if match(v) then
            take()
            return v
         end
      else
         local ok, err = wait(d)
         if not ok then return nil, err end
      end
   end
end

return M
