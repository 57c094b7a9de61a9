--- gen_server: a request/reply server behaviour (Erlang/OTP's gen_server) over a callback
-- module that is loaded by name in the server's own actor.
--
-- Wire protocol (shared with gen_statem): a call is {smarm = "call", req = r, from = tx},
-- a cast {smarm = "cast", msg = m}, a stop {smarm = "stop", reason = r}; the reply travels
-- on the per-call channel as {value}. Anything else in the inbox is an info message.
local smarm = require "smarm"
local proc = require "smarm.proc"

local M = {}

--- Default seconds a call waits for its reply.
M.DEFAULT_TIMEOUT = 5

-- The server running in this actor (each actor is its own Lua state, so module state is
-- per server): the trap-exit channel once trapping, and the actor that spawned it.
local trap_rx, parent

-- ---------------------------------------------------------------------------------------
-- Client side

-- nil (use the default), "infinity" or math.huge (forever), or seconds >= 0.
local function check_timeout(timeout, default, fname)
   if timeout == nil then return default end
   if timeout == "infinity" or timeout == math.huge then return nil end
   if type(timeout) ~= "number" or timeout < 0 then
      error(fname .. ": bad timeout (seconds, \"infinity\" or nil expected, got "
         .. tostring(timeout) .. ")", 3)
   end
   return timeout
end

-- The pid behind dest (a pid or a registered name), or nil if nobody holds the name.
local function resolve(dest, fname)
   local t = type(dest)
   if t == "number" then return dest end
   if t == "string" then return smarm.whereis(dest) end
   error(fname .. ": bad dest (a pid or a name expected, got " .. t .. ")", 3)
end

-- The request protocol of call, for gen_server and gen_statem alike.
local function do_call(dest, request, timeout, fname, tag)
   local wait = check_timeout(timeout, M.DEFAULT_TIMEOUT, fname)
   local pid = resolve(dest, fname)
   if not pid then return nil, "noproc" end
   if pid == smarm.self() then error(fname .. ": a server cannot call itself", 3) end
   local tx, rx = smarm.channel()
   if not smarm.send(pid, { smarm = tag or "call", req = request, from = tx }) then
      return nil, "noproc"
   end
   -- Only the request's copy of tx keeps the channel open now: when the server dies its
   -- state is closed, that copy goes, and rx says "closed" at once (no monitor needed).
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

--- Sends a request and waits for the reply.
-- @param dest a pid or a registered name
-- @param request any sendable value
-- @param timeout seconds (default 5), or "infinity"
-- @return the reply | nil, "timeout" | "server_down" | "noproc"
function M.call(dest, request, timeout)
   return do_call(dest, request, timeout, "gen_server.call")
end

--- Sends a message for handle_cast, without waiting.
-- @param dest a pid or a registered name
-- @param msg any sendable value
-- @return true | nil, "noproc"
function M.cast(dest, msg)
   local pid = resolve(dest, "gen_server.cast")
   if pid and smarm.send(pid, { smarm = "cast", msg = msg }) then return true end
   return nil, "noproc"
end

--- Replies to a call whose handle_call returned "noreply" (from any actor).
-- @param from the reply handle handle_call received
-- @param value the reply
-- @return true | nil, "closed" (the caller has given up)
function M.reply(from, value)
   if type(from) ~= "userdata" then
      error("gen_server.reply: bad from (the reply handle expected, got " .. type(from) .. ")",
         2)
   end
   return from:send({ value })
end

-- The stop protocol for gen_server and gen_statem: ask, then wait for the end.
local function do_stop(dest, reason, timeout, fname)
   local wait = check_timeout(timeout, nil, fname)
   local pid = resolve(dest, fname)
   if not pid then return nil, "noproc" end
   local mon = smarm.monitor(pid)
   if not smarm.send(pid, { smarm = "stop", reason = reason == nil and "normal" or reason }) then
      smarm.demonitor(mon)
      return nil, "noproc"
   end
   local down = mon:recv(wait)
   if not down then
      smarm.demonitor(mon)
      return nil, "timeout"
   end
   if down.reason == "noproc" then return nil, "noproc" end
   return true
end

--- Stops a server and waits until it has ended (its terminate has run).
-- @param dest a pid or a registered name
-- @param reason the exit reason (default "normal")
-- @param timeout seconds to wait (default forever)
-- @return true | nil, "noproc" | "timeout"
function M.stop(dest, reason, timeout)
   return do_stop(dest, reason, timeout, "gen_server.stop")
end

--- Asks a server to reload its callback module (dropping it from package.loaded) and to
-- convert its state with the new module's code_change(old_vsn, state, extra).
-- @param dest a pid or a registered name
-- @param old_vsn passed to code_change
-- @param extra passed to code_change
-- @param timeout seconds (default 5)
-- @return true | nil, "timeout" | "server_down" | "noproc"
function M.code_change(dest, old_vsn, extra, timeout)
   return do_call(dest, { old_vsn = old_vsn, extra = extra }, timeout, "gen_server.code_change",
      "code_change")
end

-- ---------------------------------------------------------------------------------------
-- Starting

-- Body of a started server's actor: set the start report's receiver, then serve.
local function server_main(behaviour, module, args, opts, spawner, link)
   require("smarm.proc").ack_to = spawner
   require(behaviour)._serve(module, args, opts, link and spawner)
end

-- start/start_link for gen_server and gen_statem: spawn, wait for init, return the pid.
local function do_start(behaviour, module, args, opts, link, fname)
   if type(module) ~= "string" then
      error(fname .. ": bad module (a module name expected, got " .. type(module) .. ")", 3)
   end
   opts = opts or {}
   if type(opts) ~= "table" then
      error(fname .. ": bad opts (a table expected, got " .. type(opts) .. ")", 3)
   end
   if opts.name ~= nil and type(opts.name) ~= "string" then
      error(fname .. ": bad opts.name (a string expected, got " .. type(opts.name) .. ")", 3)
   end
   local wait = check_timeout(opts.timeout, M.DEFAULT_TIMEOUT, fname)
   local pid, mon = smarm.spawn_monitor(server_main, behaviour, module, args,
      { name = opts.name, trap_exit = opts.trap_exit }, smarm.self(), link or opts.link)
   local ok, why = proc.await(pid, mon, wait)
   smarm.demonitor(mon)
   if ok then return pid end
   if why == "timeout" then smarm.kill(pid) end
   return nil, why
end
M._start = do_start
M._call = do_call
M._stop = do_stop

--- Starts a server in a new actor and waits until its init has returned.
-- @param module the callback module's name (required in the new actor)
-- @param args passed to init (copied)
-- @param opts {name = registered name, link = bool, timeout = seconds for init (5),
--   trap_exit = bool}
-- @return pid | nil, reason (init's reason, "taken" for a name clash, "timeout", or the
--   error message if init raised)
function M.start(module, args, opts)
   return do_start("smarm.gen_server", module, args, opts, false, "gen_server.start")
end

--- Like start, and links the server to the caller once init has succeeded.
function M.start_link(module, args, opts)
   return do_start("smarm.gen_server", module, args, opts, true, "gen_server.start_link")
end

--- Makes the running server trap exits (call it from init). A "shutdown" exit signal then
-- reaches handle_shutdown(state); other exit signals reach handle_info.
-- @return the trap channel rx
function M.trap_exit()
   if not trap_rx then trap_rx = smarm.trap_exit(true) end
   return trap_rx
end

-- ---------------------------------------------------------------------------------------
-- Server side, shared with gen_statem

-- Registers the name and reports failures of the start phase; returns true to go on.
local function begin(name)
   parent = proc.ack_to
   if name then
      local ok, err = smarm.register(name)
      if not ok then
         proc.started(false, err)
         return false, err
      end
   end
   return true
end

-- After a successful init: link to a start_link caller, report started.
local function started(link_to)
   if link_to then smarm.link(link_to) end
   proc.started(true)
end

-- Ends the actor with reason after terminate ran ("normal" simply returns).
local function finish(reason)
   if reason ~= "normal" then smarm.exit(reason) end
end

-- The callback module named module, loaded in this actor; a failure is reported
-- to the starter and raised. behaviour names the caller in the message.
local function load_module(behaviour, module)
   local ok, loaded = pcall(require, module)
   if not ok or type(loaded) ~= "table" then
      local why = ok and (behaviour .. ": module " .. module .. " is not a table") or loaded
      proc.started(false, why)
      error(why, 0)
   end
   return loaded
end

-- The body of gen_server.run and gen_statem.run: checks the module name (fname
-- names the caller) and serves inline, linked to nobody. Both tail-call it, so
-- error level 2 blames their caller.
local function run_inline(fname, serve, module, args, opts)
   if type(module) ~= "string" then
      error(fname .. ": bad module (a module name expected, got " .. type(module) .. ")", 2)
   end
   return serve(module, args, opts, nil)
end

--- Internal: the parts of the server loop gen_statem shares.
M._server = {
   begin = begin,
   started = started,
   finish = finish,
   load_module = load_module,
   run_inline = run_inline,
   trap = function() return trap_rx end,
   parent = function() return parent end,
}

-- The callback module of the server running in this actor, and its name.
local mod, mod_name

-- Runs terminate if the module has one; an error in it crashes the server.
local function terminate(reason, state)
   if mod.terminate then mod.terminate(reason, state) end
end

-- Crash path: terminate gets "error", then the original error propagates.
local function crash(err, state)
   pcall(terminate, "error", state)
   error(err, 0)
end

-- Calls callback cb; maps its "noreply"/"stop" result to state | nil, reason, nil, state.
local function handle(cb, msg, state)
   local h = mod[cb]
   if not h then crash("gen_server: " .. mod_name .. " has no " .. cb, state) end
   local ok, r, a, b = pcall(h, msg, state)
   if not ok then crash(r, state) end
   if r == "noreply" then return a end
   if r == "stop" then return nil, a, nil, b end
   crash(string.format("gen_server: bad return from %s.%s: %s", mod_name, cb, tostring(r)), state)
end

-- Reloads the callback module and converts the state (a code_change request).
local function upgrade(m, state)
   local req = m.req
   package.loaded[mod_name] = nil
   local ok, new = pcall(require, mod_name)
   if not ok or type(new) ~= "table" then
      package.loaded[mod_name] = mod
      m.from:send({ nil })
      return state
   end
   mod = new
   if mod.code_change then
      local cok, st = pcall(mod.code_change, req.old_vsn, state, req.extra)
      if not cok then crash(st, state) end
      state = st
   end
   m.from:send({ true })
   return state
end

-- Handles one inbox message: returns the new state, or nil, reason, reply-after-terminate,
-- last state to stop.
local function dispatch(m, state)
   local tag = type(m) == "table" and m.smarm
   if tag == "call" then
      local from = m.from
      local h = mod.handle_call
      if not h then crash("gen_server: " .. mod_name .. " has no handle_call", state) end
      local ok, r, a, b, c = pcall(h, m.req, from, state)
      if not ok then crash(r, state) end
      if r == "reply" then
         from:send({ a })
         return b
      elseif r == "noreply" then
         return a
      elseif r == "stop" then
         return nil, a, function() from:send({ b }) end, c
      end
      crash(string.format("gen_server: bad return from %s.handle_call: %s", mod_name,
         tostring(r)), state)
   elseif tag == "cast" then
      return handle("handle_cast", m.msg, state)
   elseif tag == "stop" then
      return nil, m.reason, nil, state
   elseif tag == "code_change" then
      return upgrade(m, state)
   end
   if not mod.handle_info then return state end
   return handle("handle_info", m, state)
end

-- Handles an exit signal from the trap channel, like dispatch.
local function exit_signal(sig, state)
   if sig.reason == "shutdown" then
      if not mod.handle_shutdown then return nil, "shutdown", nil, state end
      local ok, r, a, b = pcall(mod.handle_shutdown, state)
      if not ok then crash(r, state) end
      if r == "noreply" then return a end
      if r == "stop" then return nil, a, nil, b end
      crash(string.format("gen_server: bad return from %s.handle_shutdown: %s", mod_name,
         tostring(r)), state)
   end
   -- the spawner's exit (a supervisor going down) ends the server, as in OTP
   local from = sig.from or sig.pid
   if from ~= nil and from == parent then return nil, sig.reason, nil, state end
   return dispatch(sig, state)
end

-- The receive loop: returns the stop reason, the deferred stop reply and the last state.
local function loop(state)
   local recv, select, inbox = smarm.recv, smarm.select, smarm.inbox
   local arms
   while true do
      local new, reason, after, last
      if trap_rx then
         arms = arms or { trap_rx, inbox }
         local i, m = select(arms)
         if i == 1 then
            new, reason, after, last = exit_signal(m, state)
         else
            new, reason, after, last = dispatch(m, state)
         end
      else
         new, reason, after, last = dispatch(recv(), state)
      end
      if new == nil and reason ~= nil then return reason, after, last end
      state = new
   end
end

--- Internal: the server body behind run and start (link_to: the start_link caller).
function M._serve(module, args, opts, link_to)
   opts = opts or {}
   mod, mod_name = load_module("gen_server", module), module
   local named, err = begin(opts.name)
   if not named then return smarm.exit(err) end
   if opts.trap_exit then M.trap_exit() end
   local iok, state, why = pcall(mod.init, args)
   if not iok then
      proc.started(false, state)
      error(state, 0)
   end
   if state == nil then
      why = why == nil and "init_failed" or why
      proc.started(false, why)
      return finish(why)
   end
   started(link_to)
   local reason, after, last = loop(state)
   local tok, terr = pcall(terminate, reason, last)
   if after then after() end
   if not tok then error(terr, 0) end
   return finish(reason)
end

--- Runs a server inline as the current actor (a supervisor child's function): registers
-- opts.name (a restarted child re-binds it), reports started once init returned, and
-- returns when the server stops normally (other reasons exit the actor).
-- @param module the callback module's name
-- @param args passed to init
-- @param opts {name = registered name, trap_exit = bool}
function M.run(module, args, opts)
   return run_inline("gen_server.run", M._serve, module, args, opts)
end

return M
