-- Supervisors with OTP's habits: simple_one_for_one, spawn options in child specs,
-- significant children and auto_shutdown.
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

local D = "support.dyn_worker"
local me = smarm.self()

local function report(field, timeout)
   return smarm.recv(function(m) return type(m) == "table" and m[field] ~= nil end,
      timeout or 5)
end

-- start_link, unlinked at once: a supervisor that gives up does not take the test along.
local function start_link(spec)
   local sup, why = supervisor.start_link(spec)
   assert(sup, why)
   smarm.unlink(sup)
   return sup
end

local function flush()
   while smarm.recv(0) ~= nil do end
end

local function dynamic(opts)
   local t = { id = "dyn", start = { D, "run", me, "base" } }
   for k, v in pairs(opts or {}) do t[k] = v end
   return start_link({ strategy = "simple_one_for_one", children = { t },
      intensity = 10, period = 5 })
end

local function stop_sup(sup)
   local mon = smarm.monitor(sup)
   smarm.shutdown(sup)
   assert(mon:recv(5))
end

describe("simple_one_for_one", function()
   before_each(flush)

   it("starts children from the template with start_child's args appended", function()
      local sup = dynamic()
      local p1 = assert(supervisor.start_child(sup, "one"))
      local r1 = report("started")
      assert.are.same({ p1, "base", "one" }, { r1.started, r1.base, r1.extra })
      local p2 = assert(supervisor.start_child(sup, { k = 2 }))
      assert.are.same({ k = 2 }, report("started").extra)
      assert.are_not.equal(p1, p2)
      assert.are.same({ specs = 1, active = 2, supervisors = 0, workers = 2 },
         supervisor.count_children(sup))
      assert.are.equal(2, #supervisor.which_children(sup))
      stop_sup(sup)
   end)

   it("restarts a crashed permanent child with the same args", function()
      local sup = dynamic()
      local p1 = assert(supervisor.start_child(sup, "again"))
      report("started")
      smarm.send(p1, "crash")
      local r = report("started")
      assert.are_not.equal(p1, r.started)
      assert.are.equal("again", r.extra)
      assert.are.equal(1, supervisor.count_children(sup).active)
      stop_sup(sup)
   end)

   it("restarts a child with the same args: none, one, or with nils among them", function()
      local sup = start_link({ strategy = "simple_one_for_one", intensity = 10, period = 5,
         children = { { id = "all", start = { D, "run_all", me } } } })
      for _, args in ipairs({ { n = 0 }, { n = 3, nil, "b", nil }, { n = 1, "a" } }) do
         local p = assert(supervisor.start_child(sup, unpack(args, 1, args.n)))
         assert.are.equal(args.n, report("started").n)
         smarm.send(p, "crash")
         local again = report("started")
         assert.are_not.equal(p, again.started)
         assert.are.equal(args.n, again.n)
         for i = 1, args.n do assert.are.equal(args[i], again.args[i]) end
      end
      assert.are.equal(3, supervisor.count_children(sup).active)
      stop_sup(sup)
   end)

   it("leaves temporary and normally-ended transient children down", function()
      for _, restart in ipairs({ "temporary", "transient" }) do
         local sup = dynamic({ restart = restart })
         local p = assert(supervisor.start_child(sup, restart))
         report("started")
         smarm.send(p, "stop")
         assert.is_nil(report("started", 0.1))
         assert.are.equal(0, supervisor.count_children(sup).active)
         stop_sup(sup)
      end
   end)

   it("terminates a child by pid, refuses restart/delete, stops all on shutdown", function()
      local sup = dynamic()
      local p1 = assert(supervisor.start_child(sup, 1))
      local p2 = assert(supervisor.start_child(sup, 2))
      assert.is_true(supervisor.terminate_child(sup, p1))
      assert.are.same({ nil, "not_found" }, { supervisor.terminate_child(sup, p1) })
      assert.are.same({ nil, "simple_one_for_one" }, { supervisor.restart_child(sup, p2) })
      assert.are.same({ nil, "simple_one_for_one" }, { supervisor.delete_child(sup, p2) })
      assert.are.equal(1, supervisor.count_children(sup).active)
      local mon = smarm.monitor(p2)
      stop_sup(sup)
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
   end)

   it("keeps count of a child that dies while another one is being stopped", function()
      local sup = start_link({ strategy = "simple_one_for_one", children = {
         { id = "d", start = { D, "slow_stop", me }, restart = "temporary", shutdown = 5 } } })
      local a = assert(supervisor.start_child(sup, 0.2))
      local b = assert(supervisor.start_child(sup, 0))
      smarm.spawn(function(s, pid, parent)
         local r = require("smarm.supervisor").terminate_child(s, pid, 10)
         require("smarm").send(parent, { terminated = r })
      end, sup, a, me)
      smarm.sleep(0.05)
      smarm.kill(b) -- its notice comes while the supervisor waits for a's
      assert.is_true(report("terminated").terminated)
      assert.are.equal(0, supervisor.count_children(sup).active)
      stop_sup(sup)
   end)

   it("gives up past its intensity", function()
      local sup = start_link({ strategy = "simple_one_for_one",
         intensity = 1, period = 5, children = { { id = "d", start = { D, "run", me } } } })
      local mon = smarm.monitor(sup)
      local p = assert(supervisor.start_child(sup, "x"))
      smarm.send(p, "crash")
      report("started")
      report("started")
      local p2 = supervisor.which_children(sup)[1].pid
      smarm.send(p2, "crash")
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
   end)

   it("reports a child that fails to start and rejects bad specs", function()
      local sup = start_link({ strategy = "simple_one_for_one",
         children = { { id = "d", start = { D, "no_such_function" } } } })
      local pid, why = supervisor.start_child(sup)
      assert.is_nil(pid)
      assert.is_not_nil(why)
      assert.are.equal(0, supervisor.count_children(sup).active)
      stop_sup(sup)
      assert.has_error(function()
         supervisor.start_link({ strategy = "simple_one_for_one", children = {} })
      end, "supervisor.start_link: simple_one_for_one needs children = { template } "
         .. "(exactly one child spec)")
   end)
end)

describe("child spec spawn options", function()
   it("gives the child its stack and max_heap", function()
      local sup = start_link({ children = {
         { id = "w", start = { D, "run", me }, stack = 256 * 1024, max_heap = 64 * 1024 * 1024 },
      } })
      local pid = report("started").started
      local info = assert(smarm.info(pid))
      assert.are.equal(64 * 1024 * 1024, info.max_heap)
      assert.are.equal(256 * 1024, info.stack.reserve)
      stop_sup(sup)
      assert.has_error(function()
         supervisor.start_link({ children = { { id = "w", start = { D, "run" }, stack = -1 } } })
      end, "supervisor.start_link: children[1]: child \"w\": stack must be a whole number of "
         .. "bytes >= 0, got -1")
   end)
end)

describe("significant children and auto_shutdown", function()
   before_each(flush)

   local function sig_child(id, restart)
      return { id = id, start = { D, "run", me, id }, restart = restart or "transient",
         significant = true }
   end

   it("any_significant: the supervisor ends when a significant child ends", function()
      local sup = start_link({ auto_shutdown = "any_significant",
         children = { sig_child("a"), { id = "b", start = { D, "run", me, "b" } } } })
      local mon = smarm.monitor(sup)
      local a = report("started").started
      local b = report("started").started
      local bmon = smarm.monitor(b)
      smarm.send(a, "stop")
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
      assert.are.equal("shutdown", assert(bmon:recv(5)).reason)
   end)

   it("all_significant: it ends when the last significant child has ended", function()
      local sup = start_link({ auto_shutdown = "all_significant",
         children = { sig_child("a"), sig_child("b", "temporary") } })
      local mon = smarm.monitor(sup)
      local a = report("started").started
      local b = report("started").started
      smarm.send(a, "stop")
      assert.are.same({ nil, "timeout" }, { mon:recv(0.1) })
      smarm.send(b, "stop")
      assert.are.equal("shutdown", assert(mon:recv(5)).reason)
   end)

   it("a significant transient child that crashes is restarted, not a shutdown", function()
      local sup = start_link({ auto_shutdown = "any_significant",
         children = { sig_child("a") } })
      local a = report("started").started
      smarm.send(a, "crash")
      assert.are_not.equal(a, report("started").started)
      stop_sup(sup)
   end)

   it("rejects significant permanent children and significant without auto_shutdown", function()
      assert.has_error(function()
         supervisor.start_link({ auto_shutdown = "any_significant",
            children = { sig_child("a", "permanent") } })
      end, "supervisor.start_link: children[1]: child \"a\": a significant child must be "
         .. "transient or temporary")
      assert.has_error(function()
         supervisor.start_link({ children = { sig_child("a") } })
      end, "supervisor.start_link: children[1]: significant needs auto_shutdown "
         .. "\"any_significant\" or \"all_significant\"")
      assert.has_error(function() supervisor.start_link({ auto_shutdown = "sometimes" }) end,
         "supervisor.start_link: auto_shutdown must be \"never\", \"any_significant\" or "
         .. "\"all_significant\", got \"sometimes\"")
   end)
end)
