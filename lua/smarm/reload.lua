--- smarm.reload: the actor's half of hot code reload. A reload publishes a new version of a
-- module runtime-wide (smarm.reload, the runtime's module cache); each actor that has the
-- module loaded takes it here, at its next safe point (a recv, select, sleep or yield
-- returning): the new version's chunk runs in the actor and its table is merged into the
-- one in package.loaded, so every holder of that table calls the new functions from its
-- next call. Then the actor's on_reload hooks run, and a gen_server or gen_statem whose
-- callback module it is converts its state at its next message boundary (convert).
local raw = require "smarm.reload.raw"

local M = {}

-- on_reload hooks of this actor, in registration order
local hooks = {}

--- Modules taken since the behaviour running here last converted: name -> the version it
-- ran before (read by gen_server and gen_statem once per message, as raw.changes: they load
-- this module only once a change is there; keep it a plain table).
M.changes = raw.changes
local changes = M.changes

-- name -> {key -> {previous value}}: what the takes since the last conversion replaced or
-- added in the module's table (the first previous value of each key), so that a failed
-- code_change can put the old code back
local undo = {}

local function report(name, vsn, what)
   raw.report("reload", string.format("%s version %s: %s", name, tostring(vsn), what))
end

-- Merges new into t in place (raw.patch: functions replaced, new fields added, other
-- values kept; the new functions' upvalue holding their own module table is pointed at t),
-- recording what it changed since the last conversion.
local function patch(name, t, new)
   local u = undo[name] or {}
   undo[name] = u
   raw.patch(t, new, u)
end

-- Puts back what the takes since the last conversion changed in module name's table.
local function revert(name)
   local u, t = undo[name], package.loaded[name]
   undo[name] = nil
   if not u or type(t) ~= "table" then return end
   for k, box in pairs(u) do rawset(t, k, box[1]) end
end

local function take_one(name, loaded)
   local before = loaded[name]
   local chunk, vsn = raw.newest(name)
   if not chunk then return report(name, "?", vsn) end
   -- noted first: a version that fails here is not tried again at every safe point
   loaded[name] = vsn
   local t = package.loaded[name]
   -- a module that is not a table has nothing to patch (its next require loads the newest)
   if type(t) ~= "table" then return end
   local ok, new = pcall(chunk, name)
   if not ok then return report(name, vsn, "failed to load (kept the old code): "
      .. tostring(new)) end
   if type(new) ~= "table" then
      return report(name, vsn, "did not return a table (kept the old code)")
   end
   patch(name, t, new)
   -- only a code_change can fail and want the old code back
   if new.code_change == nil then undo[name] = nil end
   if changes[name] == nil then changes[name] = before end
   for _, fn in ipairs(hooks) do
      local hok, err = pcall(fn, name, vsn)
      if not hok then report(name, vsn, "on_reload hook failed: " .. tostring(err)) end
   end
end

--- The safe-point step (called by the runtime): takes the newest version of every file
-- module this actor loaded that was reloaded since.
function M.take()
   local loaded = raw.loaded()
   local todo
   for name, have in pairs(loaded) do
      local now = raw.version(name)
      if now and now > have then
         todo = todo or {}
         todo[#todo + 1] = name
      end
   end
   if not todo then return end
   for _, name in ipairs(todo) do take_one(name, loaded) end
end

--- Adds a hook: fn(module, version) runs in this actor after it took a new version.
function M.on_reload(fn)
   hooks[#hooks + 1] = fn
end

--- The version of module name this actor runs (0 if it never took a reload of it).
function M.taken(name)
   return raw.loaded()[name] or 0
end

--- For a behaviour at a message boundary, once changes[name] is set: runs the callback
-- module's code_change(old_vsn, ...) (the behaviour's state values; extra is nil) and
-- returns the converted values. A code_change that raises or returns nil puts the old
-- code back, is reported, and the given values are returned unchanged.
function M.convert(mod, name, ...)
   local old_vsn = changes[name]
   changes[name] = nil
   local cc = mod.code_change
   if not cc then
      undo[name] = nil
      return ...
   end
   local ok, a, b = pcall(cc, old_vsn, ...)
   if ok and a ~= nil then
      undo[name] = nil
      return a, b
   end
   revert(name)
   report(name, M.taken(name), "code_change " .. (ok and "returned nil" or "failed: "
      .. tostring(a)) .. " (kept the old code and state)")
   return ...
end

return M
