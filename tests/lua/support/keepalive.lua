-- A keep-alive HTTP client on one connection, for specs that ask a server many times:
-- client(port [, headers]) -> get, sock; get(path) -> status, headers, body of the next
-- answer. Every wait is bounded (5 s).
local net = require "smarm.net"
local parse = require "smarm.http_parse"

local M = {}

function M.client(port, headers)
   local sock = assert(net.connect("127.0.0.1", port, 5))
   local buf = ""
   local extra = headers or ""
   local function get(path)
      assert(sock:send("GET " .. path .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n" .. extra .. "\r\n", 5))
      while true do
         local r, next = parse.response_head(buf, 1, 65536)
         if r and #buf - next + 1 >= r.length then
            local body = buf:sub(next, next + r.length - 1)
            buf = buf:sub(next + r.length)
            return r.status, r.headers, body
         end
         buf = buf .. assert(sock:recv("*r", 5))
      end
   end
   return get, sock
end

return M
