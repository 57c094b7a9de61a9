-- A stand-in for a smarm.net socket, for driving smarm.http's connection loop without a
-- network: recv hands out scripted chunks, send records what was written.
--   script: an array of strings (bytes the peer sends, one recv each) and
--   { sleep = s } entries (the peer is silent for s seconds); after the last entry the
--   peer has closed (or stays silent forever with opts.hang).
local smarm = require "smarm"

local M = {}
M.__index = M

function M.new(script, opts)
   return setmetatable({ script = script, i = 1, pending = "", sent = {}, closed = false,
      options = {}, hang = opts and opts.hang }, M)
end

function M:setoption(k, v)
   self.options[k] = v
   return true
end

function M:send(data)
   if self.closed then return nil, "closed" end
   self.sent[#self.sent + 1] = data
   return true
end

function M:shutdown(how)
   self.shut = how
   return true
end

function M:close()
   self.closed = true
end

-- the next scripted chunk, waiting as told; nil, "timeout" | "closed"
function M:next_chunk(timeout)
   local deadline = smarm.now() + timeout
   while true do
      local e = self.script[self.i]
      if e == nil then
         if self.hang then
            smarm.sleep(math.max(0, deadline - smarm.now()))
            return nil, "timeout"
         end
         return nil, "closed"
      end
      if type(e) == "table" then
         local left = deadline - smarm.now()
         if e.sleep > left then
            smarm.sleep(math.max(left, 0))
            e.sleep = e.sleep - left
            return nil, "timeout"
         end
         smarm.sleep(e.sleep)
         self.i = self.i + 1
      else
         self.i = self.i + 1
         return e
      end
   end
end

function M:recv(pattern, timeout)
   if self.closed then return nil, "closed" end
   timeout = timeout or 1e9
   if pattern == "*r" then
      if #self.pending > 0 then
         local d = self.pending
         self.pending = ""
         return d
      end
      return self:next_chunk(timeout)
   end
   assert(type(pattern) == "number", "fake socket: pattern " .. tostring(pattern))
   local deadline = smarm.now() + timeout
   while #self.pending < pattern do
      local d, err = self:next_chunk(math.max(0, deadline - smarm.now()))
      if not d then
         local partial = self.pending
         self.pending = ""
         return nil, err, partial
      end
      self.pending = self.pending .. d
   end
   local d = self.pending:sub(1, pattern)
   self.pending = self.pending:sub(pattern + 1)
   return d
end

--- Everything sent, as one string.
function M:output()
   return table.concat(self.sent)
end

return M
