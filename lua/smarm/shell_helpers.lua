--- The shell's helpers, named after what Erlang users type: i(), tree(), info(pid),
-- flush(), pid("<0.12.1>"), reload("module"), kill(pid), help(). Introspection fields that
-- a build lacks (smarm.tree, an actor's current function or slices) are shown as such.
local smarm = require "smarm"
local pretty = require "smarm.shell_pretty"

local M = {}

local HELP = [[
i()               live actors: pid, name, current function, memory, mailbox, slices
tree()            the supervision forest
info(pid)         facts about one actor (pid: a number, "<0.12.1>" or a registered name)
flush()           print and drop the messages in this shell's inbox
pid("<0.12.1>")   the pid written so
reload("module")  load a new version of a module into every actor that has it
kill(pid)         stop an actor at once
help()            this list
An expression prints its values; `local x = 1` keeps x for the lines after.
Ctrl-C stops a running evaluation; Ctrl-C at an empty prompt twice, or Ctrl-D, leaves.
]]

--- The pid that p names: a pid number, "<0.IDX.GEN>", or a registered name.
-- @return pid | nil, why
local function to_pid(p, fname)
   if type(p) == "number" then return p end
   if type(p) == "string" then
      local idx, gen = p:match("^<0%.(%d+)%.(%d+)>$")
      if idx then return tonumber(gen) * 16777216 + tonumber(idx) end
      local pid = smarm.whereis(p)
      if pid then return pid end
      error(fname .. ": no actor is registered as " .. p, 3)
   end
   error(fname .. ": a pid, \"<0.IDX.GEN>\" or a name expected, got " .. type(p), 3)
end

local function fit(s, w)
   s = tostring(s or "")
   if #s > w then return s:sub(1, w - 1) .. "~" end
   return s
end

local function pid_text(p)
   return p and smarm.pid_tostring(p) or "-"
end

--- Puts the helpers in g; out(text) is how they print.
function M.install(g, out)
   local function say(...)
      out(table.concat({ ... }) .. "\n")
   end

   g.smarm = smarm

   function g.help()
      out(HELP)
   end

   function g.pid(p)
      return to_pid(p, "pid")
   end

   function g.i()
      local rows = smarm.snapshot()
      table.sort(rows, function(a, b) return a.pid % 16777216 < b.pid % 16777216 end)
      local fmt = "%-14s %-20s %-28s %10s %7s %8s"
      say(string.format(fmt, "pid", "name", "current", "memory", "mailbox", "slices"))
      for _, r in ipairs(rows) do
         say(string.format(fmt, pid_text(r.pid), fit(r.name, 20), fit(r.current or r.state, 28),
            tostring(r.memory), tostring(r.mailbox), tostring(r.slices or r.timeslices or "-")))
      end
      say(#rows .. " actors")
   end

   function g.info(p)
      local pid = to_pid(p, "info")
      local t = smarm.info(pid)
      if not t then return nil, pid_text(pid) .. " is not alive" end
      return t
   end

   local function show_tree(nodes, indent)
      for _, n in ipairs(nodes) do
         local parts = { indent, pid_text(n.pid) }
         if n.id ~= nil then parts[#parts + 1] = " " .. tostring(n.id) end
         if n.name then parts[#parts + 1] = " (" .. tostring(n.name) .. ")" end
         if n.type then parts[#parts + 1] = " " .. tostring(n.type) end
         say(table.concat(parts))
         if n.children then show_tree(n.children, indent .. "  ") end
      end
   end

   function g.tree()
      if type(smarm.tree) ~= "function" then
         error("tree: smarm.tree is not in this build", 2)
      end
      local forest = smarm.tree()
      if #forest == 0 then say("(no supervision tree)") end
      show_tree(forest, "")
   end

   function g.flush()
      while true do
         local m, why = smarm.recv(0)
         if m == nil and why == "timeout" then return end
         say("Shell got ", pretty.value(m))
      end
   end

   function g.reload(module)
      if type(module) ~= "string" then
         error("reload: a module name expected, got " .. type(module), 2)
      end
      if type(smarm.reload) ~= "function" then
         error("reload: smarm.reload is not in this build", 2)
      end
      return smarm.reload(module)
   end

   function g.kill(p)
      local pid = to_pid(p, "kill")
      smarm.kill(pid)
      return true
   end
end

return M
