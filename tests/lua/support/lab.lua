--- A gen_statem callback module (state_functions) for the gen_statem specs: states "idle"
-- and "busy"; every event worth checking is reported to data.report as a table.
local gen_statem = require "smarm.gen_statem"
local smarm = require "smarm"

local M = {}

M.callback_mode = "state_functions"

local function report(data, t) smarm.send(data.report, t) end

--- args: {report = pid, enter = bool (state enter calls), trap = bool}
function M.init(args)
   M.state_enter = args.enter
   if args.trap then gen_statem.trap_exit() end
   return "idle", { report = args.report, log = {} }
end

-- Events both states handle alike; nil if the event is not one of them.
local function common(state, event, content, data, from)
   local op = type(content) == "table" and content[1] or content
   if event == "enter" then
      report(data, { enter = state, old = content })
      return "keep_state", data
   elseif event == "state_timeout" or event == "timeout" or event == "generic_timeout" then
      report(data, { fired = event, msg = content, state = state, at = smarm.now() })
      return "keep_state", data
   elseif event == "info" then
      report(data, { info = content, state = state })
      return "keep_state", data
   elseif event == "internal" then
      data.log[#data.log + 1] = content
      return "keep_state", data
   elseif event == "call" and op == "state" then
      return "keep_state", data, { { "reply", from, state } }
   elseif event == "call" and op == "log" then
      return "keep_state", data, { { "reply", from, data.log } }
   elseif event == "call" and op == "stop" then
      gen_statem.reply(from, "stopping")
      return "stop", "normal", data
   elseif event == "cast" and op == "state_timeout" then
      return "keep_state", data, { { "state_timeout", content[2], content[3] or "st" } }
   elseif event == "cast" and op == "timeout" then
      return "keep_state", data, { { "timeout", content[2], content[3] or "ev" } }
   elseif event == "cast" and op == "generic" then
      return "keep_state", data, { { "generic_timeout", content[2], content[3], content[2] } }
   elseif event == "cast" and op == "next" then
      -- inserted events run before anything else, in order
      local actions = {}
      for i = 2, #content do actions[#actions + 1] = { "next_event", "internal", content[i] } end
      return "keep_state", data, actions
   elseif event == "cast" and op == "ping" then
      report(data, { ping = content[2], state = state })
      return "keep_state", data
   elseif event == "cast" and op == "crash" then
      error("lab crashed")
   end
end

function M.idle(event, content, data, from)
   local op = type(content) == "table" and content[1] or content
   if event == "cast" and op == "work" then
      -- optional actions ride along with the transition
      return "next_state", "busy", data, content[2]
   elseif event == "cast" and op == "job" then
      data.log[#data.log + 1] = content[2]
      return "keep_state", data
   elseif event == "call" and op == "job" then
      data.log[#data.log + 1] = content[2]
      return "keep_state", data, { { "reply", from, "done " .. content[2] } }
   end
   local r, a, b, c = common("idle", event, content, data, from)
   if r then return r, a, b, c end
   return "keep_state", data
end

function M.busy(event, content, data, from)
   local op = type(content) == "table" and content[1] or content
   if op == "job" then
      -- not now: replayed once the state changes
      return "keep_state", data, { { "postpone" } }
   elseif event == "cast" and op == "done" then
      return "next_state", "idle", data
   end
   local r, a, b, c = common("busy", event, content, data, from)
   if r then return r, a, b, c end
   return "keep_state", data
end

function M.terminate(reason, state, data)
   if data.report then report(data, { terminated = reason, state = state }) end
end

return M
