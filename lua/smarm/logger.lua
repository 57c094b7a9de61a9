--- smarm.logger: OTP's logger for smarm-lua. Levels, a metadata table per actor, and
-- handlers: the default one writes to stderr from the actor that logs; the others (a file,
-- a user function) run in handler actors fed by the logger actor, registered as
-- "smarm.logger" and started by the first configuration call. Crash reports, supervisor
-- reports and the runtime's own warnings are events too.
--
-- The configuration every actor reads (primary level, whether the default handler is on,
-- whether other handlers exist) sits in a shared table the logger actor owns, so a log
-- call below the level costs one table lookup and sends nothing.
local smarm = require "smarm"

local M = {}

local LEVELS = {
   emergency = 0, alert = 1, critical = 2, error = 3, warning = 4, notice = 5, info = 6,
   debug = 7,
}
local DEFAULT = { level = LEVELS.notice, default = true, forward = false }
local NAME = "smarm.logger"
local TIMEOUT = 5

M.levels = LEVELS

-- ---- the calling actor's side ----

local config_table -- this actor's handle on the configuration table, once it exists
local metadata = {}

local function config()
   if not config_table then
      config_table = smarm.table.open(NAME)
      if not config_table then return DEFAULT end
   end
   local ok, cfg = pcall(config_table.lookup, config_table, "config")
   if not ok or not cfg then
      config_table = nil -- the logger went; a new one may come
      return DEFAULT
   end
   return cfg
end

local function wall_time()
   return tonumber(require("smarm.ffi").smarm_ffi_wall_time())
end

local function check_level(level, fname)
   local n = LEVELS[level]
   if not n then
      error("smarm.logger." .. fname .. ": unknown level " .. tostring(level)
         .. " (emergency, alert, critical, error, warning, notice, info, debug)", 3)
   end
   return n
end

local function stamp(t)
   local s = math.floor(t)
   return os.date("!%Y-%m-%dT%H:%M:%S", s) .. string.format(".%06d+00:00", (t - s) * 1e6)
end

local function legacy_stamp(t)
   local s = math.floor(t)
   return os.date("!%d-%b-%Y::%H:%M:%S", s):gsub("^0", "") .. string.format(".%06d", (t - s) * 1e6)
end

