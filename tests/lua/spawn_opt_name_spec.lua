-- spawn_opt{name = ...}: the name is the contract. The actor holds its name before it
-- runs, and an actor refused a taken name never runs, nor signals a linked caller.
local smarm = require "smarm"

local function idler()
   local s = require "smarm"
   while true do s.recv() end
end

describe("spawn_opt with a name", function()
   it("holds the name before the actor runs", function()
      local late = 0
      for i = 1, 500 do
         smarm.spawn_opt({ name = "spawn_opt_name_spec.y" .. i }, function(parent, n)
            local s = require "smarm"
            s.send(parent, s.whereis(n) == s.self())
         end, smarm.self(), "spawn_opt_name_spec.y" .. i)
         if not smarm.recv(5) then late = late + 1 end
      end
      assert.are.equal(0, late)
   end)

   it("never runs an actor refused a taken name", function()
      local holder = smarm.spawn(idler)
      assert.is_true(smarm.register("spawn_opt_name_spec.x", holder))
      for _ = 1, 500 do
         assert.are.same({ nil, "taken" }, { smarm.spawn_opt({ name = "spawn_opt_name_spec.x" },
            function(parent) require("smarm").send(parent, "ran") end, smarm.self()) })
      end
      assert.are.same({ nil, "timeout" }, { smarm.recv(0.1) })
      smarm.kill(holder)
   end)

   it("with link, refused a taken name, leaves the caller alive and unsignalled", function()
      local holder = smarm.spawn(idler)
      assert.is_true(smarm.register("spawn_opt_name_spec.z", holder))
      local _, mon = smarm.spawn_monitor(function()
         local s = require "smarm"
         assert(not s.spawn_opt({ name = "spawn_opt_name_spec.z", link = true },
            function() require("smarm").recv() end))
         s.sleep(0.05)
         s.exit("survived")
      end)
      assert.are.equal("survived", assert(mon:recv(5)).reason)
      local rx = smarm.trap_exit(true)
      assert.is_nil(smarm.spawn_opt({ name = "spawn_opt_name_spec.z", link = true }, idler))
      assert.are.same({ nil, "timeout" }, { rx:recv(0.05) })
      smarm.trap_exit(false)
      smarm.kill(holder)
   end)

   it("keeps the name from a whereis that runs while the actor is being spawned", function()
      -- The name is bound before the new actor is published; a whereis (or register)
      -- in between must not take the not-yet-alive holder for a dead one and drop the
      -- binding. A busy poller on the other scheduler hits that window; rounds, since it
      -- may land on the spawner's.
      local lost = 0
      for _ = 1, 60 do
         local poller = smarm.spawn(function()
            local s = require "smarm"
            while s.recv(0) == nil do
               s.whereis("spawn_opt_name_spec.w")
            end
         end)
         for _ = 1, 500 do
            local p, mon = smarm.spawn_opt({ name = "spawn_opt_name_spec.w", monitor = true },
               function(parent)
                  local s = require "smarm"
                  s.send(parent, s.whereis("spawn_opt_name_spec.w") == s.self())
               end, smarm.self())
            assert.is_number(p)
            if not smarm.recv(5) then lost = lost + 1 end
            mon:recv(5)
         end
         smarm.send(poller, "stop")
         if lost > 0 then break end
      end
      assert.are.equal(0, lost)
   end)
end)
