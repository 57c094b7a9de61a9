--- gen: what gen_server and gen_statem share (Erlang/OTP's gen module): starting a
-- server in a new actor, the client side of the call/cast/stop protocol, and the
-- per-actor plumbing of a running server (its name, start report, trap channel and
-- the actor that started it). Neither behaviour reaches into the other: both use this,
-- and the supervisor its error helpers (blame, is_reply_handle).
--
-- Wire protocol: a call is {smarm = "call", req = r, from = tx}, a cast
-- {smarm = "cast", msg = m}, a stop {smarm = "stop", reason = r}, a code change
-- {smarm = "code_change", req = {old_vsn = v, extra = e}, from = tx}; the reply travels
-- on the per-call channel as {value}. Anything else in the inbox, a message of this
-- shape with a field missing or of the wrong type included, is an info message.
local smarm = require "smarm"
local proc = require "smarm.proc"

local M = {}

--- Default seconds a call waits for its reply, and a start for init.
M.DEFAULT_TIMEOUT = 5

-- ---------------------------------------------------------------------------------------
-- Client side. The functions taking fname are tail-called by the behaviours' public
-- functions, so error level 2 here (3 in a helper) blames the user's call.

-- nil (use the default), "infinity" or math.huge (forever), or seconds >= 0.
local function check_timeout(timeout, default, fname)
   if timeout == nil then return default end
   if timeout == "infinity" or timeout == math.huge then return nil end
   if type(timeout) ~= "number" or timeout ~= timeout or timeout < 0 then
      error(fname .. ": bad timeout (seconds, \"infinity\" or nil expected, got "
         .. tostring(timeout) .. ")", 3)
   end
   return timeout
end

--- The message of an error a smarm function raised on a caller's behalf, as fname's: its
-- own prefix dropped, a bad pid called by the caller's name for it (dest, default
-- "dest"), and the library's wrapping (path) of the caller's value renamed to name,
-- e.g. "cannot send a function (at msg.req.f)" -> "(at request.f)".
function M.blame(fname, err, path, name, dest)
   err = tostring(err):gsub("^[%w_.:]+: ", "", 1)
   err = err:gsub("^bad pid ", "bad " .. (dest or "dest") .. " ", 1)
   local i, j
   if path then i, j = err:find("(at " .. path, 1, true) end
   if i then err = err:sub(1, i + 3) .. name .. err:sub(j + 1) end
   return fname .. ": " .. err
end
local blame = M.blame

-- The pid behind dest (a pid or a registered name), or nil if nobody holds the name.
local function resolve(dest, fname)
   local t = type(dest)
   if t == "number" then return dest end
   if t == "string" then return smarm.whereis(dest) end
   error(fname .. ": bad dest (a pid or a name expected, got " .. t .. ")", 3)
end

--- Sends a request (tag: "call" or "code_change") and waits for the reply.
-- @return the reply | nil, "timeout" | "server_down" | "noproc"
function M.call(dest, request, timeout, fname, tag)
   local wait = check_timeout(timeout, M.DEFAULT_TIMEOUT, fname)
   if type(dest) == "table" or type(dest) == "userdata" then
      -- another node's server: {name, node} or a remote pid
      local dist = require "smarm.dist"
      if dist.is_dest(dest) then return dist.gen_call(dest, request, wait) end
   end
   local pid = resolve(dest, fname)
   if not pid then return nil, "noproc" end
   if pid == smarm.self() then error(fname .. ": a server cannot call itself", 2) end
   local tx, rx = smarm.channel()
   local ok, sent = pcall(smarm.send, pid, { smarm = tag or "call", req = request, from = tx })
   if not ok then error(blame(fname, sent, "msg.req", "request"), 2) end
   if not sent then return nil, "noproc" end
   -- From here on only the request's copy of tx keeps the channel open: when the server
   -- dies its state is closed, that copy goes, and rx says "closed" (no monitor needed).
   tx:release()
   local t0 = smarm.now()
   local v, err = rx:recv(wait)
   if v then return v[1] end
   if err == "timeout" then
      -- dropping rx discards the late reply (it lands in a channel nobody reads)
      return nil, "timeout"
   end
   -- "closed": the server died, or it is alive and dropped the reply handle (then no reply
   -- can come and the call times out, as in OTP). A monitor tells which.
   local left = wait and math.max(0, wait - (smarm.now() - t0))
   local mon = smarm.monitor(pid)
   local down = mon:recv(left)
   smarm.demonitor(mon)
   if down then return nil, "server_down" end
   return nil, "timeout"
end

--- Sends a cast without waiting.
-- @return true | nil, "noproc"
function M.cast(dest, msg, fname)
   if type(dest) == "table" or type(dest) == "userdata" then
      local dist = require "smarm.dist"
      if dist.is_dest(dest) then return dist.gen_cast(dest, msg) end
   end
   local pid = resolve(dest, fname)
   if not pid then return nil, "noproc" end
   local ok, sent = pcall(smarm.send, pid, { smarm = "cast", msg = msg })
   if not ok then error(blame(fname, sent, "msg.msg", "msg"), 2) end
   if sent then return true end
   return nil, "noproc"
end

--- Answers a call through its reply handle (from any actor).
-- @return true | nil, "closed" (the caller has given up)
function M.reply(from, value, fname)
   if not M.is_reply_handle(from) then
      error(fname .. ": bad from (the reply handle expected, got " .. type(from) .. ")", 2)
   end
   local ok, sent, why = pcall(from.send, from, { value })
   if not ok then error(blame(fname, sent, "msg[1]", "value"), 2) end
   return sent, why
end

