--- The Switch: a gen_statem in state_functions mode with enter calls. A "flip" cast
-- toggles it between "off" and "on"; data counts the flips that switched it on and the
-- enter calls (one on start, one per state change — none for an event that stays).
-- A "get" call answers {state, flips, enters}.
local M = {}

M.callback_mode = "state_functions"
M.state_enter = true

function M.init()
   return "off", { flips = 0, enters = 0 }
end

-- The events both states treat alike.
local function common(name, event, content, data, from)
   if event == "enter" then
      data.enters = data.enters + 1
      return "keep_state", data
   elseif event == "call" and content == "get" then
      return "keep_state", data,
         { { "reply", from, { state = name, flips = data.flips, enters = data.enters } } }
   end
   -- anything else (e.g. a "stay" cast) keeps the state: no enter call
   return "keep_state", data
end

function M.off(event, content, data, from)
   if event == "cast" and content == "flip" then
      data.flips = data.flips + 1
      return "next_state", "on", data
   end
   return common("off", event, content, data, from)
end

function M.on(event, content, data, from)
   if event == "cast" and content == "flip" then
      return "next_state", "off", data
   end
   return common("on", event, content, data, from)
end

return M
