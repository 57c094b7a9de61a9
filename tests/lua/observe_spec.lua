-- smarm.tree and what smarm.info tells to find a hot actor: the supervision forest, the
-- C stack's high-water mark and the pages given back after a spike, where an actor waits,
-- and the counts of slices and messages.
local smarm = require "smarm"
local supervisor = require "smarm.supervisor"

-- Goes n C re-entries deep (a gsub callback takes about 9 KB of C stack), waits there (a
-- stack park: nothing can yield across gsub), then serves pings from inside one callback,
-- so each wait after the spike parks holding the stack.
local function spiker(parent, n)
   local s = require "smarm"
   local function deep(k)
      if k == 0 then
         s.send(parent, "deep")
         s.recv()
         return
      end
      string.gsub("x", "x", function() deep(k - 1) end)
   end
   string.gsub("x", "x", function()
      deep(n)
      while true do
         local m = s.recv()
         if m == "stop" then return end
         s.send(parent, "pong")
      end
   end)
end

local function find(list, pred)
   for _, n in ipairs(list) do
      if pred(n) then return n end
      local f = find(n.children, pred)
      if f then return f end
   end
end

describe("observability", function()
   it("info has the high-water mark, and a spike's pages come back after the cooldown", function()
      local pid = smarm.spawn_opt({ stack = 1024 * 1024 }, spiker, smarm.self(), 40)
      assert.equal("deep", smarm.recv(5))
      smarm.send(pid, "go")
      local info
      for _ = 1, 40 do
         smarm.send(pid, "ping")
         assert.equal("pong", smarm.recv(5))
      end
      info = smarm.info(pid)
      assert.is_true(info.stack.high_water > 300 * 1024, "high water " .. info.stack.high_water)
      assert.is_true(info.stack.shrinks >= 1, "no shrink")
      assert.is_true(info.stack.released > 200 * 1024, "released " .. info.stack.released)
      local shrinks = info.stack.shrinks
      -- no new spike: no new release
      for _ = 1, 20 do
         smarm.send(pid, "ping")
         assert.equal("pong", smarm.recv(5))
      end
      assert.equal(shrinks, smarm.info(pid).stack.shrinks)
      assert.is_true(smarm.info(pid).messages_out >= 61)
      smarm.send(pid, "stop")
   end)

   it("info says where an actor waits and counts its slices and messages", function()
      local pid = smarm.spawn(function(parent)
         local s = require "smarm"
         s.send(parent, "up")
         s.send(parent, "up again")
         s.recv() -- the wait below is on this line
      end, smarm.self())
      assert.equal("up", smarm.recv(5))
      assert.equal("up again", smarm.recv(5))
      local info
      for _ = 1, 100 do
         info = smarm.info(pid)
         if info.state == "parked" then break end
         smarm.sleep(0.01)
      end
      assert.equal("parked", info.state)
      assert.is_truthy(info.current:find("observe_spec.lua:%d+$"), info.current)
      assert.equal(2, info.messages_out)
      assert.is_true(info.slices >= 1)
      smarm.send(pid, "bye")
      smarm.send(pid, "queued")
   end)

   it("tree shows a supervisor's children with their ids and types, and follows restarts",
      function()
         local sup = assert(supervisor.start_link({
            strategy = "one_for_one", intensity = 10, period = 10,
            children = {
               { id = "w1", start = { "smarm", "sleep", 60 } },
               { id = "inner", type = "supervisor", start = { "smarm.supervisor", "run",
                  { children = { { id = "w2", start = { "smarm", "sleep", 60 } } } } } },
            },
         }))
         local tree = smarm.tree()
         local me = find(tree, function(n) return n.pid == smarm.self() end)
         assert.is_truthy(me, "the caller is in the tree")
         local s = find(me.children, function(n) return n.pid == sup end)
         assert.equal("supervisor", s.type)
         assert.equal("inner", s.children[1].id)
         assert.equal("supervisor", s.children[1].type)
         assert.equal("w2", s.children[1].children[1].id)
         assert.equal("worker", s.children[1].children[1].type)
         local w1 = s.children[2]
         assert.equal("w1", w1.id)
         assert.equal("worker", w1.type)
         smarm.kill(w1.pid)
         local again
         for _ = 1, 100 do
            smarm.sleep(0.02)
            local n = find(smarm.tree(), function(x) return x.id == "w1" end)
            if n and n.pid ~= w1.pid then
               again = n
               break
            end
         end
         assert.is_truthy(again, "the restarted child is in the tree under its id")
         local mon = smarm.monitor(sup)
         smarm.shutdown(sup)
         mon:recv(5)
      end)

   it("info refuses a bad pid and answers nil for a dead one", function()
      assert.has_error(function() smarm.info("x") end)
      local pid = smarm.spawn(function() end)
      local mon = smarm.monitor(pid)
      mon:recv(5)
      assert.is_nil(smarm.info(pid))
   end)
end)