--- Asks a server to stop with reason and waits until it has ended.
-- @return true | nil, "noproc" | "timeout"
function M.stop(dest, reason, timeout, fname)
   local wait = check_timeout(timeout, nil, fname)
   local pid = resolve(dest, fname)
   if not pid then return nil, "noproc" end
   local ok, mon = pcall(smarm.monitor, pid)
   if not ok then error(blame(fname, mon), 2) end
   local sent
   ok, sent = pcall(smarm.send, pid, { smarm = "stop", reason = reason == nil and "normal"
      or reason })
   if not ok or not sent then smarm.demonitor(mon) end
   if not ok then error(blame(fname, sent, "msg.reason", "reason"), 2) end
   if not sent then return nil, "noproc" end
   local down = mon:recv(wait)
   if not down then
      smarm.demonitor(mon)
      return nil, "timeout"
   end
   if down.reason == "noproc" then return nil, "noproc" end
   return true
end

-- The body of a started server's actor: the start handshake, then the behaviour's run.
local function start_main(ack, starter, link, behaviour, module, args, opts)
   local p = require "smarm.proc"
   p.ack_to, p.parent, p.link = ack, starter, link
   return require(behaviour).run(module, args, opts)
end

--- Starts behaviour's server for module in a new actor and waits until its init returned.
-- @param behaviour the behaviour module's name; its run(module, args, opts) is the server
-- @param link link the server to the caller once init succeeded
-- @return pid | nil, reason
function M.start(behaviour, module, args, opts, link, fname)
   if type(module) ~= "string" then
      error(fname .. ": bad module (a module name expected, got " .. type(module) .. ")", 2)
   end
   opts = opts or {}
   if type(opts) ~= "table" then
      error(fname .. ": bad opts (a table expected, got " .. type(opts) .. ")", 2)
   end
   if opts.name ~= nil and type(opts.name) ~= "string" then
      error(fname .. ": bad opts.name (a string expected, got " .. type(opts.name) .. ")", 2)
   end
   local wait = check_timeout(opts.timeout, M.DEFAULT_TIMEOUT, fname)
   local pid, why = proc.start({}, wait, start_main, smarm.self(),
      (link or opts.link) and true or false, behaviour, module, args,
      { name = opts.name, trap_exit = opts.trap_exit and true or false })
   -- start_main's arguments: args is the sixth
   if pid == false then error(blame(fname, why, "arg 6", "args"), 2) end
   if not pid then return nil, why end
   smarm.demonitor(why)
   return pid
end

--- Whether v is a reply handle: the tx of a channel (rx and other values are not).
function M.is_reply_handle(v)
   return type(v) == "userdata" and getmetatable(v) == "smarm channel" and v.send ~= nil
end

--- The protocol tag of an inbox message ("call", "cast", "stop" or "code_change") when
-- it is a well-formed protocol message, else nil: the message is an info message.
function M.protocol(m)
   if type(m) ~= "table" then return nil end
   local tag = m.smarm
   if tag == "call" then
      if M.is_reply_handle(m.from) then return tag end
   elseif tag == "cast" then
      return tag
   elseif tag == "stop" then
      if m.reason ~= nil then return tag end
   elseif tag == "code_change" then
      if M.is_reply_handle(m.from) and type(m.req) == "table" then return tag end
   end
   return nil
end

-- ---------------------------------------------------------------------------------------
-- Server side: the server running in this actor (each actor is its own Lua state, so
-- this module's state is per server).

local trap_rx, arms -- once trapping: the trap channel rx, and { trap_rx, inbox }

--- Makes the running server trap exits (call it from init).
-- @return the trap channel rx
function M.trap_exit()
   if not trap_rx then
      trap_rx = smarm.trap_exit(true)
      arms = { trap_rx, smarm.inbox }
   end
   return trap_rx
end

local recv, select = smarm.recv, smarm.select

--- Waits for the running server's next message: an exit signal from the trap channel
-- once trapping, else (or first, when both are ready) an inbox message.
-- @return true, the exit signal | false, the inbox message
function M.receive()
   if not arms then return false, recv() end
   local i, m = select(arms)
   return i == 1, m
end

--- Whether an exit signal comes from the actor that started this server (whose exit
-- ends the server, as in OTP).
function M.from_parent(sig)
   local from = sig.from or sig.pid
   return from ~= nil and from == proc.parent
end

--- The callback module named module, loaded in this actor; a failure is reported to the
-- starter and raised. behaviour names the caller in the message.
function M.load_module(behaviour, module)
   local ok, loaded = pcall(require, module)
   if not ok or type(loaded) ~= "table" then
      local why = ok and (behaviour .. ": module " .. module .. " is not a table") or loaded
      proc.started(false, why)
      error(why, 0)
   end
   return loaded
end

--- Registers the name and reports a clash to the starter; true to go on, else
-- false, reason.
function M.begin(name)
   if name then
      local ok, err = smarm.register(name)
      if not ok then
         proc.started(false, err)
         return false, err
      end
   end
   return true
end

--- Reports the outcome of init to the starter: started(true) after a successful init
-- (a start_link caller is linked first), started(false, reason) when it failed.
M.started = proc.started

--- Ends the actor with reason after terminate ran ("normal" simply returns).
function M.finish(reason)
   if reason ~= "normal" then smarm.exit(reason) end
end

--- The body of a behaviour's run: checks the module name (fname names the caller) and
-- serves inline. Tail-called by run, so error level 2 blames run's caller.
function M.run_inline(fname, serve, module, args, opts)
   if type(module) ~= "string" then
      error(fname .. ": bad module (a module name expected, got " .. type(module) .. ")", 2)
   end
   return serve(module, args, opts or {})
end

return M
