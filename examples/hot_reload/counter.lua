-- The counter server of the hot reload example (a gen_server callback module). Edit it
-- while the example runs under --watch: the server takes the new code at its next message,
-- runs code_change, and goes on with its count.
local M = {}

function M.init(start)
   return { count = start or 0 }
end

function M.handle_cast(msg, state)
   if msg == "tick" then state.count = state.count + 1 end -- try: + 10
   return "noreply", state
end

function M.handle_call(req, _, state)
   if req == "count" then return "reply", state.count, state end
   return "reply", nil, state
end

-- runs once per reload, in the server, before its next message; returns the state to go on
-- with (an error here keeps the old code and the old state)
function M.code_change(old_vsn, state)
   print(string.format("counter: code_change from version %d, count %d kept", old_vsn,
      state.count))
   return state
end

return M