local function show(v)
   if type(v) == "number" and v >= 2 ^ 24 and v == math.floor(v) then
      local ok, s = pcall(smarm.pid_tostring, v)
      if ok then return s end
   end
   if type(v) ~= "table" then return tostring(v) end
   local parts = {}
   for k, x in pairs(v) do parts[#parts + 1] = tostring(k) .. "=" .. show(x) end
   table.sort(parts)
   return "{" .. table.concat(parts, ", ") .. "}"
end

--- An event as text, the way OTP's formatter writes it: "TIME LEVEL: MSG" for a message,
-- the "=CRASH REPORT====" / "=SUPERVISOR REPORT====" blocks for reports.
-- @param event a logger event
-- @return a string ending in a newline
function M.format(event)
   local kind = event.kind
   if kind == "crash_report" then
      return ("=CRASH REPORT==== %s ===\n  crasher:\n    pid: %s\n    reason: %s: %s\n")
         :format(legacy_stamp(event.time), show(event.pid), event.what, event.text)
   elseif kind == "supervisor_report" then
      local r = event.report
      return ("=SUPERVISOR REPORT==== %s ===\n    supervisor: %s\n    errorContext: %s\n"
         .. "    reason: %s\n    offender: [{pid,%s},{id,%s}]\n")
         :format(legacy_stamp(event.time), show(r.supervisor), r.errorContext, show(r.reason),
            show(r.offender.pid), show(r.offender.id))
   end
   return ("%s %s: %s\n"):format(stamp(event.time), event.level, event.msg or show(event.report))
end

-- Hands an event to the default handler (stderr, here) and to the logger actor.
local function emit(event, cfg)
   if cfg.default then
      io.stderr:write(M.format(event))
      io.stderr:flush()
   end
   if cfg.forward then smarm.send(NAME, { smarm_log = event }) end
end

local function copy(t)
   local c = {}
   for k, v in pairs(t) do c[k] = v end
   return c
end

-- Logs for M.log and the level functions, each of which calls it (not as a tail call), so
-- the caller's file and line are 3 levels up.
local function log_at(level, fmt, ...)
   local n = check_level(level, "log")
   local cfg = config()
   if n > cfg.level then return end
   local event = { level = level, kind = "log", time = wall_time() }
   if type(fmt) == "table" then
      event.report = fmt
   elseif select("#", ...) > 0 then
      event.msg = string.format(fmt, ...)
   else
      event.msg = tostring(fmt)
   end
   local meta = copy(metadata)
   meta.pid = smarm.self()
   local info = debug.getinfo(3, "Sl")
   if info then
      meta.file, meta.line = info.short_src, info.currentline
   end
   event.meta = meta
   emit(event, cfg)
end

--- Logs at level: fmt and its arguments as string.format takes them, or a report table
-- (OTP's logger:error(#{...})).
function M.log(level, fmt, ...)
   log_at(level, fmt, ...)
end

for name in pairs(LEVELS) do
   M[name] = function(fmt, ...)
      log_at(name, fmt, ...)
   end
end

--- A structured report (crash, supervisor) made by the library: kind names it.
function M.report(level, kind, report)
   local cfg = config()
   if check_level(level, "report") > cfg.level then return end
   local event = { level = level, kind = kind, report = report, time = wall_time(),
      meta = { pid = smarm.self(), domain = { "otp", "sasl" } } }
   emit(event, cfg)
end

--- This actor's metadata, added to each event it logs (OTP's logger:set_process_metadata).
function M.set_metadata(t)
   if type(t) ~= "table" then error("smarm.logger.set_metadata: a table expected", 2) end
   metadata = copy(t)
end

function M.update_metadata(t)
   if type(t) ~= "table" then error("smarm.logger.update_metadata: a table expected", 2) end
   for k, v in pairs(t) do metadata[k] = v end
end

function M.get_metadata() return copy(metadata) end

function M.unset_metadata() metadata = {} end

-- ---- the logger actor ----

-- The body of a handler actor: fn(event, config) for each event; an error removes it.
function M.handler_body(code, name, conf)
   local s = require "smarm"
   local fn = assert(loadstring(code, "=logger handler " .. name))
   while true do
      local event = s.recv()
      local ok, err = pcall(fn, event, conf)
      if not ok then
         io.stderr:write("smarm: logger handler ", name, " failed and is removed: ",
            tostring(err), "\n")
         s.exit("handler_failed")
      end
   end
end

-- The logger actor's body (no upvalues: it is spawned).
function M.server_body()
   local s = require "smarm"
   local ffi_c = require "smarm.ffi"
   local LV = require("smarm.logger").levels
   local handler_body = require("smarm.logger").handler_body
   local t = s.table.new("smarm.logger", { access = "protected" })
   local cfg = { level = 5, default = true, forward = false }
   local handlers = {} -- name -> {pid, level}
   local trap = s.trap_exit(true)

   local function publish()
      cfg.forward = next(handlers) ~= nil
      t:insert("config", cfg)
      ffi_c.smarm_ffi_log_flags((cfg.default and 0 or 1) + (cfg.forward and 2 or 0))
   end
   publish()

   local function remove(name)
      local h = handlers[name]
      if not h then return false end
      handlers[name] = nil
      s.unlink(h.pid)
      s.kill(h.pid)
      publish()
      return true
   end

   local ops = {}
   function ops.add_handler(req)
      if req.name == "default" then return false, "the name default is taken" end
      if handlers[req.name] then return false, "a handler named " .. req.name .. " exists" end
      local pid = s.spawn_opt({ link = true }, handler_body, req.code, req.name, req.config)
      handlers[req.name] = { pid = pid, level = req.level }
      publish()
      return true
   end
   function ops.remove_handler(req)
      if req.name == "default" then
         local was = cfg.default
         cfg.default = false
         publish()
         return was
      end
      return remove(req.name)
   end
   function ops.add_default(_)
      cfg.default = true
      publish()
      return true
   end
   function ops.set_level(req)
      cfg.level = req.level
      publish()
      return true
   end
   function ops.handlers(_)
      local names = cfg.default and { "default" } or {}
      for name in pairs(handlers) do names[#names + 1] = name end
      table.sort(names)
      return names
   end

   while true do
      local i, msg = s.select({ s.inbox, trap })
      if i == 2 then
         for name, h in pairs(handlers) do
            if h.pid == msg.pid then
               handlers[name] = nil
               publish()
            end
         end
      elseif type(msg) == "table" and type(msg.smarm_log) == "table" then
         local event = msg.smarm_log
         local lv = LV[event.level] or 3
         if lv <= cfg.level then
            for _, h in pairs(handlers) do
               if not h.level or lv <= h.level then s.send(h.pid, event) end
            end
         end
      elseif type(msg) == "table" and type(msg.smarm_logger) == "table" then
         local req = msg.smarm_logger
         local op = ops[req.op]
         if op and req.reply then req.reply:send({ op(req) }) end
      end
   end
end

-- Sends a request to the logger actor (started here if there is none) and returns its answer.
local function call(op, req)
   local pid = smarm.whereis(NAME)
   if not pid then
      local ok, p = pcall(smarm.spawn_opt, { name = NAME }, M.server_body)
      pid = ok and p or smarm.whereis(NAME) -- another actor started it first
      if not pid then error("smarm.logger: cannot start the logger actor: " .. tostring(p), 3) end
   end
   local tx, rx = smarm.channel()
   req.op = op
   req.reply = tx
   local mon = smarm.monitor(pid)
   smarm.send(pid, { smarm_logger = req })
   tx:release()
   local i, v = smarm.select({ rx, mon }, TIMEOUT)
   smarm.demonitor(mon)
   config_table = nil -- read the configuration afresh
   if i ~= 1 then error("smarm.logger: the logger actor did not answer " .. op, 3) end
   return unpack(v)
end

--- The primary level: events above it (less severe) are dropped where they are made.
-- "none" drops every event, "all" keeps every one (as OTP's).
function M.set_level(level)
   local n = level == "none" and -1 or level == "all" and LEVELS.debug
      or check_level(level, "set_level")
   return call("set_level", { level = n })
end

function M.get_level()
   local n = config().level
   if n < 0 then return "none" end
   for name, v in pairs(LEVELS) do
      if v == n then return name end
   end
end

--- Adds a handler: fn(event, config) runs in a handler actor of its own for each event at
-- or above config.level (when config is a table with a level). fn has no upvalues, as for
-- smarm.spawn; an error in it removes the handler.
-- @return true | false, why
function M.add_handler(name, fn, conf)
   if type(name) ~= "string" or name == "" then
      error("smarm.logger.add_handler: a name expected", 2)
   end
   if type(fn) ~= "function" then error("smarm.logger.add_handler: a function expected", 2) end
   local up = debug.getupvalue(fn, 1)
   if up then
      error("smarm.logger.add_handler: the function has upvalues (" .. up .. "); it runs in "
         .. "a handler actor: pass values in config and require modules inside it", 2)
   end
   local level = type(conf) == "table" and conf.level
   if level then level = check_level(level, "add_handler") end
   return call("add_handler", { name = name, code = string.dump(fn), config = conf,
      level = level or nil })
end

--- Removes a handler; "default" stops the stderr output (the runtime's own reports too).
-- @return true if it was there
function M.remove_handler(name)
   return call("remove_handler", { name = name })
end

--- Puts the default stderr handler back.
function M.add_default_handler() return call("add_default", {}) end

--- Names of the handlers in place.
function M.handlers() return call("handlers", {}) end

-- The file handler's function (runs in its handler actor; the file stays open there).
local function file_handler(event, conf)
   local f = rawget(_G, "smarm_logger_file")
   if not f then
      f = assert(io.open(conf.path, "a"))
      rawset(_G, "smarm_logger_file", f)
   end
   f:write(require("smarm.logger").format(event))
   f:flush()
end

--- Adds a handler that appends formatted events to the file at path.
function M.add_file_handler(name, path, level)
   if type(path) ~= "string" then error("smarm.logger.add_file_handler: a path expected", 2) end
   return M.add_handler(name, file_handler, { path = path, level = level })
end

return M
