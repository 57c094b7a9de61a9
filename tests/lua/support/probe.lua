--- A callback module that serves as both a gen_server and a gen_statem (state_functions):
-- its init reports which behaviour modules its actor has loaded, then it idles.
local smarm = require "smarm"

local M = {}

M.callback_mode = "state_functions"

--- args: {report = pid}
function M.init(args)
   local loaded = {}
   for _, name in ipairs({ "smarm.gen", "smarm.gen_server", "smarm.gen_statem" }) do
      loaded[name] = package.loaded[name] ~= nil
   end
   smarm.send(args.report, { loaded = loaded })
   return "idle", {}
end

function M.idle(_, _, data)
   return "keep_state", data
end

function M.handle_info(_, state)
   return "noreply", state
end

return M
