--- gen_statem: a state machine behaviour (Erlang/OTP's gen_statem) over a callback module
-- loaded by name in the machine's own actor. Calls, casts and stops are smarm.gen's
-- protocol, so gen_server.call and gen_statem.call are interchangeable.
local smarm = require "smarm"
local gen = require "smarm.gen"
-- smarm.reload is loaded when a reload of the callback module comes (raw.behaviour)
local reload_raw = require "smarm.reload.raw"

local M = {}

--- Functions of this module that report their own start (smarm.proc.started, once init
-- returned): a supervisor waits for that report from a child started through run.
M.init_ack = { run = true }

--- Sends a request and waits for the reply (a {"reply", from, v} action).
-- @param dest a pid or a registered name
-- @param request any sendable value
-- @param timeout seconds (default 5), or "infinity"
-- @return the reply | nil, "timeout" | "server_down" | "noproc"
function M.call(dest, request, timeout)
   return gen.call(dest, request, timeout, "gen_statem.call")
end

--- Sends a "cast" event without waiting.
-- @return true | nil, "noproc"
function M.cast(dest, msg)
   return gen.cast(dest, msg, "gen_statem.cast")
end

--- Replies to a call outside of a {"reply", from, v} action.
-- @return true | nil, "closed" (the caller has given up)
function M.reply(from, value)
   return gen.reply(from, value, "gen_statem.reply")
end

--- Stops a machine and waits until it has ended (its terminate has run).
-- @param dest a pid or a registered name
-- @param reason the exit reason (default "normal")
-- @param timeout seconds (default forever)
-- @return true | nil, "noproc" | "timeout"
function M.stop(dest, reason, timeout)
   return gen.stop(dest, reason, timeout, "gen_statem.stop")
end

--- The state and data of a running machine, as {state, data} (OTP's sys:get_state).
-- @return {state, data} | nil, "timeout" | "server_down" | "noproc"
function M.get_state(dest, timeout)
   return gen.get_state(dest, timeout, "gen_statem.get_state")
end

--- Replaces a running machine's state and data with fn({state, data}) -> {state, data}
-- (OTP's sys:replace_state); fn has no upvalues. An error in it is raised here.
-- @return {state, data} | nil, "timeout" | "server_down" | "noproc"
function M.replace_state(dest, fn, timeout)
   local r, err = gen.replace_state(dest, fn, timeout, "gen_statem.replace_state")
   if r == nil then return nil, err end
   if r.error then error("gen_statem.replace_state: " .. r.error, 2) end
   return r.state
end

--- Starts a machine in a new actor and waits until its init has returned.
-- @param module the callback module's name
-- @param args passed to init
-- @param opts {name, link, timeout, trap_exit} as for gen_server.start
-- @return pid | nil, reason
function M.start(module, args, opts)
   return gen.start("smarm.gen_statem", module, args, opts, false, "gen_statem.start")
end

--- Like start, and links the machine to the caller once init has succeeded.
function M.start_link(module, args, opts)
   return gen.start("smarm.gen_statem", module, args, opts, true, "gen_statem.start_link")
end

--- Makes the running machine trap exits (call it from init): a "shutdown" exit signal then
-- calls handle_shutdown(state, data) if defined (else the machine stops with "shutdown");
-- other exit signals arrive as "info" events.
M.trap_exit = gen.trap_exit

-- ---------------------------------------------------------------------------------------
-- The machine, one per actor

local mod, mod_name, handler -- the callback module and its event function
local state, data
-- events to handle before the inbox, {type, content, from}, in queue[qhead .. qtail]
local queue, qhead, qtail = {}, 1, 0
local postponed = {}
local timers = {}   -- kind key ("state", "event", "g:" .. name) -> {timer, ref}
local next_ref = 0

local function fail(msg) error("gen_statem: " .. msg, 0) end

-- Cancels the timeout under key (a stale message that already fired is ignored by ref).
local function cancel(key)
   local t = timers[key]
   if t then
      smarm.cancel_timer(t.timer)
      timers[key] = nil
   end
end

-- Arms a timeout: after s seconds the machine gets event type with content msg.
local function arm(key, etype, s, msg, name)
   cancel(key)
   if s == nil or s == false or s == "infinity" then return end
   if type(s) ~= "number" or s < 0 then fail("bad timeout " .. tostring(s)) end
   next_ref = next_ref + 1
   local timer = smarm.send_after(s, smarm.self(),
      { [gen.TAG] = "statem_timeout", key = key, ref = next_ref, etype = etype, msg = msg,
        name = name })
   timers[key] = { timer = timer, ref = next_ref }
end

-- Calls the module for one event; returns the callback's results.
local function call_handler(etype, content, from)
   if handler then return handler(etype, content, state, data, from) end
   local f = mod[state]
   if type(f) ~= "function" then
      fail(string.format("%s has no state function %s (event %s)", mod_name, tostring(state),
         etype))
   end
   return f(etype, content, data, from)
end

-- Applies actions; returns postpone (bool), the event timeout to arm and inserted events.
local function apply_actions(actions, enter)
   if actions == nil then return false end
   if type(actions) ~= "table" then fail("actions must be a table") end
   -- a single action may be given bare: {"reply", from, v}
   if type(actions[1]) == "string" then actions = { actions } end
   local postpone, inserted, event_timeout = false, nil, nil
   for _, a in ipairs(actions) do
      local kind = a[1]
      if kind == "reply" then
         gen.reply(a[2], a[3], "gen_statem reply action")
      elseif kind == "postpone" then
         if enter then fail("postpone in an enter call") end
         postpone = true
      elseif kind == "next_event" then
         if enter then fail("next_event in an enter call") end
         inserted = inserted or {}
         inserted[#inserted + 1] = { a[2], a[3] }
      elseif kind == "state_timeout" then
         arm("state", "state_timeout", a[2], a[3])
      elseif kind == "timeout" then
         event_timeout = a
      elseif kind == "generic_timeout" then
         arm("g:" .. tostring(a[2]), "generic_timeout", a[3], a[4], a[2])
      else
         fail("unknown action " .. tostring(kind))
      end
   end
   return postpone, event_timeout, inserted
end

-- Puts events at the front of the queue, in order.
local function push_front(events)
   local rest = {}
   for i = 1, #events do rest[#rest + 1] = events[i] end
   for i = qhead, qtail do rest[#rest + 1] = queue[i] end
   queue, qhead, qtail = rest, 1, #rest
end

-- The enter call after a state change (old: the previous state). Returns nil or a stop.
local function enter(old)
   local r, a, b, c = call_handler("enter", old, nil)
   if r == "keep_state" or r == "repeat_state" then
      data = a
      apply_actions(b, true)
   elseif r == "keep_state_and_data" or r == "repeat_state_and_data" then
      apply_actions(a, true)
   elseif r == "next_state" then
      if a ~= state then fail("an enter call cannot change the state") end
      data = b
      apply_actions(c, true)
   elseif r == "stop" then
      return a, b
   else
      fail(string.format("bad return from %s enter call: %s", mod_name, tostring(r)))
   end
end

-- Handles one event; returns the stop reason (and data) when the machine stops.
local function handle_event(etype, content, from)
   cancel("event") -- any event cancels the event timeout
   local r, a, b, c = call_handler(etype, content, from)
   local new, actions
   local repeat_enter = false
   if r == "next_state" then
      new, data, actions = a, b, c
   elseif r == "keep_state" then
      new, data, actions = state, a, b
   elseif r == "keep_state_and_data" then
      new, actions = state, a
   elseif r == "repeat_state" then
      new, data, actions, repeat_enter = state, a, b, true
   elseif r == "repeat_state_and_data" then
      new, actions, repeat_enter = state, a, true
   elseif r == "stop" then
      return a, b
   else
      fail(string.format("bad return from %s for %s: %s", mod_name, etype, tostring(r)))
   end
   local old = state
   local changed = new ~= old
   if changed then cancel("state") end
   state = new
   local postpone, event_timeout, inserted = apply_actions(actions, false)
   if postpone then postponed[#postponed + 1] = { etype, content, from } end
   if changed and #postponed > 0 then
      push_front(postponed)
      postponed = {}
   end
   if inserted then push_front(inserted) end
   -- repeat_state: the enter call runs again for the same state
   if (changed or repeat_enter) and mod.state_enter then
      local reason, d = enter(old)
      if reason ~= nil then return reason, d end
   end
   -- an event timeout starts only when no event is already waiting
   if event_timeout and qhead > qtail then
      arm("event", "timeout", event_timeout[2], event_timeout[3])
   end
end

-- Maps an inbox message to an event; nil for a stale timeout. Returns a stop as
-- "stop", reason. A malformed protocol message (or a code change, which machines do not
-- take) is an info event.
local function classify(m)
   local tag = gen.protocol(m)
   if tag == "call" then return "call", m.req, m.from end
   if tag == "cast" then return "cast", m.msg end
   if tag == "stop" then return "stop", m.reason end
   if tag == "get_state" then
      gen.reply(m.from, { state, data }, "gen_statem")
      return nil
   end
   if tag == "replace_state" then
      local new, err = gen.run_replace(m.req, { state, data })
      if not err and type(new) ~= "table" then err = "fn must return {state, data}" end
      if not err then state, data = new[1], new[2] end
      gen.reply(m.from, err and { error = err } or { state = { state, data } }, "gen_statem")
      return nil
   end
   if type(m) == "table" and rawget(m, gen.TAG) == "statem_timeout" and type(m.key) == "string"
      and type(m.ref) == "number" and type(m.etype) == "string" then
      local t = timers[m.key]
      if not t or t.ref ~= m.ref then return nil end
      timers[m.key] = nil
      return m.etype, m.msg
   end
   return "info", m
end

-- An exit signal: shutdown -> handle_shutdown (default stop), the parent's exit -> stop,
-- others -> an info event. Returns the event triple or "stop", reason.
local function exit_signal(sig)
   if sig.reason == "shutdown" then
      if not mod.handle_shutdown then return "stop", "shutdown" end
      local r, a, b = mod.handle_shutdown(state, data)
      if r == "stop" then
         data = b
         return "stop", a
      end
      if r ~= "keep_state" then
         fail("bad return from " .. mod_name .. ".handle_shutdown: " .. tostring(r))
      end
      data = a
      return nil
   end
   if gen.from_parent(sig) then return "stop", sig.reason end
   return "info", sig
end

-- The event loop: returns the stop reason.
local function loop()
   local receive = gen.receive
   local changes = reload_raw.changes
   while true do
      local etype, content, from
      if qhead <= qtail then
         local ev = queue[qhead]
         queue[qhead] = nil
         qhead = qhead + 1
         etype, content, from = ev[1], ev[2], ev[3]
      else
         qhead, qtail = 1, 0 -- drained: every taken slot was cleared
         local signal, m = receive()
         if signal then
            etype, content = exit_signal(m)
         else
            etype, content, from = classify(m)
         end
      end
      -- the callback module was reloaded: convert state and data before this event
      if changes[mod_name] then
         state, data = require("smarm.reload").convert(mod, mod_name, state, data)
         if handler then handler = mod.handle_event end
      end
      if etype == "stop" then return content end
      if etype then
         local reason, d = handle_event(etype, content, from)
         if reason ~= nil then
            data = d
            return reason
         end
      end
   end
end

local function terminate(reason)
   if mod.terminate then mod.terminate(reason, state, data) end
end

-- The machine body behind run (and so start).
local function serve(module, args, opts)
   gen.route()
   mod, mod_name = gen.load_module("gen_statem", module), module
   -- from here a reload of the callback module is recorded for its code_change
   reload_raw.behaviour()
   if mod.callback_mode == "handle_event_function" then
      handler = mod.handle_event
      if type(handler) ~= "function" then
         gen.started(false, "gen_statem: " .. module .. " has no handle_event")
         error("gen_statem: " .. module .. " has no handle_event", 0)
      end
   elseif mod.callback_mode ~= nil and mod.callback_mode ~= "state_functions" then
      gen.started(false, "gen_statem: bad callback_mode")
      error("gen_statem: " .. module .. ": bad callback_mode " .. tostring(mod.callback_mode), 0)
   end
   local named, err = gen.begin(opts.name)
   if not named then return smarm.exit(err) end
   if opts.trap_exit then gen.trap_exit() end
   local iok, s, d, actions = pcall(mod.init, args)
   if not iok then
      gen.started(false, s)
      error(s, 0)
   end
   if s == nil then
      local why = d == nil and "init_failed" or d
      gen.started(false, why)
      return gen.finish(why)
   end
   state, data = s, d
   gen.started(true)
   local rok, reason = pcall(function()
      local _, event_timeout, inserted = apply_actions(actions, false)
      if inserted then push_front(inserted) end
      if mod.state_enter then
         local r, dd = enter(state)
         if r ~= nil then
            data = dd
            return r
         end
      end
      if event_timeout and not inserted then
         arm("event", "timeout", event_timeout[2], event_timeout[3])
      end
      return loop()
   end)
   if not rok then
      pcall(terminate, "error")
      error(reason, 0)
   end
   terminate(reason)
   return gen.finish(reason)
end

--- Runs a machine inline as the current actor (a supervisor child's function, and the
-- body of a started machine): registers opts.name, reports started once init returned,
-- and returns when the machine stops normally (other reasons exit the actor).
-- @param module the callback module's name
-- @param args passed to init
-- @param opts {name = registered name, trap_exit = bool}
function M.run(module, args, opts)
   return gen.run_inline("gen_statem.run", serve, module, args, opts)
end

return M
