--- A supervisor child whose own code uses no base library function (supervisor_spec): it
-- reports whether its state has opened that library, then waits. `debug` opens the debug
-- library alone, and the registry's _LOADED holds _G once the base library is open.
local smarm = require "smarm"

local M = {}

--- Reports {base_open = boolean, pid = self} to collector.
function M.run(collector)
   local loaded = debug.getregistry()._LOADED
   smarm.send(collector, { base_open = loaded._G ~= nil, pid = smarm.self() })
   smarm.recv()
end

M.number = 42

return M
