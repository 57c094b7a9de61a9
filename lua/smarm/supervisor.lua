--- Supervisors: an actor that starts children from specs, restarts them by strategy
-- within a restart-intensity cap, and stops them in reverse start order.
-- The loop is here; the child table, restart decisions and the intensity ring live
-- in C (runtime/src/supervisor.c) behind the FFI.
local smarm = require "smarm"
local gen = require "smarm.gen"
local proc = require "smarm.proc"
local introspection = require "smarm.introspection"
local chan = require "smarm.chan.raw"

local M = {}

--- Functions of this module that report their own start: a supervisor waits for the
-- report of a child whose start is { "smarm.supervisor", "run", spec }.
M.init_ack = { run = true }

-- Names in specs -> the members of bindings/smarm_ffi.h's enums (values read through
-- the FFI, which is loaded only in a running supervisor).
local STRATEGY = {
   one_for_one = "SMARM_SUP_ONE_FOR_ONE",
   one_for_all = "SMARM_SUP_ONE_FOR_ALL",
   rest_for_one = "SMARM_SUP_REST_FOR_ONE",
   -- its own loop (smarm.supervisor_simple); the C table is used for the intensity only
   simple_one_for_one = "SMARM_SUP_ONE_FOR_ONE",
}
local AUTO_SHUTDOWN = { never = true, any_significant = true, all_significant = true }
local RESTART = {
   permanent = "SMARM_SUP_PERMANENT",
   transient = "SMARM_SUP_TRANSIENT",
   temporary = "SMARM_SUP_TEMPORARY",
}
local SHUTDOWN = { brutal_kill = "SMARM_SUP_BRUTAL_KILL", infinity = "SMARM_SUP_INFINITY" }

