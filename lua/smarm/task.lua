--- smarm.task: run a function in a linked actor and wait for its results later
-- (Elixir's Task.async/await). The task actor sends its results on a channel made for
-- it, so the caller's inbox is never touched; a monitor tells await of a task that died
-- without answering (killed while the caller traps exits).
local smarm = require "smarm"

local M = {}

local task_mt = {
   __tostring = function(t) return "task " .. smarm.pid_tostring(t.pid) end,
}

-- The task actor's body: runs fn and sends {ok, n, results...} or {false, err}.
local function run(tx, code, name, ...)
   local fn = assert(loadstring(code, name))
   local function pack(ok, ...) return { ok, select("#", ...), ... } end
   local r = pack(xpcall(fn, function(e)
      if type(e) == "string" then return debug.traceback(e, 2) end
      return e
   end, ...))
   if not r[1] then r = { false, 1, r[3] } end
   local ok, err = pcall(tx.send, tx, r)
   if not ok then
      tx:send({ false, 1, "smarm.task: the results cannot be sent back: " .. tostring(err) })
   end
end

--- Starts fn(...) in a new actor linked to the caller.
-- @param fn a function without upvalues (as for smarm.spawn)
-- @return a task for await
function M.async(fn, ...)
   if type(fn) ~= "function" then
      error("smarm.task.async: a function expected, got " .. type(fn), 2)
   end
   local up = debug.getupvalue(fn, 1)
   if up then
      error("smarm.task.async: the function has upvalues (" .. up .. "); pass values as "
         .. "arguments and require modules inside it", 2)
   end
   local info = debug.getinfo(fn, "S")
   local tx, rx = smarm.channel()
   local ok, pid, mon = pcall(smarm.spawn_opt, { link = true, monitor = true }, run, tx,
      string.dump(fn), info.source, ...)
   tx:release()
   if not ok then
      error(pid, 2)
   end
   return setmetatable({ pid = pid, owner = smarm.self(), rx = rx, mon = mon }, task_mt)
end

local function finish(t)
   t.done = true
   t.rx = nil -- the channel goes with its last endpoint
   smarm.demonitor(t.mon)
end

--- Waits for a task's results.
-- @param t a task made by async in this actor
-- @param timeout seconds (nil = forever)
-- @return fn's results | nil, "timeout" (the task keeps running; await may be called again)
-- An error in fn is raised here, as is the death of the task without results.
function M.await(t, timeout)
   if getmetatable(t) ~= task_mt then error("smarm.task.await: a task expected", 2) end
   if t.owner ~= smarm.self() then
      error("smarm.task.await: " .. tostring(t) .. " belongs to another actor", 2)
   end
   if t.done then error("smarm.task.await: " .. tostring(t) .. " was awaited already", 2) end
   -- the results come first when they and the down notice are both ready
   local i, v = smarm.select({ t.rx, t.mon }, timeout)
   if not i then return nil, "timeout" end
   if i == 1 and v == nil then
      -- the channel closed without results: the task died (its down notice follows)
      i, v = 2, t.mon:recv(5) or { reason = "unknown" }
   end
   finish(t)
   if i == 2 then
      error("smarm.task.await: " .. tostring(t) .. " ended without results (reason: "
         .. tostring(v.reason) .. ")", 2)
   end
   if not v[1] then
      local e = v[3]
      if type(e) == "string" then
         error("smarm.task: " .. tostring(t) .. " failed: " .. e, 2)
      end
      error(e, 2)
   end
   return unpack(v, 3, v[2] + 2)
end

--- Stops a task that is no longer wanted (unlinks first, so the caller is not hit).
function M.shutdown(t)
   if getmetatable(t) ~= task_mt then error("smarm.task.shutdown: a task expected", 2) end
   if t.done then return end
   smarm.unlink(t.pid)
   smarm.kill(t.pid)
   finish(t)
end

return M
