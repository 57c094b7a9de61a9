--- gen: what gen_server and gen_statem share (Erlang/OTP's gen module): starting a
-- server in a new actor, the client side of the call/cast/stop protocol, and the
-- per-actor plumbing of a running server (its name, start report, what it waits on and
-- the actor that started it). Neither behaviour reaches into the other: both use this,
-- and the supervisor its error helpers (blame, is_reply_handle).
--
-- Wire protocol: every protocol message carries its tag under the key M.TAG, a string
-- made once per process that no user message carries by accident, so a user message of
-- any shape is an info message. A call is {[TAG] = "call", req = r, from = from}, a cast
-- {[TAG] = "cast", msg = m}, a stop {[TAG] = "stop", reason = r}, a code change
-- {[TAG] = "code_change", req = {old_vsn = v, extra = e}, from = from}, and the debugging
-- requests {[TAG] = "get_state" | "replace_state", req = r, from = from}. from is
-- {pid = caller, tx = reply channel}; the reply travels on that channel as {value}.
local smarm = require "smarm"
local proc = require "smarm.proc"

local M = {}

local tnew = require "table.new"

--- The key under which protocol messages carry their tag.
local TAG = require("smarm.selective.raw").tag
M.TAG = TAG

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

-- The tables of the request a call sends, kept for the next call (see M.call).
local call_msg, call_from
-- The tx and rx a call's reply comes through, kept for the next call: each call gives them
-- a new channel (chan.call_send) rather than making two objects, and lets go of it at its
-- end.
local chan = require "smarm.chan.raw"
local call_tx, call_rx

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
   local self = smarm.self()
   if pid == self then error(fname .. ": a server cannot call itself", 2) end
   -- The request's two tables are the last call's: the send copies them, and they are
   -- emptied of the request right after (a call nested in a finalizer that runs during the
   -- call finds them taken, and makes its own). Made with room for their keys: a
   -- constructor's template cannot hold TAG, made at run time, and modules run from
   -- bytecode dumps, which drop a template's keys whose values are computed; each key added
   -- to a full table rehashed it.
   local msg, from = call_msg, call_from
   call_msg = nil
   if not msg then msg, from = tnew(0, 3), tnew(0, 2) end
   from.pid = self
   msg[TAG], msg.req, msg.from = tag or "call", request, from
   local v, why = M.request(pid, msg, from, "tx", wait)
   msg.req = nil
   call_msg, call_from = msg, from
   if v then return v[1] end
   if v == false then error(blame(fname, why, "msg.req", "request"), 2) end
   return nil, why
end

--- Sends msg to pid with holder[key] = a reply channel's tx, and waits up to wait seconds
-- (nil: forever) for the one reply on it (the supervisor's requests use it too).
-- tx and rx are the actor's pair for every request (taken while in use: a request nested
-- in a finalizer that runs meanwhile makes its own), given a new channel by chan.call_send;
-- tx lets go of it once msg is sent, so only msg's copy keeps it open: when the server
-- dies its state is closed, that copy goes, and rx says "closed" (no monitor needed).
-- @return the reply table | nil, "noproc" | "timeout" | "server_down" | false, err (the
--   send raised err)
function M.request(pid, msg, holder, key, wait)
   local tx, rx = call_tx, call_rx
   call_tx, call_rx = nil, nil
   if not tx then tx, rx = smarm.channel() end
   holder[key] = tx
   local ok, sent, t0 = pcall(chan.call_send, pid, msg, tx, rx)
   if not ok or not sent then
      chan.drop(tx)
      chan.drop(rx)
      call_tx, call_rx = tx, rx
      if not ok then return false, sent end
      return nil, "noproc"
   end
   local v, err = rx:recv(wait)
   -- a request has one reply: the channel goes now (after a timeout, with the late reply)
   chan.drop(rx)
   call_tx, call_rx = tx, rx
   if v then return v end
   if err == "timeout" then return nil, "timeout" end
   -- "closed": the server died, or it is alive and dropped the reply handle (then no reply
   -- can come and the request times out, as in OTP). A monitor tells which.
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
   local m = tnew(0, 2) -- (with room for its keys: see call)
   m[TAG], m.msg = "cast", msg
   local ok, sent = pcall(smarm.send, pid, m)
   if not ok then error(blame(fname, sent, "msg.msg", "msg"), 2) end
   if sent then return true end
   return nil, "noproc"
end

-- The table a reply is sent in, kept for the next reply (see M.reply).
local reply_box

--- Answers a call through its reply handle (from any actor). A call has one reply: this
-- actor's copy of the handle lets go of the channel once it is sent (a later reply through it
-- is "closed", as one after the caller got its answer would be).
-- @return true | nil, "closed" (the caller has given up)
function M.reply(from, value, fname)
   if not M.is_reply_handle(from) then
      error(fname .. ": bad from (the reply handle expected, got " .. type(from) .. ")", 2)
   end
   local tx = type(from) == "table" and from.tx or from
   -- the reply's table is the last reply's, as a call's request tables are (see M.call)
   local box = reply_box or {}
   reply_box = nil
   box[1] = value
   local ok, sent, why = pcall(chan.reply, tx, box)
   box[1] = nil
   reply_box = box
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
   ok, sent = pcall(smarm.send, pid, { [TAG] = "stop", reason = reason == nil and "normal"
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

-- one C call where type, getmetatable (its __metatable field) and an __index lookup were,
-- twice in each call a server answers
local is_tx = chan.is_tx

--- Whether v is the tx of a channel (the supervisor's requests carry one as reply).
M.is_tx = is_tx

--- Whether v is a reply handle: a call's from ({pid, tx}), or the tx of a channel (rx and
-- other values are not).
function M.is_reply_handle(v)
   if type(v) == "table" then return is_tx(rawget(v, "tx")) end
   return is_tx(v)
end

local requests = { call = true, code_change = true, get_state = true, replace_state = true }

--- The protocol tag of an inbox message ("call", "cast", "stop", "code_change",
-- "get_state" or "replace_state") when it is a well-formed protocol message, else nil:
-- the message is an info message.
function M.protocol(m)
   if type(m) ~= "table" then return nil end
   local tag = rawget(m, TAG)
   if tag == nil then return nil end
   if requests[tag] then
      if M.is_reply_handle(m.from) then return tag end
   elseif tag == "cast" then
      return tag
   elseif tag == "stop" then
      if m.reason ~= nil then return tag end
   end
   return nil
end

--- Asks a server for its state (sys:get_state).
function M.get_state(dest, timeout, fname)
   return M.call(dest, nil, timeout, fname, "get_state")
end

--- Has a server replace its state with fn(state) (sys:replace_state); fn has no upvalues
-- (it is sent as bytecode, as a spawned function is).
function M.replace_state(dest, fn, timeout, fname)
   if type(fn) ~= "function" then
      error(fname .. ": bad fn (a function expected, got " .. type(fn) .. ")", 3)
   end
   if debug.getupvalue(fn, 1) ~= nil then
      error(fname .. ": fn must have no upvalues (it runs in the server)", 3)
   end
   local ok, code = pcall(string.dump, fn)
   if not ok then error(fname .. ": fn cannot be sent: " .. tostring(code), 3) end
   return M.call(dest, code, timeout, fname, "replace_state")
end

--- Runs a replace_state request's function on state in the server: the new state, or
-- the state unchanged and the error (the caller gets {error = e}).
function M.run_replace(code, state)
   local fn, lerr = loadstring(code, "=replace_state")
   if not fn then return state, lerr end
   local ok, new = pcall(fn, state)
   if not ok then return state, tostring(new) end
   return new
end

-- ---------------------------------------------------------------------------------------
-- Server side: the server running in this actor (each actor is its own Lua state, so
-- this module's state is per server).

-- What the server waits on besides its inbox: the trap channel once it traps, and the
-- monitors its callbacks made (their down notices go to handle_info, as in OTP). arms is
-- the select array {trap_rx?, mon..., inbox}, rebuilt when either changes; nil while there
-- is only the inbox (a plain recv then).
local trap_rx, arms
local mons, nmons = {}, 0 -- mon -> true

local function rebuild()
   if not trap_rx and nmons == 0 then
      arms = nil
      return
   end
   arms = {}
   if trap_rx then arms[1] = trap_rx end
   for mon in pairs(mons) do arms[#arms + 1] = mon end
   arms[#arms + 1] = smarm.inbox
end

local function watch(mon)
   if mon and not mons[mon] then
      mons[mon] = true
      nmons = nmons + 1
      rebuild()
   end
   return mon
end

local function unwatch(mon)
   if mons[mon] then
      mons[mon] = nil
      nmons = nmons - 1
      rebuild()
   end
end

--- Makes the running server trap exits (call it from init).
-- @return the trap channel rx
function M.trap_exit()
   if not trap_rx then smarm.trap_exit(true) end
   return trap_rx
end

--- Routes what this actor's callbacks start to the server loop: from now on monitors made
-- with smarm.monitor, spawn_monitor or spawn_opt{monitor = true} are watched by the loop
-- (their notices reach handle_info; demonitor stops that), and smarm.trap_exit makes the
-- loop take exit signals. Called once, when the server starts, before its module loads.
function M.route()
   local raw_monitor, raw_demonitor = smarm.monitor, smarm.demonitor
   local raw_spawn_monitor, raw_spawn_opt = smarm.spawn_monitor, smarm.spawn_opt
   local raw_trap = smarm.trap_exit
   smarm.monitor = function(pid) return watch(raw_monitor(pid)) end
   smarm.demonitor = function(mon)
      unwatch(mon)
      return raw_demonitor(mon)
   end
   smarm.spawn_monitor = function(...)
      local pid, mon = raw_spawn_monitor(...)
      watch(mon)
      return pid, mon
   end
   smarm.spawn_opt = function(opts, ...)
      local pid, mon = raw_spawn_opt(opts, ...)
      if type(opts) == "table" and opts.monitor and pid then watch(mon) end
      return pid, mon
   end
   smarm.trap_exit = function(on)
      local rx = raw_trap(on)
      if on == nil or on then trap_rx = rx else trap_rx = nil end
      rebuild()
      return rx
   end
end

local recv, select = smarm.recv, smarm.select

--- Waits for the running server's next message: an exit signal from the trap channel
-- once trapping, else (or first, when several are ready) a watched monitor's down notice,
-- else an inbox message.
-- @param timeout seconds, nil = forever
-- @return true, the exit signal | false, the message or notice | nil (timeout)
function M.receive(timeout)
   while true do
      if not arms then
         local m, err = recv(timeout)
         if m == nil and err == "timeout" then return nil end
         return false, m
      end
      local i, m = select(arms, timeout)
      if i == nil then return nil end
      local arm = arms[i]
      if arm == trap_rx then
         if m ~= nil then return true, m end
         trap_rx = nil -- closed (trap_exit(false) elsewhere)
         rebuild()
      elseif arm == smarm.inbox then
         return false, m
      else
         -- a monitor says one thing, its notice, and is closed after it
         unwatch(arm)
         if m ~= nil then return false, m end
      end
   end
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
