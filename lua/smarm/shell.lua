--- The shell's session side: what `smarm-lua` with no file, `-i` and `--shell-socket` run.
-- A session actor talks to a terminal client (runtime/cli/shell_client.c) over a stream
-- socket, gathers lines into chunks, and hands each complete chunk to an evaluator actor
-- (smarm.shell_eval), which runs it and sends back what it prints. Ctrl-C kills the
-- evaluator and a fresh one takes its place; the session, the client's history and the
-- application go on.
--
-- Frames, both ways: a type byte, the payload length in decimal, "\n", the payload.
-- To the client: 'o' output, 'p' a prompt, 'C' completions. From it: 'l' a line, 'i' Ctrl-C
-- ("1": the line being edited had text), 'e' the user left, 'c' a word to complete (Tab).
local smarm = require "smarm"

local M = {}

local BANNER = "smarm-lua shell: help() lists the helpers, Ctrl-D leaves\n"

local function send_frame(sock, t, payload)
   return sock:send(t .. #payload .. "\n" .. payload)
end

--- The next frame from the client: type, payload | nil when the stream ended.
local function read_frame(sock)
   local head = sock:recv("*l")
   if not head then return nil end
   local t, n = head:match("^(%a)(%d+)$")
   if not t then return nil end
   n = tonumber(n)
   local payload = n > 0 and sock:recv(n) or ""
   if not payload then return nil end
   return t, payload
end

--- Whether text is the start of a chunk that needs more lines.
local function incomplete(text)
   if text:sub(1, 1) == "=" then text = "return " .. text:sub(2) end
   if loadstring("return " .. text) then return false end
   local f, err = loadstring(text)
   return not f and err:sub(-7) == "'<eof>'"
end

local function start_evaluator(s)
   local tx, rx = smarm.channel()
   s.tx = tx
   s.ev, s.mon = smarm.spawn_monitor(function(session, chunks)
      require("smarm.shell_eval").run(session, chunks)
   end, smarm.self(), rx)
end

--- Sends a request to the evaluator: its id, which the evaluator's done carries (an answer
-- that comes after its wait gave up must not end a later one).
local function request(s, req)
   s.seq = (s.seq or 0) + 1
   req.seq = s.seq
   s.tx:send(req)
   return s.seq
end

local function out(s, text)
   if not s.closed and not send_frame(s.sock, "o", text) then s.closed = true end
end

--- Runs one chunk in the evaluator and forwards what it prints until it is done, Ctrl-C
-- interrupts it or it dies.
local function evaluate(s, text)
   local seq = request(s, type(text) == "table" and text or { code = text })
   local readable = s.sock:readable()
   while true do
      local i, v = smarm.select({ smarm.inbox, s.mon, readable })
      if i == 1 then
         if type(v) == "table" and v.from == s.ev then
            if v.o then out(s, v.o) end
            if v.done == seq then return end
         end
      elseif i == 2 then
         local why = v and v.reason or "?"
         if v and v.error then why = why .. ": " .. tostring(v.error) end
         out(s, "** the evaluator ended (" .. tostring(why) .. "); a fresh one takes its place\n")
         start_evaluator(s)
         return
      else
         local t = read_frame(s.sock)
         if t == nil or t == "e" then
            smarm.kill(s.ev)
            s.closed = true
            return
         elseif t == "i" then
            smarm.kill(s.ev)
            smarm.demonitor(s.mon)
            out(s, "** interrupted: a fresh evaluator (its locals and globals are gone)\n")
            start_evaluator(s)
            return
         end
      end
   end
end

--- Answers a Tab: the evaluator's names that start with word, one a line ('C' frame).
local function complete(s, word)
   local seq = request(s, { complete = word })
   local names = {}
   local deadline = smarm.now() + 2
   while true do
      local i, v = smarm.select({ smarm.inbox, s.mon }, math.max(0, deadline - smarm.now()))
      if i == 2 then
         out(s, "\n** the evaluator ended; a fresh one takes its place\n")
         start_evaluator(s)
         break
      end
      if i == nil then break end -- busy: no names
      if type(v) == "table" and v.from == s.ev then
         if v.names and v.seq == seq then names = v.names end
         if v.done == seq then break end
      end
   end
   if not send_frame(s.sock, "C", table.concat(names, "\n")) then s.closed = true end
end

--- Serves one client on sock until it leaves or the stream ends.
-- @param sock a stream socket object (the session closes it)
-- @param app (optional) {file = path, args = {...}}: the evaluator runs it first, as
--   `lua -i app.lua` does, so its globals are the shell's
function M.session(sock, app)
   local s = { sock = sock }
   start_evaluator(s)
   out(s, BANNER)
   if app then evaluate(s, app) end
   local lines, warned = {}, false
   while not s.closed do
      if not send_frame(sock, "p", #lines == 0 and "> " or ">> ") then break end
      local t, payload = read_frame(sock)
      while t == "c" do -- Tab: completions, and the same prompt goes on
         complete(s, payload)
         t, payload = read_frame(sock)
      end
      if t == nil or t == "e" then break end
      if t == "i" then
         if #lines > 0 or payload == "1" then
            lines, warned = {}, false
         elseif warned then
            break
         else
            out(s, "(Ctrl-C again or Ctrl-D to leave)\n")
            warned = true
         end
      elseif t == "l" then
         warned = false
         lines[#lines + 1] = payload
         local text = table.concat(lines, "\n")
         if not incomplete(text) then
            lines = {}
            if text:match("%S") then evaluate(s, text) end
         end
      end
   end
   smarm.kill(s.ev)
   sock:close()
end

--- Listens for shells on the Unix socket at path (mode 0600; a path of another user, a
-- symlink or a socket in use is refused); each connection gets a session actor.
-- @return the listener's pid | nil, err
function M.listen(path)
   local raw = require "smarm.net.raw"
   local server, err = raw.listen_unix(path)
   if not server then return nil, err end
   return smarm.spawn(function(srv)
      local sm = require "smarm"
      while true do
         local c = srv:accept()
         if c then
            sm.spawn(function(conn) require("smarm.shell").session(conn) end, c)
         end
      end
   end, server)
end

--- The root of `smarm-lua` in shell modes (see runtime/cli/main.c).
-- @param flags "i" for a local shell, "e" when script is -e's code
-- @param fd the session's end of the socketpair (a local shell)
-- @param script the app to run first ("" for none), or the code of -e
-- @param sockpath --shell-socket's path ("" for none)
function M.boot(flags, fd, script, sockpath, ...)
   local args = { [0] = flags == "" and script or flags == "e" and "-e" or "smarm-lua", ... }
   _G.arg = args
   if sockpath ~= "" then
      local ok, err = M.listen(sockpath)
      if not ok then
         io.stderr:write("smarm-lua: --shell-socket: ", err, "\n")
         io.stderr:flush()
         os.exit(1)
      end
   end
   if flags:find("i", 1, true) then
      local app = script ~= "" and { file = script, args = args } or nil
      return M.session(require("smarm.net.raw").adopt_stream(tonumber(fd)), app)
   end
   local f, err
   if flags:find("e", 1, true) then
      f, err = loadstring(script, "=(command line)")
   else
      f, err = loadfile(script)
   end
   if not f then error(err, 0) end
   if sockpath == "" then return f(...) end
   f(...)
   os.remove(sockpath) -- ours: listen_unix made it
end

return M