-- The body of every child (no upvalues: it runs in the child's own state): runs
-- require(mod)[fname](...). The child counts as started when the function begins,
-- unless its spec says init_ack or its module lists fname in its init_ack table; then
-- the function reports its start itself (smarm.proc.started), as behaviours' run do.
-- The checks and the report are C (runtime/src/lib/sup_child_lua.c): in Lua their type
-- and rawget opened the base library of every child, used by its own code or not.
local function child_main(ack, sup, init_ack, mod, fname, ...)
   local start = require "smarm.supervisor.child_start"
   return start(ack, sup, init_ack, mod, fname)(...)
end

-- The body of start_link's supervisor.
local function sup_main(ack, parent, spec)
   local p = require "smarm.proc"
   p.ack_to, p.parent = ack, parent
   return require("smarm.supervisor").run(spec)
end

-- A value as a spec error message shows it.
local function show(v)
   if type(v) == "string" then return ("%q"):format(v) end
   return tostring(v)
end

-- What is wrong with child spec c, or nil if nothing.
local function child_problem(c)
   if type(c) ~= "table" then return "child spec must be a table, got " .. type(c) end
   local id = c.id
   local tid = type(id)
   if tid ~= "string" and tid ~= "number" and tid ~= "boolean" then
      return "child spec id must be a string, a number or a boolean, got " .. tid
   end
   if id ~= id then return "child spec id must not be NaN" end
   local child = "child " .. show(id) .. ": "
   local s = c.start
   if type(s) ~= "table" then
      return child .. "start must be { module, function, args... }, got " .. type(s)
   end
   if type(s[1]) ~= "string" or type(s[2]) ~= "string" then
      return child .. "start must be { module, function, args... } (module and function "
         .. "names are strings), got { " .. type(s[1]) .. ", " .. type(s[2]) .. ", ... }"
   end
   if c.restart ~= nil and not RESTART[c.restart] then
      return child .. "restart must be \"permanent\", \"transient\" or \"temporary\", got "
         .. show(c.restart)
   end
   if c.type ~= nil and c.type ~= "worker" and c.type ~= "supervisor" then
      return child .. "type must be \"worker\" or \"supervisor\", got " .. show(c.type)
   end
   local sd = c.shutdown
   if sd ~= nil and not SHUTDOWN[sd] and not (type(sd) == "number" and sd >= 0) then
      return child .. "shutdown must be seconds >= 0, \"brutal_kill\" or \"infinity\", got "
         .. show(sd)
   end
   if c.init_ack ~= nil and type(c.init_ack) ~= "boolean" then
      return child .. "init_ack must be a boolean, got " .. type(c.init_ack)
   end
   for _, k in ipairs({ "stack", "max_heap" }) do
      local v = c[k]
      if v ~= nil and not (type(v) == "number" and v >= 0 and v % 1 == 0) then
         return child .. k .. " must be a whole number of bytes >= 0, got " .. show(v)
      end
   end
   if c.significant ~= nil and type(c.significant) ~= "boolean" then
      return child .. "significant must be a boolean, got " .. type(c.significant)
   end
   if c.significant and (c.restart or "permanent") == "permanent" then
      return child .. "a significant child must be transient or temporary"
   end
end

-- A checked child spec with its defaults filled in, as a fresh table.
local function child_spec(c)
   local kind = c.type or "worker"
   local shutdown = c.shutdown
   if shutdown == nil then shutdown = kind == "supervisor" and "infinity" or 5 end
   return {
      id = c.id,
      start = c.start,
      restart = c.restart or "permanent",
      shutdown = shutdown,
      type = kind,
      init_ack = c.init_ack or false,
      stack = c.stack,
      max_heap = c.max_heap,
      significant = c.significant or false,
   }
end

-- Whether v is a number >= 0 (not NaN), or nil when optional.
local function non_negative(v, optional)
   if v == nil then return optional end
   return type(v) == "number" and v >= 0
end

-- What is wrong with a supervisor spec, or nil if nothing.
local function spec_problem(spec)
   if type(spec) ~= "table" then return "spec must be a table, got " .. type(spec) end
   if spec.strategy ~= nil and not STRATEGY[spec.strategy] then
      return "strategy must be \"one_for_one\", \"one_for_all\", \"rest_for_one\" or "
         .. "\"simple_one_for_one\", got " .. show(spec.strategy)
   end
   local auto = spec.auto_shutdown
   if auto ~= nil and not AUTO_SHUTDOWN[auto] then
      return "auto_shutdown must be \"never\", \"any_significant\" or \"all_significant\", "
         .. "got " .. show(auto)
   end
   local simple = spec.strategy == "simple_one_for_one"
   if simple and auto ~= nil and auto ~= "never" then
      return "auto_shutdown must be \"never\" for simple_one_for_one"
   end
   if simple and (type(spec.children) ~= "table" or #spec.children ~= 1) then
      return "simple_one_for_one needs children = { template } (exactly one child spec)"
   end
   if not non_negative(spec.intensity, true) then
      return "intensity must be a number >= 0, got " .. show(spec.intensity)
   end
   if not non_negative(spec.period, true) then
      return "period must be seconds >= 0, got " .. show(spec.period)
   end
   if spec.name ~= nil and type(spec.name) ~= "string" then
      return "name must be a string, got " .. type(spec.name)
   end
   if not non_negative(spec.start_timeout, true) then
      return "start_timeout must be seconds >= 0, got " .. show(spec.start_timeout)
   end
   local kids = spec.children
   if kids == nil then return end
   if type(kids) ~= "table" then return "children must be an array of child specs, got "
      .. type(kids) end
   local n, seen = #kids, {}
   for k in pairs(kids) do
      if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then
         return "children must be an array of child specs (it has key " .. show(k) .. ")"
      end
   end
   for i = 1, n do
      local why = child_problem(kids[i])
      if why then return ("children[%d]: %s"):format(i, why) end
      local id = kids[i].id
      if seen[id] then return ("children[%d]: duplicate child id %s"):format(i, show(id)) end
      seen[id] = true
      if kids[i].significant and (auto == nil or auto == "never") then
         return ("children[%d]: significant needs auto_shutdown \"any_significant\" or "
            .. "\"all_significant\""):format(i)
      end
   end
end

-- ---- the supervisor's state and its FFI table ----
--
-- Deaths of children are learnt from a monitor per child, all of whose notices come on
-- one channel (downs_rx), so the loop selects over a fixed few arms however many
-- children there are: links alone would do for abnormal exits, but a normal exit sends
-- no exit signal, even to a trapping peer.
-- The links are there so that a supervisor killed hard takes its children along.
-- The trap channel then carries only requests to stop (smarm.shutdown) and the
-- death of the parent; the exit signals of children that arrive there are ignored.

local function new_state(strategy, intensity, period)
   local ffi = require "ffi"
   local C = require "smarm.ffi"
   local t = C.smarm_ffi_sup_new(C[STRATEGY[strategy]], math.min(intensity, 2 ^ 31 - 1), period)
   if t == nil then error("smarm.supervisor: out of memory", 0) end
   return {
      ffi = ffi,
      C = C,
      t = ffi.gc(t, C.smarm_ffi_sup_free),
      specs = {}, -- key -> child spec
      restarting = {}, -- key -> true while a failed restart waits for its retry
      keys = {}, -- id -> key
      refs = {}, -- key -> ref of the running child's monitor (its notice comes on downs_rx)
      pidkey = {}, -- pid of a running child -> key
      pending = {}, -- down notices a stop held back while it waited for another
      buf = ffi.new("int32_t[?]", 16),
      nbuf = 16,
   }
end

local function add(st, c)
   local C = st.C
   local shutdown = SHUTDOWN[c.shutdown] and C[SHUTDOWN[c.shutdown]] or c.shutdown
   local key = C.smarm_ffi_sup_add_child(st.t, C[RESTART[c.restart]], shutdown,
      c.type == "supervisor" and 1 or 0)
   if key < 0 then error("smarm.supervisor: out of memory", 0) end
   st.specs[key] = c
   st.keys[c.id] = key
   return key
end

local function forget(st, key)
   st.restarting[key] = nil
   st.C.smarm_ffi_sup_delete_child(st.t, key)
   st.keys[st.specs[key].id] = nil
   st.specs[key] = nil
end

local function pid_of(st, key)
   local p = tonumber(st.C.smarm_ffi_sup_pid(st.t, key))
   return p ~= 0 and p or nil
end

local function fit_buf(st, n)
   if n > st.nbuf then
      st.nbuf = n * 2
      st.buf = st.ffi.new("int32_t[?]", st.nbuf)
   end
end

-- Keys in start order (or reverse), as a Lua array.
local function keys_in_order(st, reverse)
   fit_buf(st, st.C.smarm_ffi_sup_children(st.t, st.buf, 0, 0))
   local n = st.C.smarm_ffi_sup_children(st.t, st.buf, st.nbuf, reverse and 1 or 0)
   local out = {}
   for i = 0, n - 1 do out[i + 1] = st.buf[i] end
   return out
end

-- Spawns child key, linked and monitored, and waits for its start report.
-- -> pid | nil, reason
local function start(st, key)
   local c = st.specs[key]
   local s = c.start
   local pid, mon = proc.start({ link = true, owned = true, stack = c.stack,
      max_heap = c.max_heap }, st.start_timeout, child_main,
      smarm.self(), c.init_ack, s[1], s[2], unpack(s, 3, #s))
   if not pid then return nil, mon end
   -- from now on its notice comes on the channel every child's does (one select arm
   -- however many children); a death in between reads noproc there
   smarm.demonitor(mon)
   st.refs[key] = smarm.monitor(pid, st.downs_rx)
   st.pidkey[pid] = key
   st.C.smarm_ffi_sup_set_pid(st.t, key, pid)
   introspection.supervised(pid, tostring(c.id), c.type)
   return pid
end

-- Waits for child pid's down notice (nil after timeout seconds), holding the others back
-- for the loop.
local function await_down(st, pid, timeout)
   for i, d in ipairs(st.pending) do
      if d.pid == pid then return table.remove(st.pending, i) end
   end
   while true do
      local d = st.downs_rx:recv(timeout)
      if d == nil then return nil end
      if d.pid == pid then return d end
      st.pending[#st.pending + 1] = d
   end
end

-- Stops child key if it runs: brutal_kill kills; a grace asks politely and kills when
-- it runs out; infinity asks and waits.
local function stop(st, key)
   local pid = pid_of(st, key)
   if not pid then return end
   st.C.smarm_ffi_sup_set_pid(st.t, key, 0)
   st.refs[key] = nil
   st.pidkey[pid] = nil
   local grace = st.specs[key].shutdown
   if grace == "brutal_kill" then
      smarm.kill(pid)
   else
      smarm.shutdown(pid)
      if grace ~= "infinity" then
         if await_down(st, pid, grace) then return end
         smarm.kill(pid)
      end
   end
   await_down(st, pid)
end

local function stop_all(st)
   for _, key in ipairs(keys_in_order(st, true)) do stop(st, key) end
end

-- The intensity cap tripped (or the parent went): children stop, then the supervisor.
local function terminate(st, reason)
   stop_all(st)
   smarm.exit(reason)
end

local function allowed(st)
   return st.C.smarm_ffi_sup_restart_allowed(st.t, smarm.now()) ~= 0
end

-- Starts the children of a restart in start order. A start that fails counts as
-- another restart of that child (so a child failing its init trips the cap); while the
-- cap allows, that child and the rest are marked restarting and retried from the loop,
-- through a message on the supervisor's own retry channel (OTP's try_again_restart),
-- so requests and shutdowns are served between attempts.
local function restart_keys(st, keys)
   for i, key in ipairs(keys) do
      st.restarting[key] = nil
      if st.specs[key] and not pid_of(st, key) then
         if st.C.smarm_ffi_sup_restart_type(st.t, key) == st.C.SMARM_SUP_TEMPORARY then
            forget(st, key)
         elseif not start(st, key) then
            if not allowed(st) then terminate(st, "shutdown") end
            for j = i, #keys do
               if st.specs[keys[j]] then st.restarting[keys[j]] = true end
            end
            if not st.retry_queued then
               st.retry_queued = true
               st.retry_tx:send(true)
            end
            return
         end
      end
   end
end

-- The retry message: restarts the children still marked restarting, in start order.
local function retry(st)
   st.retry_queued = false
   local keys = {}
   for _, key in ipairs(keys_in_order(st, false)) do
      if st.restarting[key] then keys[#keys + 1] = key end
   end
   restart_keys(st, keys)
end

-- A supervisor report (OTP's): context child_terminated or shutdown, through smarm.logger.
local function report(_, context, reason, pid, id)
   require("smarm.logger").report("error", "supervisor_report", {
      supervisor = smarm.self(), errorContext = context, reason = reason,
      offender = { pid = pid, id = id },
   })
end

local function is_abnormal(reason)
   return reason ~= "normal" and reason ~= "shutdown"
end

-- Child key's down notice (from the monitor set at its spawn, so never noproc).
-- auto_shutdown: a significant child ended by itself and was not restarted. True when
-- the supervisor is to shut down (any_significant, or all_significant with no other
-- significant child running).
local function auto_shutdown(st, key)
   if st.auto_shutdown == "any_significant" then return true end
   for k, c in pairs(st.specs) do
      if k ~= key and c.significant and pid_of(st, k) then return false end
   end
   return true
end

local function on_down(st, key, down)
   local C = st.C
   local spec = st.specs[key]
   local id = spec and spec.id
   fit_buf(st, C.smarm_ffi_sup_children(st.t, st.buf, 0, 0))
   local n = C.smarm_ffi_sup_child_exited(st.t, down.pid, is_abnormal(down.reason) and 1 or 0,
      st.buf, st.nbuf)
   if n == 0 and C.smarm_ffi_sup_restart_type(st.t, key) < 0 then
      st.keys[st.specs[key].id] = nil -- a temporary child, removed by C
      st.specs[key] = nil
   end
   if is_abnormal(down.reason) then
      report(st, "child_terminated", down.reason, down.pid, id)
   end
   if n == 0 and spec and spec.significant and auto_shutdown(st, key) then
      terminate(st, "shutdown")
   end
   if n <= 0 then return end
   local keys = {}
   for i = 0, n - 1 do keys[i + 1] = st.buf[i] end
   if not allowed(st) then
      report(st, "shutdown", "reached_max_restart_intensity", down.pid, id)
      terminate(st, "shutdown")
   end
   for i = n, 1, -1 do stop(st, keys[i]) end
   restart_keys(st, keys)
end

-- An exit signal: "stop" if it asks this supervisor to shut down.
local function on_signal(st, sig)
   local from = sig.from
   -- smarm.shutdown(sup), or the runtime's SIGINT/SIGTERM shutdown of the root
   if sig.request and sig.reason == "shutdown" then return "stop" end
   if from == st.parent then
      if sig.reason == "shutdown" then return "stop" end
      terminate(st, sig.reason)
   end
   -- a dead actor's exit signal (a child's, already seen through its monitor) has
   -- a terminal reason by the time it arrives; a request comes from a live one
   if sig.reason == "shutdown" and st.C.smarm_ffi_sup_key_of(st.t, from) == 0
      and smarm.terminal_reason(from) == nil then
      return "stop"
   end
end

-- A notice from downs_rx: a running child's death goes to on_down; others (a child
-- already stopped or replaced) are stale.
local function on_notice(st, d)
   local key = st.pidkey[d.pid]
   if not key or st.refs[key] ~= d.ref then return end
   st.pidkey[d.pid] = nil
   st.refs[key] = nil
   if d.reason == "noproc" then
      -- it died before its monitor was in place: its terminal record says how
      local r = smarm.terminal_reason(d.pid)
      if r ~= nil then d.reason = r end
   end
   on_down(st, key, d)
end

local function arms_of(st)
   if st.arms then return st.arms end
   local arms = { st.trap, smarm.inbox }
   if st.parent_mon then arms[3] = st.parent_mon end
   arms[#arms + 1] = st.downs_rx
   -- last: a child that keeps failing its restart delays nothing else
   arms[#arms + 1] = st.retry_rx
   st.arms = arms
   return arms
end

-- ---- requests (calls to the supervisor actor) ----

local handlers = {}

function handlers.start_child(st, req)
   if req.args then
      -- start_child(sup, x) where x does not look like a child spec: the caller's error
      local bad = child_problem(req.args[1])
      if bad then return nil, bad, "bad_child_spec" end
      req.child = req.args[1]
   end
   local bad = child_problem(req.child)
   if bad then return nil, bad end
   local c = child_spec(req.child)
   local key = st.keys[c.id]
   if key then
      local pid = pid_of(st, key)
      return nil, pid and "already_started" or "already_present", pid
   end
   key = add(st, c)
   local pid, why = start(st, key)
   if not pid then
      forget(st, key)
      return nil, why
   end
   return pid
end

function handlers.terminate_child(st, req)
   local key = st.keys[req.id]
   if not key then return nil, "not_found" end
   stop(st, key)
   st.restarting[key] = nil
   if st.specs[key].restart == "temporary" then forget(st, key) end
   return true
end

function handlers.restart_child(st, req)
   local key = st.keys[req.id]
   if not key then return nil, "not_found" end
   if pid_of(st, key) then return nil, "running" end
   local pid, why = start(st, key)
   if pid then st.restarting[key] = nil end
   return pid, why
end

function handlers.delete_child(st, req)
   local key = st.keys[req.id]
   if not key then return nil, "not_found" end
   if pid_of(st, key) then return nil, "running" end
   forget(st, key)
   return true
end

function handlers.which_children(st)
   local out = {}
   for i, key in ipairs(keys_in_order(st, false)) do
      local c = st.specs[key]
      out[i] = { id = c.id, pid = pid_of(st, key), type = c.type }
   end
   return out
end

function handlers.count_children(st)
   local n = st.ffi.new("int32_t[4]")
   st.C.smarm_ffi_sup_count(st.t, n)
   return { specs = n[0], active = n[1], supervisors = n[2], workers = n[3] }
end

-- A warning (smarm.logger) about a message this supervisor ignores.
local function warn(what)
   require("smarm.logger").warning("supervisor %s ignored %s", smarm.pid_tostring(smarm.self()),
      what)
end

-- An inbox message: a request {smarm_sup = {op = name, reply = tx, ...}} is answered on
-- its reply channel; anything else is ignored with a warning.
local function on_request(st, msg)
   local req = type(msg) == "table" and msg.smarm_sup
   if type(req) ~= "table" then
      return warn(("an unexpected message (a %s)"):format(type(msg)))
   end
   local op = req.op
   if type(op) ~= "string" or not handlers[op] then
      return warn(("a malformed request (unknown op %s)"):format(tostring(op)))
   end
   if not gen.is_tx(req.reply) then
      return warn(("a malformed %s request (reply is not a channel tx)"):format(op))
   end
   local a, b, c = handlers[op](st, req)
   -- the request's copy of the reply tx lets go with the answer (no finalizer left)
   chan.reply(req.reply, { a, b, c })
end

-- Sends a request to sup and waits for the answer, or for sup to go. Tail-called by the
-- public functions, so error level 2 blames their caller. Through gen.request, as a
-- gen_server call: one reply channel pair per actor, no monitor unless the channel closes
-- (a new pair and a monitor per request, which a state that keeps much finalized long
-- after, cold, made count_children at 100,000 children take 10-25 us).
local function call(fname, sup, op, req, timeout)
   req.op = op
   if type(sup) == "string" then
      sup = smarm.whereis(sup)
      if not sup then return nil, "noproc" end
   end
   local v, why = gen.request(sup, { smarm_sup = req }, req, "reply", timeout)
   if v then return v[1], v[2], v[3] end
   if v == false then error(gen.blame(fname, why, "msg.smarm_sup.child", "child", "sup"), 2) end
   return nil, why == "server_down" and "noproc" or why
end

-- Checks the arguments every request takes: what is wrong, or nil and the timeout
-- (nil = forever).
local function request_problem(sup, timeout)
   local t = type(sup)
   if t ~= "number" and t ~= "string" then
      return "bad sup (a pid or a registered name expected, got " .. t .. ")"
   end
   if timeout == nil then return nil, 5 end
   if timeout == "infinity" then return nil, nil end
   if not non_negative(timeout) then
      return "bad timeout (seconds >= 0, \"infinity\" or nil expected, got " .. show(timeout)
         .. ")"
   end
   return nil, timeout
end

-- A request about the child named id (tail-called too).
local function child_request(fname, op, sup, id, timeout)
   local why, wait = request_problem(sup, timeout)
   if not why and (id == nil or id ~= id) then why = "bad id (" .. tostring(id) .. ")" end
   if why then error(fname .. ": " .. why, 2) end
   return call(fname, sup, op, { id = id }, wait)
end

-- ---- public API ----

--- Runs a supervisor inline as the calling actor (an application's root, or a child
-- whose start is { "smarm.supervisor", "run", spec }). Starts the children one after
-- another in spec order, reports the start to whoever waits (smarm.proc), then
-- supervises. Returns "shutdown" after an ordered shutdown asked by smarm.shutdown;
-- exits with reason "shutdown" when the restart intensity is exceeded.
-- @param spec {strategy, intensity, period, name, children = {child spec, ...}}
-- @return "shutdown" | nil, reason (a child failed to start; raised if nobody waits)
function M.run(spec)
   local bad = spec_problem(spec)
   if bad then error("supervisor.run: " .. bad, 2) end
   local kids = {}
   for i, c in ipairs(spec.children or {}) do kids[i] = child_spec(c) end
   local waiter = proc.ack_to
   local trap = smarm.trap_exit(true)
   local st = new_state(spec.strategy or "one_for_one", spec.intensity or 3, spec.period or 5)
   introspection.supervised(smarm.self(), nil, "supervisor")
   st.parent = proc.parent
   st.parent_mon = st.parent and smarm.monitor(st.parent)
   st.trap = trap
   st.start_timeout = spec.start_timeout
   st.auto_shutdown = spec.auto_shutdown or "never"
   if spec.strategy == "simple_one_for_one" then
      if spec.name ~= nil and not smarm.register(spec.name) then
         if not waiter then error("supervisor.run: already_started", 0) end
         proc.started(false, "already_started")
         return nil, "already_started"
      end
      return require("smarm.supervisor_simple").run(kids[1], st, {
         child_main = child_main,
         allowed = allowed,
         is_abnormal = is_abnormal,
         warn = warn,
         is_tx = gen.is_tx,
         reply = chan.reply,
         started = proc.started,
         await_down = await_down,
      })
   end
   st.retry_tx, st.retry_rx = smarm.channel()
   st.downs_tx, st.downs_rx = smarm.channel()
   local function fail(why)
      stop_all(st)
      if not waiter then
         if type(why) == "table" then
            why = ("child %s failed to start: %s"):format(show(why.failed_to_start_child),
               tostring(why.reason))
         end
         error("supervisor.run: " .. why, 0)
      end
      proc.started(false, why)
      return nil, why
   end
   if spec.name ~= nil and not smarm.register(spec.name) then return fail("already_started") end
   for _, c in ipairs(kids) do
      local key = add(st, c)
      local pid, why = start(st, key)
      if not pid then
         return fail({ failed_to_start_child = c.id, reason = why })
      end
   end
   proc.started(true)
   while true do
      -- one at a time off the list, so that a shutdown in the middle finds the rest there
      while #st.pending > 0 do on_notice(st, table.remove(st.pending, 1)) end
      local arms = arms_of(st)
      local i, v = smarm.select(arms)
      if i == 1 then
         if on_signal(st, v) == "stop" then
            stop_all(st)
            return "shutdown"
         end
      elseif i == 2 then
         on_request(st, v)
      elseif arms[i] == st.parent_mon then
         terminate(st, v.reason)
      elseif arms[i] == st.retry_rx then
         retry(st)
      else
         on_notice(st, v)
      end
   end
end

--- Starts a supervisor linked to the caller and waits until all its children started.
-- @param spec as for run
-- @param timeout seconds to wait for the start, nil = forever
-- @return pid | nil, reason
function M.start_link(spec, timeout)
   local bad = spec_problem(spec)
   if not bad and not non_negative(timeout, true) then
      bad = "bad timeout (seconds >= 0 or nil expected, got " .. show(timeout) .. ")"
   end
   if bad then error("supervisor.start_link: " .. bad, 2) end
   local pid, why = proc.start({ link = true }, timeout, sup_main, smarm.self(), spec)
   if pid == false then
      -- sup_main's arguments: spec is the third
      error(gen.blame("supervisor.start_link", why, "arg 3", "spec"), 2)
   end
   if not pid then return nil, why end
   smarm.demonitor(why)
   M.stop_at_return(pid)
   return pid
end

-- The supervisors this actor started with start_link, in start order.
local linked = {}

-- Stops the supervisors in linked, the last started first, each as an application's top
-- supervisor is stopped: asked to shut down (its children stop in order, each with its
-- shutdown grace) and waited for.
local function stop_linked()
   for i = #linked, 1, -1 do
      local pid = linked[i]
      local mon = smarm.monitor(pid)
      smarm.shutdown(pid)
      mon:recv()
   end
   linked = {}
end

--- Has sup stopped in order when the root actor's body returns (before the root-exit
-- sweep, which stops whatever is left uncatchably). start_link calls it; only the root
-- runs it (other actors that return leave their supervisors running, as in OTP).
function M.stop_at_return(sup)
   linked[#linked + 1] = sup
   debug.getregistry()["smarm.at_return"] = stop_linked
end

--- Adds a child spec to a running supervisor and starts it; for a simple_one_for_one
-- supervisor, starts a child from its template with args appended to the template's
-- start arguments. A first argument that is a table with id and start fields is a
-- child spec (then a second is the timeout).
-- @return pid | nil, "already_started" | "already_present" | reason
function M.start_child(sup, ...)
   local n = select("#", ...)
   local child = ...
   if type(child) == "table" and child.start ~= nil and child.id ~= nil then
      local timeout = select(2, ...)
      local why, wait = request_problem(sup, timeout)
      why = why or child_problem(child)
      if why then error("supervisor.start_child: " .. why, 2) end
      return call("supervisor.start_child", sup, "start_child", { child = child }, wait)
   end
   local why = request_problem(sup)
   if why then error("supervisor.start_child: " .. why, 2) end
   local pid, err, kind = call("supervisor.start_child", sup, "start_child",
      { args = { ... }, n = n }, 5)
   if kind == "bad_child_spec" then error("supervisor.start_child: " .. err, 2) end
   return pid, err, kind
end

--- Stops a child (as its shutdown says); its spec stays unless it is temporary.
-- @return true | nil, "not_found"
function M.terminate_child(sup, id, timeout)
   return child_request("supervisor.terminate_child", "terminate_child", sup, id, timeout)
end

--- Starts a stopped child again from its spec.
-- @return pid | nil, "running" | "not_found" | reason
function M.restart_child(sup, id, timeout)
   return child_request("supervisor.restart_child", "restart_child", sup, id, timeout)
end

--- Removes the spec of a stopped child.
-- @return true | nil, "running" | "not_found"
function M.delete_child(sup, id, timeout)
   return child_request("supervisor.delete_child", "delete_child", sup, id, timeout)
end

--- The children in start order.
-- @return array of {id, pid (nil if not running), type} | nil, reason
function M.which_children(sup, timeout)
   local why, wait = request_problem(sup, timeout)
   if why then error("supervisor.which_children: " .. why, 2) end
   return call("supervisor.which_children", sup, "which_children", {}, wait)
end

--- Counts of the children.
-- @return {specs, active, supervisors, workers} | nil, reason
function M.count_children(sup, timeout)
   local why, wait = request_problem(sup, timeout)
   if why then error("supervisor.count_children: " .. why, 2) end
   return call("supervisor.count_children", sup, "count_children", {}, wait)
end

return M
