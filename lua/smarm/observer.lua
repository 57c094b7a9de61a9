--- smarm.observer: the actor behind `smarm-lua --observer [HOST:]PORT app.lua`.
--
-- It serves the observer page and its JSON with smarm.http (handler smarm.observer_http),
-- samples each scheduler's busy time once a second for the utilisation chart (the last
-- minute is kept), and holds the token a kill request must carry. It registers as
-- "smarm_observer"; the connection actors ask it for the history and the token.
local smarm = require "smarm"

local M = {}

M.NAME = "smarm_observer"
M.HISTORY = 60 -- samples kept, one a second

-- A token nobody can guess: 16 random bytes as hex.
local function new_token()
   local f = io.open("/dev/urandom", "rb")
   local bytes = f and f:read(16)
   if f then f:close() end
   if not bytes or #bytes < 16 then
      error("smarm.observer: cannot read /dev/urandom for the kill token")
   end
   return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

--- "[HOST:]PORT" -> host, port | nil, err
function M.parse_address(addr)
   if type(addr) ~= "string" then return nil, "[HOST:]PORT expected" end
   local host, port = addr:match("^%[(.+)%]:(%d+)$")
   if not host then host, port = addr:match("^(.+):(%d+)$") end
   if not host then host, port = "127.0.0.1", addr:match("^(%d+)$") end
   port = tonumber(port)
   if not port or port > 65535 then
      return nil, "bad observer address " .. addr .. " ([HOST:]PORT expected)"
   end
   return host, port
end

-- Busy ns of each scheduler now.
local function busy_now(C, n)
   local t = {}
   for i = 0, n - 1 do t[i + 1] = tonumber(C.smarm_ffi_sched_busy_ns(i)) end
   return t
end

--- Runs the observer: serves addr until the run ends (the root-exit sweep stops it).
function M.main(addr)
   local host, port = M.parse_address(addr)
   if not host then
      io.stderr:write("smarm observer: ", port, "\n")
      return
   end
   smarm.register(M.NAME)
   local http = require "smarm.http"
   local server, err = http.serve({ host = host, port = port, handler = "smarm.observer_http" })
   if not server then
      io.stderr:write(("smarm observer: cannot listen on %s: %s\n"):format(addr, tostring(err)))
      return
   end
   local token = new_token()
   local shown = host:find(":", 1, true) and "[" .. host .. "]" or host
   io.stderr:write(("smarm observer: http://%s:%d/  kill token: %s\n"):format(shown,
      server:port(), token))
   io.stderr:flush()
   local ffi = require "ffi"
   local C = require "smarm.ffi"
   local stats = ffi.new("smarm_runtime_stats")
   C.smarm_ffi_runtime_stats(stats)
   local nsched = stats.schedulers
   local history = {} -- per scheduler: array of utilisation (0..1), oldest first
   for i = 1, nsched do history[i] = {} end
   local last, last_t = busy_now(C, nsched), smarm.now()
   local next_sample = last_t + 1
   while true do
      local m = smarm.recv(math.max(0, next_sample - smarm.now()))
      if type(m) == "table" and m.observer then
         m.observer:send({ token = token, history = history, pid = smarm.self(),
            acceptor = server.pid, interval = 1 })
      end
      local now = smarm.now()
      if now >= next_sample then
         local busy = busy_now(C, nsched)
         local dt = (now - last_t) * 1e9
         for i = 1, nsched do
            local h = history[i]
            h[#h + 1] = math.min(1, math.max(0, (busy[i] - last[i]) / dt))
            if #h > M.HISTORY then table.remove(h, 1) end
         end
         last, last_t = busy, now
         next_sample = now + 1
      end
   end
end

--- The observer's state, from a connection actor: {token, history, pid} | nil, err
function M.state(timeout)
   local tx, rx = smarm.channel()
   local ok, err = smarm.send(M.NAME, { observer = tx })
   tx:release()
   if not ok then return nil, err end
   return rx:recv(timeout or 2)
end

return M
