-- The gen_server callback module of the call benchmark: replies request + 1.
local M = {}

function M.init(n) return n end

function M.handle_call(req, _, state) return "reply", req + 1, state end

return M
