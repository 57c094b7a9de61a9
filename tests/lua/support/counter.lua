--- A gen_server callback module for the gen_server specs: a counter with a
-- few test hooks (sleeps, deferred replies, stops, errors, exit signals).
local gen_server = require "smarm.gen_server"
local smarm = require "smarm"

local M = {}

--- args: {start = n, fail = reason, raise = msg, trap = bool, report = pid,
--  keep_on_shutdown = bool}
function M.init(args)
   args = args or {}
   if args.raise then error(args.raise) end
   if args.fail then return nil, args.fail end
   if args.trap then gen_server.trap_exit() end
   return { n = args.start or 0, report = args.report, keep = args.keep_on_shutdown }
end

function M.handle_call(req, from, state)
   local op = type(req) == "table" and req[1] or req
   if op == "get" then
      return "reply", state.n, state
   elseif op == "add" then
      state.n = state.n + req[2]
      return "reply", state.n, state
   elseif op == "sleep" then
      smarm.sleep(req[2])
      return "reply", "slept", state
   elseif op == "defer" then
      -- hand the reply handle to another actor, which answers for us
      smarm.send(req[2], { from = from, value = state.n })
      return "noreply", state
   elseif op == "keep" then
      -- answer, and keep the reply handle past its reply
      state.kept = from
      return "reply", "kept", state
   elseif op == "reply_kept" then
      -- a second reply through the kept handle: what gen_server.reply returned
      return "reply", { gen_server.reply(state.kept, "again") }, state
   elseif op == "nil" then
      return "reply", nil, state
   elseif op == "stop" then
      return "stop", req[2] or "normal", "stopping", state
   elseif op == "crash" then
      error("counter crashed on purpose")
   elseif op == "spawn_linked" then
      -- a linked actor that crashes when told to
      return "reply", smarm.spawn_link(function()
         require("smarm").recv(5)
         error("linked crash")
      end), state
   elseif op == "bad" then
      return "whatever", state
   end
   return "reply", { unknown = op }, state
end

function M.handle_cast(msg, state)
   if type(msg) == "table" and msg[1] == "add" then
      state.n = state.n + msg[2]
   elseif msg == "stop" then
      return "stop", "normal", state
   elseif msg == "crash" then
      error("cast crash")
   end
   return "noreply", state
end

function M.handle_info(msg, state)
   if state.report then smarm.send(state.report, { info = msg }) end
   if msg == "tick" then state.n = state.n + 1 end
   return "noreply", state
end

function M.handle_shutdown(state)
   if state.report then smarm.send(state.report, { shutdown = true }) end
   if state.keep then return "noreply", state end
   return "stop", "shutdown", state
end

function M.terminate(reason, state)
   if state.report then smarm.send(state.report, { terminated = reason, n = state.n }) end
end

return M
