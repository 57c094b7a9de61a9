--- A gen_server callback module for the OTP-habits specs: every info message, down notice
-- and exit signal is reported to the test actor (args.report), and calls exercise the
-- return forms (timeouts, continue, hibernate, bad returns).
local smarm = require "smarm"

local M = {}

local function report(state, what, v)
   smarm.send(state.report, { what = what, v = v })
end

function M.init(args)
   local state = { report = args.report, n = 0 }
   if args.continue then return state, { continue = "from_init" } end
   return state
end

function M.handle_call(req, from, state)
   local op = req[1]
   if op == "whoami" then return "reply", from.pid, state end
   if op == "monitor" then
      local mon = smarm.monitor(req[2])
      return "reply", mon.ref, state
   end
   if op == "spawn_monitor" then
      local pid, mon = smarm.spawn_monitor(function()
         require("smarm").recv()
      end)
      return "reply", { pid, mon.ref }, state
   end
   if op == "demonitor" then
      local mon = smarm.monitor(req[2])
      smarm.demonitor(mon)
      return "reply", true, state
   end
   if op == "trap_and_link" then
      smarm.trap_exit(true)
      local pid = smarm.spawn_link(function()
         require("smarm").recv()
         error("linked child failed")
      end)
      return "reply", pid, state
   end
   if op == "reply_timeout" then return "reply", "ok", state, req[2] end
   if op == "noreply_timeout" then
      smarm.send(from.pid, "early")
      return "noreply", state, req[2]
   end
   if op == "continue" then return "reply", "ok", state, { continue = req[2] } end
   if op == "hibernate" then return "reply", "ok", state, "hibernate" end
   if op == "bad" then return "bogus", state end
   if op == "bad_extra" then return "reply", 1, state, "soon" end
   if op == "get" then return "reply", state.n, state end
   return "reply", "unknown", state
end

function M.handle_cast(msg, state)
   state.n = state.n + 1
   if msg == "bad" then return { "noreply" }, state end
   return "noreply", state
end

function M.handle_info(msg, state)
   report(state, "info", msg)
   return "noreply", state
end

function M.handle_continue(x, state)
   report(state, "continue", x)
   return "noreply", state
end

return M
