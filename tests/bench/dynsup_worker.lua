--- The child of tests/bench/dynsup.lua: says it is up, then waits.
local smarm = require "smarm"

local M = {}

function M.run(collector)
   smarm.send(collector, true)
   smarm.recv()
end

return M
