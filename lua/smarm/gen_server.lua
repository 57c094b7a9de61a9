--- gen_server: a request/reply server behaviour (Erlang/OTP's gen_server) over a callback
-- module that is loaded by name in the server's own actor. The wire protocol and the
-- start/call/stop plumbing are smarm.gen's (shared with gen_statem).
local smarm = require "smarm"
local gen = require "smarm.gen"
-- smarm.reload is loaded when a reload of the callback module comes (raw.behaviour)
local reload_raw = require "smarm.reload.raw"

local M = {}

--- Functions of this module that report their own start (smarm.proc.started, once init
-- returned): a supervisor waits for that report from a child started through run.
M.init_ack = { run = true }

-- ---------------------------------------------------------------------------------------
-- Client side

--- Sends a request and waits for the reply.
-- @param dest a pid or a registered name
-- @param request any sendable value
-- @param timeout seconds (default 5), or "infinity"
-- @return the reply | nil, "timeout" | "server_down" | "noproc"
function M.call(dest, request, timeout)
   return gen.call(dest, request, timeout, "gen_server.call")
end

--- Sends a message for handle_cast, without waiting.
-- @param dest a pid or a registered name
-- @param msg any sendable value
-- @return true | nil, "noproc"
function M.cast(dest, msg)
   return gen.cast(dest, msg, "gen_server.cast")
end

--- Replies to a call whose handle_call returned "noreply" (from any actor).
-- @param from the reply handle handle_call received
-- @param value the reply
-- @return true | nil, "closed" (the caller has given up)
function M.reply(from, value)
   return gen.reply(from, value, "gen_server.reply")
end

--- Stops a server and waits until it has ended (its terminate has run).
-- @param dest a pid or a registered name
-- @param reason the exit reason (default "normal")
-- @param timeout seconds to wait (default forever)
-- @return true | nil, "noproc" | "timeout"
function M.stop(dest, reason, timeout)
   return gen.stop(dest, reason, timeout, "gen_server.stop")
end

--- Asks a server to reload its callback module (dropping it from package.loaded) and to
-- convert its state with the new module's code_change(old_vsn, state, extra).
-- @param dest a pid or a registered name
-- @param old_vsn passed to code_change
-- @param extra passed to code_change
-- @param timeout seconds (default 5)
-- @return true | nil, "timeout" | "server_down" | "noproc"
function M.code_change(dest, old_vsn, extra, timeout)
   return gen.call(dest, { old_vsn = old_vsn, extra = extra }, timeout, "gen_server.code_change",
      "code_change")
end

--- The state of a running server (OTP's sys:get_state), for debugging.
-- @return the state | nil, "timeout" | "server_down" | "noproc"
function M.get_state(dest, timeout)
   return gen.get_state(dest, timeout, "gen_server.get_state")
end

--- Replaces a running server's state with fn(state) (OTP's sys:replace_state). fn runs in
-- the server and so has no upvalues (as a spawned function); an error in it leaves the
-- state as it was and is raised here.
-- @return the new state | nil, "timeout" | "server_down" | "noproc"
function M.replace_state(dest, fn, timeout)
   local r, err = gen.replace_state(dest, fn, timeout, "gen_server.replace_state")
   if r == nil then return nil, err end
   if r.error then error("gen_server.replace_state: " .. r.error, 2) end
   return r.state
end

--- Starts a server in a new actor and waits until its init has returned.
-- @param module the callback module's name (required in the new actor)
-- @param args passed to init (copied)
-- @param opts {name = registered name, link = bool, timeout = seconds for init (5),
--   trap_exit = bool}
-- @return pid | nil, reason (init's reason, "taken" for a name clash, "timeout", or the
--   error message if init raised)
function M.start(module, args, opts)
   return gen.start("smarm.gen_server", module, args, opts, false, "gen_server.start")
end

--- Like start, and links the server to the caller once init has succeeded.
function M.start_link(module, args, opts)
   return gen.start("smarm.gen_server", module, args, opts, true, "gen_server.start_link")
end

--- Makes the running server trap exits (call it from init). A "shutdown" exit signal then
-- reaches handle_shutdown(state); other exit signals reach handle_info.
-- @return the trap channel rx
M.trap_exit = gen.trap_exit

-- ---------------------------------------------------------------------------------------
-- Server side

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

-- What a callback may add after the state: a timeout in seconds, "hibernate", or
-- {continue = x}. Returns the loop's "then" for it (nil: none); anything else is an error
-- that names the callback and the value.
local function after_state(extra, cb, state)
   if extra == nil or extra == "infinity" then return nil end
   local t = type(extra)
   if t == "number" and extra >= 0 then return extra end
   if extra == "hibernate" then return extra end
   if t == "table" and extra.continue ~= nil then return extra end
   crash(string.format("gen_server: bad return from %s.%s: timeout, \"hibernate\" or "
      .. "{continue = x} expected after the state, got %s", mod_name, cb, tostring(extra)),
      state)
end

local function bad_return(cb, r, state)
   crash(string.format("gen_server: bad return from %s.%s: %s", mod_name, cb, tostring(r)),
      state)
end

-- Calls callback cb(msg, state); maps its result to state, then | nil, reason, nil, state
-- (a stop).
local function handle(cb, msg, state)
   local h = mod[cb]
   if not h then crash("gen_server: " .. mod_name .. " has no " .. cb, state) end
   local ok, r, a, b = pcall(h, msg, state)
   if not ok then crash(r, state) end
   if r == "noreply" then return a, after_state(b, cb, a) end
   if r == "stop" then return nil, a, nil, b end
   bad_return(cb, r, state)
end

-- Reloads the callback module and converts the state (a code_change request).
local function upgrade(m, state)
   local req = m.req
   package.loaded[mod_name] = nil
   local ok, new = pcall(require, mod_name)
   if not ok or type(new) ~= "table" then
      package.loaded[mod_name] = mod
      gen.reply(m.from, nil, "gen_server")
      return state
   end
   mod = new
   if mod.code_change then
      local cok, st = pcall(mod.code_change, req.old_vsn, state, req.extra)
      if not cok then crash(st, state) end
      state = st
   end
   gen.reply(m.from, true, "gen_server")
   return state
end

-- Handles one inbox message: returns the new state and what comes next (a timeout,
-- "hibernate" or {continue = x}), or nil, reason, reply-after-terminate, last state to
-- stop. A malformed protocol message is an info message.
local function dispatch(m, state)
   local tag = gen.protocol(m)
   if tag == "call" then
      local from = m.from
      local h = mod.handle_call
      if not h then crash("gen_server: " .. mod_name .. " has no handle_call", state) end
      local ok, r, a, b, c = pcall(h, m.req, from, state)
      if not ok then crash(r, state) end
      if r == "reply" then
         gen.reply(from, a, "gen_server")
         return b, after_state(c, "handle_call", b)
      elseif r == "noreply" then
         return a, after_state(b, "handle_call", a)
      elseif r == "stop" then
         return nil, a, function() gen.reply(from, b, "gen_server") end, c
      end
      bad_return("handle_call", r, state)
   elseif tag == "cast" then
      return handle("handle_cast", m.msg, state)
   elseif tag == "stop" then
      return nil, m.reason, nil, state
   elseif tag == "code_change" then
      return upgrade(m, state)
   elseif tag == "get_state" then
      gen.reply(m.from, state, "gen_server")
      return state
   elseif tag == "replace_state" then
      local new, err = gen.run_replace(m.req, state)
      gen.reply(m.from, err and { error = err } or { state = new }, "gen_server")
      return new
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
      if r == "noreply" then return a, after_state(b, "handle_shutdown", a) end
      if r == "stop" then return nil, a, nil, b end
      bad_return("handle_shutdown", r, state)
   end
   -- the starter's exit (a supervisor going down) ends the server, as in OTP
   if gen.from_parent(sig) then return nil, sig.reason, nil, state end
   return dispatch(sig, state)
end

-- The receive loop: returns the stop reason, the deferred stop reply and the last state.
-- nxt is what the last callback asked for: a timeout (handle_info("timeout", s) when
-- nothing arrives in time), "hibernate" (a full collection, then wait) or
-- {continue = x} (handle_continue(x, s) before the next message).
local function loop(state, nxt)
   local receive = gen.receive
   local changes = reload_raw.changes
   while true do
      local new, reason, after, last, signal, m
      if type(nxt) == "table" then
         new, reason, after, last = handle("handle_continue", nxt.continue, state)
      else
         if nxt == "hibernate" then collectgarbage("collect") end
         signal, m = receive(type(nxt) == "number" and nxt or nil)
         -- the callback module was reloaded: convert the state before m (still in hand)
         if changes[mod_name] then
            state = require("smarm.reload").convert(mod, mod_name, state)
         end
         if signal == nil then
            new, reason, after, last = handle("handle_info", "timeout", state)
         elseif signal then
            new, reason, after, last = exit_signal(m, state)
         else
            new, reason, after, last = dispatch(m, state)
         end
      end
      if new == nil and reason ~= nil then return reason, after, last end
      state, nxt = new, reason
   end
end

-- The server body behind run (and so start).
local function serve(module, args, opts)
   gen.route()
   mod, mod_name = gen.load_module("gen_server", module), module
   -- from here a reload of the callback module is recorded for its code_change
   reload_raw.behaviour()
   local named, err = gen.begin(opts.name)
   if not named then return smarm.exit(err) end
   if opts.trap_exit then gen.trap_exit() end
   local iok, state, why = pcall(mod.init, args)
   if not iok then
      gen.started(false, state)
      error(state, 0)
   end
   if state == nil then
      why = why == nil and "init_failed" or why
      gen.started(false, why)
      return gen.finish(why)
   end
   gen.started(true)
   -- init's second value after a state: a timeout, "hibernate" or {continue = x}; anything
   -- else there is ignored, as it always was
   local t = type(why)
   local nxt = (t == "number" and why >= 0 or why == "hibernate"
      or t == "table" and why.continue ~= nil) and why or nil
   local reason, after, last = loop(state, nxt)
   local tok, terr = pcall(terminate, reason, last)
   if after then after() end
   if not tok then error(terr, 0) end
   return gen.finish(reason)
end

--- Runs a server inline as the current actor (a supervisor child's function, and the
-- body of a started server): registers opts.name (a restarted child re-binds it),
-- reports started once init returned, and returns when the server stops normally
-- (other reasons exit the actor).
-- @param module the callback module's name
-- @param args passed to init
-- @param opts {name = registered name, trap_exit = bool}
function M.run(module, args, opts)
   return gen.run_inline("gen_server.run", serve, module, args, opts)
end

return M
