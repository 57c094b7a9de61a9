-- Supervisors: restart types, strategies, the intensity cap, ordered shutdown with
-- grace, hard kills, dynamic children and nesting. Children report to this actor
-- (tests/lua/support/sup_worker.lua).
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

local W = "support.sup_worker"
local me = smarm.self()

-- The next report matching field (started / stopped / ignored), others dropped.
local next_report = require("support.inbox").first

-- All reports of field arriving within quiet seconds, in order.
local function reports(field, quiet)
   local out = {}
   while true do
      local m = smarm.recv(quiet or 0.2)
      if m == nil then return out end
      if type(m) == "table" and m[field] ~= nil then out[#out + 1] = m[field] end
   end
end

local drain = require("support.inbox").drain

local function worker(id, opts)
   local c = { id = id, start = { W, "run", id, me, opts and opts.trap or false }, init_ack = true }
   for k, v in pairs(opts or {}) do
      if k ~= "trap" then c[k] = v end
   end
   return c
end

-- How pid ended, from the notice of its monitor mon (within timeout seconds, default 5).
-- A supervisor giving up may end before the test's monitor is in place: that monitor says
-- noproc, and the terminal record says how the actor ended.
local function reason_of(mon, pid, timeout)
   local r = assert(mon:recv(timeout or 5)).reason
   if r == "noproc" then return smarm.terminal_reason(pid) end
   return r
end

local function wait_for(f, timeout)
   local deadline = smarm.now() + (timeout or 5)
   while smarm.now() < deadline do
      local v = f()
      if v then return v end
      smarm.sleep(0.005)
   end
   return nil
end

local sups

-- Supervisors are linked to this actor, which traps exits while a test runs so
-- that a supervisor giving up ("shutdown") does not take the test runner along.
before_each(function()
   drain()
   sups = {}
   smarm.trap_exit(true)
end)

after_each(function()
   for _, pid in ipairs(sups) do
      local mon = smarm.monitor(pid)
      smarm.kill(pid)
      mon:recv(5)
   end
   smarm.trap_exit(false)
   drain()
end)

local function start(spec)
   local pid, err = supervisor.start_link(spec, 5)
   if pid then sups[#sups + 1] = pid end
   return pid, err
end

describe("supervisor restarts", function()
   it("restarts a transient child after a crash, not after a normal exit", function()
      local sup = assert(start({ children = { worker("t1", { restart = "transient" }) } }))
      local first = assert(next_report("started")).pid
      smarm.send(first, "crash")
      local second = assert(next_report("started")).pid
      assert.are_not.equal(first, second)
      smarm.send(second, "stop")
      assert.is_nil(next_report("started", 0.2))
      local n = supervisor.count_children(sup)
      assert.are.same({ specs = 1, active = 0, supervisors = 0, workers = 1 }, n)
      -- a "shutdown" exit is not abnormal either
      assert(supervisor.restart_child(sup, "t1"))
      local third = assert(next_report("started")).pid
      smarm.send(third, { exit = "shutdown" })
      assert.is_nil(next_report("started", 0.2))
   end)

   it("never restarts a temporary child, and forgets it", function()
      local sup = assert(start({ children = { worker("tmp", { restart = "temporary" }) } }))
      local p = assert(next_report("started")).pid
      smarm.send(p, "crash")
      assert.is_nil(next_report("started", 0.2))
      assert.are.same({}, supervisor.which_children(sup))
   end)

   it("always restarts a permanent child, even after a normal exit", function()
      local sup = assert(start({ children = { worker("perm") } }))
      local p = assert(next_report("started")).pid
      smarm.send(p, "stop")
      assert.are_not.equal(p, assert(next_report("started")).pid)
      assert.is_truthy(smarm.info(sup))
   end)

   it("gives up on a crash loop: stops its other children and exits with shutdown", function()
      local sup = assert(start({
         intensity = 3,
         period = 5,
         children = {
            worker("bystander"),
            { id = "loop", start = { W, "crash_on_start", "loop", me } },
         },
      }))
      local mon = smarm.monitor(sup)
      local bystander = assert(next_report("started")).pid
      local bmon = smarm.monitor(bystander)
      assert.are.equal("shutdown", reason_of(mon, sup))
      assert.are.equal("shutdown", reason_of(bmon, bystander))
      local starts = 0
      for _, id in ipairs(reports("started", 0.1)) do
         if id == "loop" then starts = starts + 1 end
      end
      -- the first start and three restarts; the fourth restart trips the cap
      assert.are.equal(4, starts)
   end)

   -- A supervisor with child "p" whose restarts fail until unpoison() is called (at the
   -- latest when the test ends).
   local function poisoned_child(intensity)
      local sup = assert(start({ intensity = intensity or 1000000, period = 1, children = {
         { id = "p", start = { W, "poisonable", "p", me }, init_ack = true } } }))
      local first = assert(next_report("started")).pid
      local poison = smarm.spawn(function()
         local s = require "smarm"
         s.register("supervisor_spec.poison")
         s.recv()
      end)
      assert.is_truthy(wait_for(function() return smarm.whereis("supervisor_spec.poison") end))
      -- gone, name and all, before the next test starts a poisonable child
      local function unpoison()
         local pmon = smarm.monitor(poison)
         smarm.kill(poison)
         pmon:recv(5)
      end
      finally(unpoison)
      smarm.send(first, { exit = "boom" })
      smarm.sleep(0.05)
      return sup, unpoison
   end

   it("keeps answering requests and shutdown while a child's restarts keep failing", function()
      local sup = poisoned_child()
      local t0 = smarm.now()
      local which = assert(supervisor.which_children(sup, 2))
      assert.is_true(smarm.now() - t0 < 1, "which_children took " .. (smarm.now() - t0))
      assert.are.equal("p", which[1].id)
      assert.is_nil(which[1].pid)
      assert.are.same({ specs = 1, active = 0, supervisors = 0, workers = 1 },
         supervisor.count_children(sup, 2))
      local mon = smarm.monitor(sup)
      t0 = smarm.now()
      smarm.shutdown(sup)
      assert.is_truthy(mon:recv(2))
      assert.is_true(smarm.now() - t0 < 1, "shutdown took " .. (smarm.now() - t0))
   end)

   it("retries a failed restart until it succeeds", function()
      local sup, unpoison = poisoned_child()
      assert.is_nil(next_report("started", 0.05))
      unpoison()
      local again = assert(next_report("started", 2)).pid
      assert.are.equal(again, supervisor.which_children(sup, 2)[1].pid)
   end)

   it("counts each failed restart against the intensity", function()
      local sup = poisoned_child(3)
      assert.are.equal("shutdown", reason_of(smarm.monitor(sup), sup, 2))
   end)

   it("restarts within the cap when crashes are spread over more than the period", function()
      local sup = assert(start({ intensity = 1, period = 0.1, children = { worker("slow") } }))
      for _ = 1, 3 do
         local p = assert(next_report("started")).pid
         smarm.sleep(0.15)
         smarm.send(p, "crash")
      end
      assert(next_report("started"))
      assert.is_truthy(smarm.info(sup))
   end)
end)

describe("supervisor strategies", function()
   it("one_for_one restarts only the failed child", function()
      local sup = assert(start({ children = { worker("a"), worker("b"), worker("c") } }))
      local pids = {}
      for _ = 1, 3 do
         local m = assert(next_report("started"))
         pids[m.started] = m.pid
      end
      smarm.send(pids.b, "crash")
      assert.are.same({ "b" }, reports("started"))
      assert.is_truthy(smarm.info(pids.a))
      assert.is_truthy(smarm.info(pids.c))
      assert.is_truthy(smarm.info(sup))
   end)

   local function three(strategy)
      local t = { trap = true }
      return start({
         strategy = strategy,
         children = { worker("a", t), worker("b", t), worker("c", t) },
      })
   end

   -- Starts a, b, c under strategy, crashes b, and returns the pids and the
   -- "start x" / "stop x" reports that followed, in order.
   local function crash_b_of_three(strategy)
      assert(three(strategy))
      local pids = {}
      for _ = 1, 3 do
         local m = assert(next_report("started"))
         pids[m.started] = m.pid
      end
      smarm.send(pids.b, "crash")
      local seen = {}
      while true do
         local m = smarm.recv(0.2)
         if m == nil then break end
         if type(m) == "table" and (m.started or m.stopped) then
            seen[#seen + 1] = (m.started and "start " .. m.started) or "stop " .. m.stopped
         end
      end
      return pids, seen
   end

   it("one_for_all stops the siblings in reverse start order, restarts all in order", function()
      local _, seen = crash_b_of_three("one_for_all")
      assert.are.same({ "stop c", "stop a", "start a", "start b", "start c" }, seen)
   end)

   it("rest_for_one cycles the failed child and those started after it", function()
      local pids, seen = crash_b_of_three("rest_for_one")
      assert.are.same({ "stop c", "start b", "start c" }, seen)
      assert.is_truthy(smarm.info(pids.a))
   end)
end)

describe("supervisor shutdown", function()
   it("kills a child that ignores the shutdown once its grace ran out", function()
      local sup = assert(start({
         children = { { id = "s", shutdown = 0.2, start = { W, "stubborn", "s", me } } },
      }))
      local p = assert(next_report("started")).pid
      local mon = smarm.monitor(p)
      local t0 = smarm.now()
      assert.is_true(supervisor.terminate_child(sup, "s"))
      local elapsed = smarm.now() - t0
      assert.is_true(elapsed >= 0.2, "elapsed " .. elapsed)
      assert.is_true(elapsed < 2, "elapsed " .. elapsed)
      assert.are.equal("shutdown", assert(next_report("ignored")).reason)
      assert.are.equal("killed", assert(mon:recv(5)).reason)
   end)

   it("kills a brutal_kill child at once", function()
      local sup = assert(start({
         children = { { id = "s", shutdown = "brutal_kill", start = { W, "stubborn", "s", me } } },
      }))
      local p = assert(next_report("started")).pid
      local mon = smarm.monitor(p)
      assert.is_true(supervisor.terminate_child(sup, "s"))
      assert.are.equal("killed", assert(mon:recv(5)).reason)
      assert.is_nil(next_report("ignored", 0.05))
   end)

   it("smarm.shutdown stops the children one at a time in reverse start order", function()
      local t = { trap = true }
      local sup = assert(start({ children = { worker("a", t), worker("b", t), worker("c", t) } }))
      assert.are.same({ "a", "b", "c" }, reports("started", 0.1))
      local mon = smarm.monitor(sup)
      smarm.shutdown(sup)
      assert.is_truthy(mon:recv(5))
      assert.are.same({ "c", "b", "a" }, reports("stopped", 0.1))
   end)

   it("a hard-killed supervisor takes its (non-trapping) children with it", function()
      local sup = assert(start({ children = { worker("a"), worker("b") } }))
      local mons = {}
      for _ = 1, 2 do
         mons[#mons + 1] = smarm.monitor(assert(next_report("started")).pid)
      end
      smarm.kill(sup)
      for _, mon in ipairs(mons) do
         assert.are.equal("killed", assert(mon:recv(5)).reason)
      end
   end)

   it("a hard-killed supervisor takes even a trapping child with it (no orphans)", function()
      local sup = assert(start({ children = { worker("t", { trap = true }) } }))
      local p = assert(next_report("started")).pid
      local mon = smarm.monitor(p)
      smarm.kill(sup)
      assert.are.equal("killed", assert(mon:recv(5)).reason)
   end)

   it("stops its children and exits with the parent's reason when the parent dies", function()
      local parent = smarm.spawn(function(collector, spec)
         local s = require "smarm"
         s.send(collector, { sup = require("smarm.supervisor").start_link(spec, 5) })
         s.recv()
         s.exit("parent_gone")
      end, me, { children = { worker("pc", { trap = true }) } })
      assert(next_report("started"))
      local sup = assert(next_report("sup")).sup
      local mon = smarm.monitor(sup)
      smarm.send(parent, "go")
      assert.are.equal("parent_gone", assert(mon:recv(5)).reason)
      assert.are.same({ "pc" }, reports("stopped", 0.1))
   end)

   it("tears a nested tree down top-down", function()
      local t = { trap = true }
      local sub = {
         strategy = "one_for_one",
         children = { worker("n2", t), worker("n3", t) },
      }
      local sup = assert(start({
         children = {
            worker("n1", t),
            { id = "sub", type = "supervisor", start = { "smarm.supervisor", "run", sub } },
         },
      }))
      assert.are.same({ "n1", "n2", "n3" }, reports("started", 0.1))
      local which = supervisor.which_children(sup)
      assert.are.equal("supervisor", which[2].type)
      assert.are.same({ specs = 2, active = 2, supervisors = 0, workers = 2 },
         supervisor.count_children(which[2].pid))
      -- the nested supervisor restarts its own children
      smarm.send(smarm.whereis("n3"), "crash")
      assert.are.same({ "n3" }, reports("started", 0.1))
      local mon = smarm.monitor(sup)
      smarm.shutdown(sup)
      assert.is_truthy(mon:recv(5))
      assert.are.same({ "n3", "n2", "n1" }, reports("stopped", 0.1))
   end)
end)

describe("supervisor start", function()
   it("fails when a child fails to start, stopping those already started", function()
      local pid, err = start({
         children = {
            worker("ok", { trap = true }),
            { id = "bad", start = { W, "no_such_function" } },
         },
      })
      assert.is_nil(pid)
      assert.are.equal("bad", err.failed_to_start_child)
      assert.are.same({ "ok" }, reports("stopped", 0.1))
   end)

   it("waits for the start report of a function its module lists in init_ack", function()
      local A = "support.acking_worker"
      assert(start({ children = {
         { id = "slow", start = { A, "slow_start", "slow", me } },
         { id = "plain", start = { A, "plain", "plain", me } },
      } }))
      -- the plain child starts only once the slow one reported
      assert.are.same({ "slow", "plain" }, reports("started", 0.2))
      local pid, err = start({ children = { { id = "no", start = { A, "refuse", "no", me } } } })
      assert.is_nil(pid)
      assert.are.same({ failed_to_start_child = "no", reason = "refused" }, err)
   end)

   it("registers its name", function()
      local sup = assert(start({ name = "sup_named", children = {} }))
      assert.are.equal(sup, smarm.whereis("sup_named"))
      assert.are.same({}, supervisor.which_children("sup_named"))
   end)
end)

describe("supervisor dynamic children", function()
   it("start, terminate, restart, delete, which and count", function()
      local sup = assert(start({ children = {} }))
      local p = assert(supervisor.start_child(sup, worker("d1")))
      assert.are.equal(p, assert(next_report("started")).pid)
      local again, why = supervisor.start_child(sup, worker("d1"))
      assert.is_nil(again)
      assert.are.equal("already_started", why)
      assert(supervisor.start_child(sup, worker("d2", { type = "worker" })))
      assert.are.same({ "d2" }, reports("started", 0.05))
      local which = supervisor.which_children(sup)
      assert.are.same({ { id = "d1", pid = p, type = "worker" } }, { which[1] })
      assert.are.equal("d2", which[2].id)
      assert.are.same({ specs = 2, active = 2, supervisors = 0, workers = 2 },
         supervisor.count_children(sup))

      assert.are.same({ nil, "running" }, { supervisor.delete_child(sup, "d1") })
      assert.is_true(supervisor.terminate_child(sup, "d1"))
      assert.is_true(wait_for(function() return smarm.info(p) == nil end))
      assert.is_nil(supervisor.which_children(sup)[1].pid)
      assert.are.same({ specs = 2, active = 1, supervisors = 0, workers = 2 },
         supervisor.count_children(sup))
      -- a terminated child is not restarted by the supervisor
      assert.is_nil(next_report("started", 0.1))

      local p2 = assert(supervisor.restart_child(sup, "d1"))
      assert.are_not.equal(p, p2)
      assert.are.same({ nil, "running" }, { supervisor.restart_child(sup, "d1") })
      assert.is_true(supervisor.terminate_child(sup, "d1"))
      assert.is_true(supervisor.delete_child(sup, "d1"))
      assert.are.same({ nil, "not_found" }, { supervisor.delete_child(sup, "d1") })
      assert.are.same({ nil, "not_found" }, { supervisor.terminate_child(sup, "zz") })
      assert.are.equal(1, #supervisor.which_children(sup))

      -- a child whose start fails is not added
      local bad, err = supervisor.start_child(sup, { id = "bad", start = { W, "nonesuch" } })
      assert.is_nil(bad)
      assert.are.equal("error", err)
      assert.are.equal(1, supervisor.count_children(sup).specs)
   end)

   it("ignores malformed requests and stray messages, and keeps answering", function()
      local sup = assert(start({ children = { worker("m1") } }))
      local pid = assert(next_report("started")).pid
      local tx, rx = smarm.channel()
      for i, m in ipairs({
         { smarm_sup = { op = "which_children" } },                -- no reply channel
         { smarm_sup = { op = "start_child" } },
         { smarm_sup = { op = "which_children", reply = 42 } },    -- a reply that is no tx
         { smarm_sup = { op = "no_such_op", reply = tx } },
         { smarm_sup = { reply = tx } },                            -- no op
         { smarm_sup = "which_children" },
         "hello", 42, false,
      }) do
         smarm.send(sup, m)
         assert.are.equal(1, #assert(supervisor.which_children(sup, 1)), "message " .. i)
      end
      -- a well-formed request with a bad child spec is answered, not a crash
      smarm.send(sup, { smarm_sup = { op = "start_child", reply = tx,
         child = { id = 0 / 0, start = { W, "run" } } } })
      local answer = assert(rx:recv(1))
      assert.is_nil(answer[1])
      assert.matches("id", answer[2])
      assert.are.same({ nil, "timeout" }, { rx:recv(0.05) })
      assert.is_truthy(smarm.info(sup))
      assert.is_truthy(smarm.info(pid))
      assert.are.same({ specs = 1, active = 1, supervisors = 0, workers = 1 },
         supervisor.count_children(sup, 1))
   end)

   it("logs a line on stderr for a malformed request", function()
      local script = os.tmpname()
      local f = assert(io.open(script, "w"))
      f:write([[
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"
local sup = assert(supervisor.start_link({ children = {} }))
smarm.send(sup, { smarm_sup = { op = "which_children" } })
smarm.send(sup, "hello")
print("answered " .. #assert(supervisor.which_children(sup, 5)))
]])
      f:close()
      local p = assert(io.popen("timeout 20 build/smarm-lua " .. script .. " 2>&1"))
      local out = p:read("*a")
      p:close()
      os.remove(script)
      assert.matches("supervisor <[%d.]+> ignored a malformed which_children request "
         .. "%(reply is not a channel tx%)", out)
      assert.matches("supervisor <[%d.]+> ignored an unexpected message %(a string%)", out)
      assert.matches("answered 0", out)
   end)

   it("answers noproc for a dead supervisor", function()
      local sup = assert(start({ children = {} }))
      local mon = smarm.monitor(sup)
      smarm.shutdown(sup)
      mon:recv(5)
      assert.are.same({ nil, "noproc" }, { supervisor.which_children(sup) })
   end)

   it("answers noproc for a supervisor that dies while a request waits", function()
      -- terminate_child of a child that ignores its shutdown keeps the supervisor busy for
      -- the grace (5 s); it is killed meanwhile, and the caller learns it at once
      local sup = assert(start({
         children = { { id = "s", shutdown = 5, start = { W, "stubborn", "s", me } } },
      }))
      assert(next_report("started"))
      local t0 = smarm.now()
      local _, cmon = smarm.spawn_monitor(function(s, parent)
         local sv = require "smarm.supervisor"
         require("smarm").send(parent, { answer = { sv.terminate_child(s, "s", 10) } })
      end, sup, me)
      assert(next_report("ignored"))
      local mon = smarm.monitor(sup)
      smarm.kill(sup)
      assert.are.equal("killed", assert(mon:recv(5)).reason)
      assert.are.same({ nil, "noproc" }, assert(next_report("answer", 5)).answer)
      assert.are.equal("normal", assert(cmon:recv(5)).reason)
      -- long before the grace or the request's timeout ran out (a sanity bound)
      assert.is_true(smarm.now() - t0 < 4, "took " .. (smarm.now() - t0) .. " s")
   end)

   it("makes no channel objects per request for the caller's collector", function()
      -- each request's reply channel goes through the same two objects, released once it
      -- is answered (the requests used to make a new pair and a monitor each, 792 bytes a
      -- request in all here, which a caller holding much finalized long after, cold); with
      -- the collector stopped a request now allocates 464 bytes: its tables and the answer's
      local sup = assert(start({ children = {} }))
      supervisor.count_children(sup)
      collectgarbage()
      collectgarbage("stop")
      local k0 = collectgarbage("count")
      local active = 0
      for _ = 1, 100 do active = active + supervisor.count_children(sup).active end
      local per = (collectgarbage("count") - k0) * 1024 / 100
      collectgarbage("restart")
      assert.are.equal(0, active)
      assert.is_true(per < 630, per .. " bytes a request")
   end)

   it("raises bad arguments at the caller's line, naming the function and the problem",
      function()
         local raised = require("support.errors").raised_here
         local f = function() end
         local sup = assert(start({ children = {} }))
         local nan_id = { id = 0 / 0, start = { W, "run" } }
         local sends_f = { id = "x", start = { W, "run", f } }
         local twice = { children = { worker("x"), worker("x") } }
         local never = { children = { worker("x", { restart = "never" }) } }
         local S = supervisor
         for _, case in ipairs({
            { "supervisor.start_child: child spec must be a table, got nil",
              raised(function() supervisor.start_child(sup, nil) end) },
            { "supervisor.start_child: bad sup (a pid or a registered name expected, got nil)",
              raised(function() supervisor.start_child(nil, worker("x")) end) },
            { "supervisor.start_child: child spec id must not be NaN",
              raised(function() S.start_child(sup, nan_id) end) },
            { "supervisor.start_child: child \"x\": start must be { module, function, args... }"
                 .. " (module and function names are strings), got { string, nil, ... }",
              raised(function() supervisor.start_child(sup, { id = "x", start = { W } }) end) },
            { "supervisor.start_child: cannot send a function (at child.start[3])",
              raised(function() S.start_child(sup, sends_f) end) },
            { "supervisor.start_link: children must be an array of child specs, got number",
              raised(function() supervisor.start_link({ children = 5 }) end) },
            { "supervisor.start_link: children[2]: duplicate child id \"x\"",
              raised(function() S.start_link(twice) end) },
            { "supervisor.start_link: children[1]: child \"x\": restart must be \"permanent\", "
                 .. "\"transient\" or \"temporary\", got \"never\"",
              raised(function() S.start_link(never) end) },
            { "supervisor.start_link: intensity must be a number >= 0, got nan",
              raised(function() supervisor.start_link({ intensity = 0 / 0 }) end) },
            { "supervisor.start_link: spec must be a table, got nil",
              raised(function() supervisor.start_link() end) },
            { "supervisor.start_link: cannot send a function (at spec.children[1].start[3])",
              raised(function() S.start_link({ children = { sends_f } }) end) },
            { "supervisor.run: strategy must be \"one_for_one\", \"one_for_all\", "
                 .. "\"rest_for_one\" or \"simple_one_for_one\", got \"one_for_none\"",
              raised(function() supervisor.run({ strategy = "one_for_none" }) end) },
            { "supervisor.which_children: bad sup (1.5 is not a pid)",
              raised(function() supervisor.which_children(1.5) end) },
            { "supervisor.count_children: bad timeout (seconds >= 0, \"infinity\" or nil "
                 .. "expected, got -1)",
              raised(function() supervisor.count_children(sup, -1) end) },
            { "supervisor.terminate_child: bad id (nil)",
              raised(function() supervisor.terminate_child(sup) end) },
         }) do
            assert.are.equal(case[1], case[2])
         end
         -- nothing reached the supervisor
         assert.are.same({}, supervisor.which_children(sup, 5))
      end)

   it("raises on bad specs", function()
      assert.has_error(function() supervisor.start_link({ strategy = "one_for_none" }) end)
      assert.has_error(function()
         supervisor.start_link({ children = { { id = "x", start = { "m" } } } })
      end)
      assert.has_error(function()
         supervisor.start_link({ children = { worker("x"), worker("x") } })
      end)
   end)
end)

describe("supervisor bindings", function()
   it("takes its strategy, restart and shutdown codes from bindings/smarm_ffi.h", function()
      local C = require "smarm.ffi"
      assert.are.same({ 0, 1, 2 }, { C.SMARM_SUP_ONE_FOR_ONE, C.SMARM_SUP_ONE_FOR_ALL,
         C.SMARM_SUP_REST_FOR_ONE })
      assert.are.same({ 0, 1, 2 }, { C.SMARM_SUP_PERMANENT, C.SMARM_SUP_TRANSIENT,
         C.SMARM_SUP_TEMPORARY })
      assert.are.same({ -1, -2 }, { C.SMARM_SUP_BRUTAL_KILL, C.SMARM_SUP_INFINITY })
      -- and supervisor.lua keeps no copies of the numbers
      local f = assert(io.open("lua/smarm/supervisor.lua"))
      local src = f:read("*a")
      f:close()
      for _, pat in ipairs({ "one_for_all%s*=%s*%d", "temporary%s*=%s*%d", "TEMPORARY%s*=%s*%d",
                             "BRUTAL_KILL[%w_, ]*=%s*%-%d" }) do
         assert.is_nil(src:find(pat), pat)
      end
   end)
end)

describe("a supervisor child's start", function()
   local start_fn = require "smarm.supervisor.child_start"
   local L = "support.lean_worker"

   it("leaves the base library closed in a child whose code does not use it", function()
      local sup = assert(supervisor.start_link({
         strategy = "simple_one_for_one",
         children = { { id = "w", start = { L, "run", me }, shutdown = "brutal_kill" } },
      }))
      for _ = 1, 3 do assert(supervisor.start_child(sup)) end
      for _ = 1, 3 do
         local m = assert(smarm.recv(5), "a child did not report")
         assert.is_false(m.base_open)
      end
      smarm.unlink(sup)
      smarm.kill(sup)
   end)

   it("names the module and the function that is not one", function()
      local tx = smarm.channel()
      package.preload["sup_child_spec_number"] = function() return 42 end
      for _, case in ipairs({
         { L, "nonesuch", "support.lean_worker.nonesuch" },
         { L, "number", "support.lean_worker.number" },
         { L, 7, "support.lean_worker.7" },
         { L, true, "support.lean_worker.true" },
         { L, {}, "support.lean_worker.table" },
         { "sup_child_spec_number", "run", "sup_child_spec_number.run" },
      }) do
         local ok, err = pcall(start_fn, tx, me, false, case[1], case[2])
         assert.is_false(ok)
         assert.are.equal("supervisor child: " .. case[3] .. " is not a function", err)
      end
      tx:release()
   end)

   it("passes require's error on", function()
      local tx = smarm.channel()
      local ok, err = pcall(start_fn, tx, me, false, "support.no_such_module", "run")
      assert.is_false(ok)
      assert.truthy(tostring(err):find("support.no_such_module", 1, true))
      tx:release()
   end)

   it("reports the start on ack and releases it, unless the function reports itself", function()
      local tx, rx = smarm.channel()
      assert.are.equal(require(L).run, start_fn(tx, me, false, L, "run"))
      assert.are.same({ ok = true }, rx:recv(1))
      -- released: the channel's only sender is gone
      assert.is_nil(rx:recv(1))

      local proc = require "smarm.proc"
      local tx2, rx2 = smarm.channel()
      local parent = smarm.spawn(function() require("smarm").recv() end)
      assert.are.equal(require(L).run, start_fn(tx2, parent, true, L, "run"))
      assert.are.equal(tx2, proc.ack_to)
      assert.are.equal(parent, proc.parent)
      assert.is_nil(rx2:recv(0.05))
      proc.ack_to, proc.parent = nil, nil
      tx2:release()
      smarm.kill(parent)
   end)
end)
