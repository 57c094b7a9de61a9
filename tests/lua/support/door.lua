--- A gen_statem callback module in handle_event_function mode: a code lock. Buttons
-- (casts {"button", digit}) unlock it when they spell the code; it locks again after a
-- state_timeout of args.open_for seconds.
local M = {}

M.callback_mode = "handle_event_function"
M.state_enter = true

function M.init(args)
   return "locked", { code = args.code, open_for = args.open_for, pressed = "", opened = 0 }
end

function M.handle_event(event, content, state, data, from)
   if event == "enter" then
      if state == "open" then
         data.opened = data.opened + 1
         return "keep_state", data, { { "state_timeout", data.open_for, "lock" } }
      end
      data.pressed = ""
      return "keep_state", data
   elseif event == "call" then
      return "keep_state", data, { { "reply", from, { state = state, opened = data.opened } } }
   elseif state == "locked" and event == "cast" and content[1] == "button" then
      data.pressed = data.pressed .. content[2]
      if data.pressed == data.code then return "next_state", "open", data end
      if #data.pressed >= #data.code then data.pressed = "" end
      return "keep_state", data
   elseif state == "open" and event == "state_timeout" then
      return "next_state", "locked", data
   end
   return "keep_state", data
end

return M
