-- smarm.read_timer (seconds left on a send_after timer) and smarm.task (async/await in a
-- linked actor).
local smarm = require "smarm"
local inbox = require "support.inbox"

describe("read_timer", function()
   it("tells the seconds left, then false once the timer fired", function()
      local t = smarm.send_after(0.2, smarm.self(), "ding")
      local left = smarm.read_timer(t)
      assert.is_number(left)
      assert.is_true(left > 0 and left <= 0.2, "left: " .. tostring(left))
      assert.are.equal("ding", smarm.recv(5))
      assert.is_false(smarm.read_timer(t))
   end)

   it("gives false for a cancelled timer", function()
      local t = smarm.send_after(10, smarm.self(), "never")
      assert.is_true(smarm.read_timer(t) > 9)
      assert.is_true(smarm.cancel_timer(t))
      assert.is_false(smarm.read_timer(t))
   end)

   it("gives false for another actor's timer", function()
      local other = smarm.spawn(function(parent)
         local s = require "smarm"
         -- armed to itself: the message dies with it, never reaching the parent
         s.send(parent, { timer = s.send_after(10, s.self(), "later") })
         s.recv(10)
      end, smarm.self())
      local t = inbox.expect("timer").timer
      assert.is_false(smarm.read_timer(t))
      smarm.send(other, "done")
   end)

   it("refuses what is not a timer", function()
      assert.has_error(function() smarm.read_timer("x") end,
         "smarm.read_timer: a timer expected, got string")
      assert.has_error(function() smarm.read_timer(-1) end)
   end)
end)

describe("task", function()
   it("returns the function's results, nils included", function()
      local t = smarm.task.async(function(a, b) return a + b, nil, "x" end, 2, 3)
      local function pack(...) return { n = select("#", ...), ... } end
      local r = pack(smarm.task.await(t, 5))
      assert.are.same({ n = 3, 5, nil, "x" }, r)
   end)

   it("runs in another actor linked to the caller", function()
      local t = smarm.task.async(function() return require("smarm").self() end)
      local pid = smarm.task.await(t, 5)
      assert.are_not.equal(smarm.self(), pid)
      assert.are.equal(pid, t.pid)
   end)

   it("raises the task's error in await, naming the task", function()
      local t = smarm.task.async(function() error("boom") end)
      local ok, err = pcall(smarm.task.await, t, 5)
      assert.is_false(ok)
      assert.matches("task <0%.%d+%.%d+> failed: .*boom", err)
   end)

   it("times out and can be awaited again", function()
      local t = smarm.task.async(function()
         local s = require "smarm"
         s.sleep(0.2)
         return "late"
      end)
      assert.are.same({ nil, "timeout" }, { smarm.task.await(t, 0.01) })
      assert.are.equal("late", smarm.task.await(t, 5))
   end)

   it("reports a task that died without results", function()
      local rx = smarm.trap_exit(true)
      local t = smarm.task.async(function() require("smarm").sleep(10) end)
      smarm.kill(t.pid)
      local ok, err = pcall(smarm.task.await, t, 5)
      smarm.trap_exit(false)
      assert.is_false(ok)
      assert.matches("ended without results %(reason: killed%)", err)
      assert.are.equal("killed", rx:recv(5).reason)
   end)

   it("refuses functions with upvalues and other actors' tasks", function()
      local x = 1
      assert.has_error(function() smarm.task.async(function() return x end) end)
      local t = smarm.task.async(function() return 1 end)
      smarm.spawn(function(task, parent)
         local s = require "smarm"
         setmetatable(task, getmetatable(s.task.async(function() end)))
         s.send(parent, { pcall(s.task.await, task, 1) })
      end, { pid = t.pid, owner = t.owner }, smarm.self())
      local r = smarm.recv(5)
      assert.is_false(r[1])
      assert.matches("belongs to another actor", r[2])
      assert.are.equal(1, smarm.task.await(t, 5))
   end)

   it("shutdown stops a task without hurting the caller", function()
      local t = smarm.task.async(function() require("smarm").sleep(10) end)
      local mon = smarm.monitor(t.pid)
      smarm.task.shutdown(t)
      assert.are.equal("killed", mon:recv(5).reason)
   end)
end)
