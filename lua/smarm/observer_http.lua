--- smarm.observer_http: the observer's HTTP handler (runs in each connection actor).
--
--   GET  /                 the page (smarm.observer_page) with the first data inlined
--   GET  /api/snapshot     every live actor (the observer's own marked "observer": true)
--   GET  /api/tree         the supervision forest (smarm.tree)
--   GET  /api/schedulers   utilisation of each scheduler over the last minute
--   GET  /api/actor?pid=N  one actor's info
--   POST /api/kill?pid=N   kills it; needs header X-Smarm-Token with the token printed at start
--   GET  /metrics          Prometheus text format
local smarm = require "smarm"
local observer = require "smarm.observer"

local M = {}

local concat, format, type, pairs, ipairs = table.concat, string.format, type, pairs, ipairs

local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
   ["<"] = "\\u003c", [">"] = "\\u003e", ["&"] = "\\u0026" }

local function encode_string(s)
   return '"' .. s:gsub('[%c"\\<>&]', function(c)
      return ESC[c] or format("\\u%04x", c:byte())
   end) .. '"'
end

local function encode(v, out)
   local t = type(v)
   if t == "string" then
      out[#out + 1] = encode_string(v)
   elseif t == "number" then
      if v ~= v or v == math.huge or v == -math.huge then
         out[#out + 1] = "null"
      elseif v == math.floor(v) and math.abs(v) < 2 ^ 53 then
         out[#out + 1] = format("%d", v)
      else
         out[#out + 1] = format("%.6g", v)
      end
   elseif t == "boolean" then
      out[#out + 1] = v and "true" or "false"
   elseif t == "table" then
      if next(v) == nil or #v > 0 then
         out[#out + 1] = "["
         for i, x in ipairs(v) do
            if i > 1 then out[#out + 1] = "," end
            encode(x, out)
         end
         out[#out + 1] = "]"
      else
         out[#out + 1] = "{"
         local first = true
         for k, x in pairs(v) do
            if type(k) == "string" then
               if not first then out[#out + 1] = "," end
               first = false
               out[#out + 1] = encode_string(k)
               out[#out + 1] = ":"
               encode(x, out)
            end
         end
         out[#out + 1] = "}"
      end
   else
      out[#out + 1] = "null"
   end
end

--- A Lua value as JSON text (tables with an array part as arrays, empty ones as []).
function M.json(v)
   local out = {}
   encode(v, out)
   return concat(out)
end

-- The observer's own actors: its actor and every actor it (transitively) spawned.
local function mark_observer(snap, opid)
   local by = {}
   for _, a in ipairs(snap) do by[a.pid] = a end
   local function own(a, depth)
      if a.pid == opid then return true end
      local up = a.parent and by[a.parent]
      if not up or depth > 64 then return false end
      if up.observer ~= nil then return up.observer end
      return own(up, depth + 1)
   end
   for _, a in ipairs(snap) do a.observer = own(a, 0) end
end

local function actor_row(a)
   return {
      pid = a.pid, pid_text = smarm.pid_tostring(a.pid), parent = a.parent, name = a.name,
      id = a.id, type = a.type or "actor", state = a.state, mailbox = a.mailbox,
      memory = a.memory, slices = a.slices, messages_in = a.messages_in,
      messages_out = a.messages_out, current = a.current, links = a.links,
      monitors = a.monitors, observer = a.observer,
      stack = { reserve = a.stack.reserve, high_water = a.stack.high_water,
         shrinks = a.stack.shrinks, released = a.stack.released },
   }
end

local function snapshot(state)
   local snap = smarm.snapshot()
   mark_observer(snap, state and state.pid)
   return snap
end

local function snapshot_rows(snap)
   local rows = {}
   for i, a in ipairs(snap) do rows[i] = actor_row(a) end
   return rows
end

local function tree_of(snap)
   local tree = smarm.tree(snap)
   local by = {}
   for _, a in ipairs(snap) do by[a.pid] = a end
   local function annotate(list)
      for _, n in ipairs(list) do
         n.pid_text = smarm.pid_tostring(n.pid)
         n.observer = by[n.pid] and by[n.pid].observer or false
         annotate(n.children)
      end
   end
   annotate(tree)
   return tree
end

local function schedulers(state)
   return { interval = 1, history = state and state.history or {} }
end

local function respond(status, ctype, body)
   return status, { ["content-type"] = ctype, ["cache-control"] = "no-store" }, body
end

local function json(status, v)
   return respond(status, "application/json", M.json(v))
end

local function rss_bytes()
   local f = io.open("/proc/self/status", "r")
   if not f then return nil end
   local s = f:read("*a")
   f:close()
   local kb = s:match("VmRSS:%s*(%d+)")
   return kb and tonumber(kb) * 1024
end

local REASONS = { "normal", "error", "killed", "shutdown", "memory", "noproc", "stack_overflow",
   "no_stack", "other" }

--- The /metrics text (Prometheus exposition format 0.0.4).
function M.metrics()
   local ffi = require "ffi"
   local C = require "smarm.ffi"
   local st = ffi.new("smarm_runtime_stats")
   C.smarm_ffi_runtime_stats(st)
   local out = {}
   local function metric(name, kind, help, samples)
      out[#out + 1] = format("# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
      for _, s in ipairs(samples) do
         out[#out + 1] = format("%s%s %s\n", name, s[1], s[2])
      end
   end
   metric("smarm_actors_alive", "gauge", "Live actors.", { { "", tonumber(st.alive) } })
   metric("smarm_actors_spawned_total", "counter", "Actors spawned.",
      { { "", tonumber(st.spawned) } })
   local exits = {}
   for i, r in ipairs(REASONS) do
      exits[i] = { format('{reason="%s"}', r), tonumber(st.exits[i - 1]) }
   end
   metric("smarm_actors_exited_total", "counter", "Actors that ended, by reason.", exits)
   metric("smarm_messages_sent_total", "counter", "Messages sent (smarm.send and tx:send).",
      { { "", tonumber(st.messages_sent) } })
   metric("smarm_run_queue_length", "gauge", "Actors queued to run.",
      { { "", tonumber(st.run_queue) } })
   local busy = {}
   for i = 0, st.schedulers - 1 do
      busy[#busy + 1] = { format('{scheduler="%d"}', i),
         format("%.6f", tonumber(C.smarm_ffi_sched_busy_ns(i)) / 1e9) }
   end
   metric("smarm_scheduler_busy_seconds_total", "counter",
      "Time each scheduler ran actors (sampled at the watchdog's ticks).", busy)
   metric("smarm_backlogs_shared_total", "counter",
      "Polled backlogs a busy scheduler's idle siblings took over.",
      { { "", tonumber(st.backlogs_shared) } })
   metric("smarm_backlogs_kept_total", "counter",
      "Watchdog ticks that kept a backlog on its scheduler: other programs left no CPU.",
      { { "", tonumber(st.backlogs_kept) } })
   metric("smarm_cpu_room", "gauge",
      "CPUs other programs left this process at the last sample (-1: unknown).",
      { { "", format("%.3f", tonumber(st.cpu_room) < 0 and -1 or tonumber(st.cpu_room) / 1000) } })
   metric("smarm_timers_pending", "gauge", "Entries in the timer heap.",
      { { "", tonumber(st.timers) } })
   metric("smarm_memory_bytes", "gauge", "Resident memory of the process.",
      { { "", rss_bytes() or 0 } })
   metric("smarm_gc_bytes", "gauge", "Bytes the actors' Lua heaps hold.",
      { { "", tonumber(st.heap_bytes) } })
   return concat(out)
end

local function query_pid(req)
   local p = (req.query or ""):match("pid=(%d+)")
   return p and tonumber(p)
end

local function kill(req, state)
   if req.method ~= "POST" then return respond(405, "text/plain", "POST only\n") end
   local given = req.headers["x-smarm-token"]
   if not state or type(given) ~= "string" or given ~= state.token then
      return json(403, { error = "a valid X-Smarm-Token header is required" })
   end
   local pid = query_pid(req) or tonumber((req.body or ""):match("pid=(%d+)"))
   if not pid then return json(400, { error = "pid expected" }) end
   local snap = snapshot(state)
   for _, a in ipairs(snap) do
      if a.pid == pid then
         if a.observer then return json(400, { error = "that actor is the observer's own" }) end
         smarm.kill(pid)
         return json(200, { killed = pid })
      end
   end
   return json(404, { error = "no such actor" })
end

--- The request handler (smarm.http).
function M.handle(req)
   local path = req.path
   local state = observer.state()
   if path == "/api/snapshot" then
      return json(200, { actors = snapshot_rows(snapshot(state)), now = smarm.now() })
   elseif path == "/api/tree" then
      return json(200, { tree = tree_of(snapshot(state)) })
   elseif path == "/api/schedulers" then
      return json(200, schedulers(state))
   elseif path == "/api/actor" then
      local pid = query_pid(req)
      local info = pid and smarm.info(pid)
      if not info then return json(404, { error = "no such actor" }) end
      local snap = snapshot(state)
      for _, a in ipairs(snap) do
         if a.pid == pid then info.observer = a.observer end
      end
      info.pid_text = smarm.pid_tostring(pid)
      return json(200, info)
   elseif path == "/api/kill" then
      return kill(req, state)
   elseif path == "/metrics" then
      return respond(200, "text/plain; version=0.0.4", M.metrics())
   elseif path == "/" or path == "/index.html" then
      local snap = snapshot(state)
      local init = M.json({ actors = snapshot_rows(snap), tree = tree_of(snap),
         schedulers = schedulers(state) })
      return respond(200, "text/html; charset=utf-8", require("smarm.observer_page").render(init))
   end
   return respond(404, "text/plain", "not found\n")
end

return M
