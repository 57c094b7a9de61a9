-- smarm.logger: levels, metadata, handlers (a user function, a file, the default stderr one),
-- and the reports that become events: crash reports, supervisor reports, runtime warnings.
local smarm = require "smarm"
local logger = require "smarm.logger"
local inbox = require "support.inbox"

-- A handler that sends each event to the actor config.to.
local function to_actor(event, config)
   require("smarm").send(config.to, { logged = event })
end

-- The next event sent by to_actor for which pred(event) holds (others dropped).
local function next_event(pred, timeout)
   local deadline = smarm.now() + (timeout or 5)
   while true do
      local left = deadline - smarm.now()
      if left <= 0 then return nil end
      local m = smarm.recv(left)
      if type(m) == "table" and m.logged and pred(m.logged) then return m.logged end
   end
end

-- Runs a Lua script in a fresh smarm-lua; returns its stderr and stdout together.
local function run_script(text)
   local script = os.tmpname() .. ".lua"
   local f = assert(io.open(script, "w"))
   f:write(text)
   f:close()
   local p = assert(io.popen("timeout 20 build/smarm-lua " .. script .. " 2>&1"))
   local out = p:read("*a")
   p:close()
   os.remove(script)
   return out
end

describe("smarm.logger", function()
   after_each(function()
      logger.remove_handler("spec")
      logger.set_level("notice")
      logger.unset_metadata()
      -- the specs share this actor's inbox: leave nothing of ours in it
      smarm.sleep(0.05)
      inbox.drain()
   end)

   it("hands events at or above the level to a user handler, with metadata", function()
      assert.is_true(logger.add_handler("spec", to_actor, { to = smarm.self() }))
      assert.are.same({ "default", "spec" }, logger.handlers())
      logger.set_metadata({ request_id = 42 })
      logger.error("disk %s at %d%%", "sda", 93)
      local e = next_event(function(ev) return ev.kind == "log" end)
      assert.is_table(e)
      assert.are.equal("error", e.level)
      assert.are.equal("disk sda at 93%", e.msg)
      assert.are.equal(smarm.self(), e.meta.pid)
      assert.are.equal(42, e.meta.request_id)
      assert.matches("logger_spec.lua", e.meta.file)
      assert.is_number(e.time)
      logger.info("below the level")
      logger.set_level("none")
      assert.are.equal("none", logger.get_level())
      logger.emergency("dropped too")
      logger.set_level("info")
      assert.are.equal("info", logger.get_level())
      logger.info("now shown")
      e = next_event(function(ev) return ev.kind == "log" end)
      assert.are.equal("now shown", e.msg)
   end)

   it("turns crash reports and supervisor reports into events", function()
      assert.is_true(logger.add_handler("spec", to_actor, { to = smarm.self() }))
      local pid = smarm.spawn(function() error("kaboom") end)
      local e = next_event(function(ev) return ev.kind == "crash_report" and ev.pid == pid end)
      assert.is_table(e)
      assert.are.equal("error", e.level)
      assert.are.equal("crashed", e.what)
      assert.matches("kaboom", e.text)
      assert.are.same({ "smarm", "runtime" }, e.domain)
      assert.matches("=CRASH REPORT==== .* ===\n  crasher:\n    pid: <0%.%d+%.%d+>\n    reason: "
         .. "crashed: .*kaboom", logger.format(e))

      local supervisor = require "smarm.supervisor"
      local sup = assert(supervisor.start_link({
         intensity = 5,
         children = { {
            id = "logger_spec_child", init_ack = true,
            start = { "support.sup_worker", "run", "logger_spec_child", smarm.self(), false },
         } },
      }))
      local child = supervisor.which_children(sup, 5)[1].pid
      smarm.kill(child)
      e = next_event(function(ev) return ev.kind == "supervisor_report" end)
      assert.is_table(e)
      assert.are.equal(sup, e.report.supervisor)
      assert.are.equal("child_terminated", e.report.errorContext)
      assert.are.equal("killed", e.report.reason)
      assert.are.same({ pid = child, id = "logger_spec_child" }, e.report.offender)
      assert.matches("=SUPERVISOR REPORT====.*errorContext: child_terminated", logger.format(e))
      smarm.unlink(sup)
      smarm.shutdown(sup)
   end)

   it("filters per handler and removes a handler that fails", function()
      assert.is_true(logger.add_handler("spec", to_actor, { to = smarm.self(), level = "error" }))
      assert.is_false(select(1, logger.add_handler("spec", to_actor, {})))
      logger.warning("not for spec")
      logger.critical("for spec")
      local e = next_event(function(ev) return ev.kind == "log" end)
      assert.are.equal("for spec", e.msg)
      assert.is_true(logger.add_handler("broken", function() error("nope") end))
      logger.error("trips broken")
      local deadline = smarm.now() + 5
      while smarm.now() < deadline do
         local names = logger.handlers()
         if #names == 2 then break end
         smarm.sleep(0.01)
      end
      assert.are.same({ "default", "spec" }, logger.handlers())
   end)

   it("writes a file handler's events", function()
      local path = os.tmpname()
      assert.is_true(logger.add_file_handler("spec", path))
      logger.warning("into the file %d", 7)
      local text = ""
      local deadline = smarm.now() + 5
      while not text:find("into the file 7") and smarm.now() < deadline do
         smarm.sleep(0.01)
         local f = io.open(path)
         text = f:read("*a")
         f:close()
      end
      os.remove(path)
      assert.matches("%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d+%+00:00 warning: into the file 7",
         text)
   end)

   it("refuses bad levels and handlers with upvalues", function()
      assert.has_error(function() logger.set_level("loud") end)
      assert.has_error(function() logger.log("loud", "x") end)
      local x = 1
      assert.has_error(function() logger.add_handler("spec", function() return x end) end)
      assert.are.equal(logger.error, smarm.logger.error)
   end)

   it("prints on stderr by default and stops when the default handler goes", function()
      local out = run_script([[
local smarm = require "smarm"
local logger = require "smarm.logger"
logger.notice("hello %s", "stderr")
smarm.spawn(function() error("first crash") end)
smarm.sleep(0.1)
logger.remove_handler("default")
logger.error("silent")
smarm.spawn(function() error("second crash") end)
smarm.sleep(0.1)
print("done")
]])
      assert.matches("notice: hello stderr", out)
      assert.matches("smarm: actor <0%.%d+%.%d+> crashed: [^\n]*first crash", out)
      assert.is_nil(out:find("silent", 1, true))
      assert.is_nil(out:find("second crash", 1, true))
      assert.matches("done", out)
   end)
end)
