-- A gen_server for jit_params_spec: replies n + 1 to a number, and to "counts" the trace
-- events of its own state since it started (support.jit_probe's trace_counts).
local M = {}

function M.init() return require("support.jit_probe").trace_counts() end

function M.handle_call(req, _, counts)
   if req == "counts" then
      return "reply",
         { stop = counts.stop, abort = counts.abort, loop_too_short = counts.loop_too_short },
         counts
   end
   return "reply", req + 1, counts
end

return M
