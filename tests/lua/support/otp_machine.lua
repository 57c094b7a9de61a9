--- A gen_statem callback module for the OTP-habits specs: keep_state_and_data and
-- repeat_state; every enter call is reported to args.report with its count.
local smarm = require "smarm"

local M = {}

M.state_enter = true

function M.init(args)
   return "idle", { report = args.report, enters = 0 }
end

function M.idle(etype, content, data, from)
   if etype == "enter" then
      data.enters = data.enters + 1
      smarm.send(data.report, { what = "enter", v = data.enters })
      return "keep_state", data
   end
   if content == "keep" then return "keep_state_and_data", { { "reply", from, "same" } } end
   if content == "repeat" then return "repeat_state", data, { { "reply", from, "again" } } end
   return "keep_state_and_data"
end

return M
