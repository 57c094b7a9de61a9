-- chat: a TCP line chat. Each client gets an actor; a room is a process group
-- (smarm.pg), and a line a client sends goes to every other member of its room.
-- Commands: /nick NAME, /join ROOM, /who, /quit. A client that stops reading is
-- dropped once a send to it has waited send_timeout seconds (or its backlog of
-- undelivered lines grows past 20000), so it never stalls the room.
-- Usage: smarm-lua examples/chat.lua [port [send_timeout]]   (defaults 7000, 5; port 0
-- picks a free one). Try it with `nc 127.0.0.1 7000` in two terminals.

-- One client's actor: reads its socket and its inbox (lines from the room) in turn.
local function client(sock, id, send_timeout)
   local smarm = require "smarm"
   local pg = smarm.pg
   local nick, room = "guest" .. id, "lobby"
   local MAX_LINE, MAX_BACKLOG = 4096, 20000

   local function say(text)
      local line = ("%s: %s\n"):format(nick, text)
      for _, pid in ipairs(pg.members("chat:" .. room)) do
         if pid ~= smarm.self() then smarm.send(pid, { line = line }) end
      end
   end

   local function bye(why)
      say("* left (" .. why .. ")")
      print(("chat: %s %s"):format(nick, why))
      io.stdout:flush()
      sock:close()
   end

   sock:setoption("nodelay", true)
   pg.join("chat:" .. room)
   if not sock:send(("* welcome %s, you are in %s\n"):format(nick, room), send_timeout) then
      return sock:close()
   end
   say("* joined")
   local buf = ""
   local arms = { sock:readable(), smarm.inbox }
   while true do
      local i, m = smarm.select(arms)
      if i == 1 then
         local data, err = sock:recv("*r", 0)
         if not data and err ~= "timeout" then return bye("disconnected") end
         buf = buf .. (data or "")
         while true do
            local line, rest = buf:match("^([^\n]*)\n(.*)$")
            if not line then break end
            buf = rest
            line = line:gsub("\r$", "")
            local cmd, argument = line:match("^/(%a+)%s*(.-)%s*$")
            if cmd == "quit" then
               return bye("quit")
            elseif cmd == "nick" and argument:match("^[%w_-]+$") then
               say("* is now " .. argument)
               nick = argument
            elseif cmd == "join" and argument:match("^[%w_-]+$") then
               say("* left for " .. argument)
               pg.leave("chat:" .. room)
               room = argument
               pg.join("chat:" .. room)
               say("* joined")
            elseif cmd == "who" then
               local n = #pg.members("chat:" .. room)
               smarm.send(smarm.self(), { line = ("* %d in %s\n"):format(n, room) })
            elseif line ~= "" then
               say(line)
            end
         end
         if #buf > MAX_LINE then return bye("sent a line too long") end
      else
         -- lines for this client: send what is queued in one write
         local out = { m.line }
         while #out < 256 do
            local more = smarm.recv(0)
            if not more then break end
            out[#out + 1] = more.line
         end
         local info = smarm.info(smarm.self())
         if info.mailbox > MAX_BACKLOG then return bye("dropped (backlog)") end
         local ok = sock:send(table.concat(out), send_timeout)
         if not ok then return bye("dropped (not reading)") end
      end
   end
end

local smarm = require "smarm"
local net = require "smarm.net"

local port = tonumber(arg[1] or "7000")
local send_timeout = tonumber(arg[2] or "5")
if not port or port % 1 ~= 0 or port < 0 or port > 65535 then
   error("port must be an integer from 0 to 65535, got " .. tostring(arg[1]), 0)
end
if not send_timeout or send_timeout <= 0 then
   error("send_timeout must be a positive number of seconds, got " .. tostring(arg[2]), 0)
end

local server = assert(net.listen("127.0.0.1", port))
print(("chat: listening on 127.0.0.1:%d"):format(server:port()))
io.stdout:flush()
local n = 0
while true do
   local sock = server:accept()
   if sock then
      n = n + 1
      -- the socket moves to the client's actor
      smarm.spawn(client, sock, n, send_timeout)
   end
end
