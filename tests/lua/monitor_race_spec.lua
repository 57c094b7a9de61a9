-- Monitors racing the target's death: a demonitor, or a read of the monitor, that comes
-- while the target is ending sees either no notice or exactly one, never both.
local smarm = require "smarm"

describe("a monitor racing its target's death", function()
   it("gets no notice once demonitored, even when the death was under way", function()
      local late = 0
      for i = 1, 20000 do
         local p = smarm.spawn(function() end)
         local mon = smarm.monitor(p)
         for _ = 1, i % 7 do smarm.yield() end
         smarm.demonitor(mon)
         if mon:recv(0.01) ~= nil then late = late + 1 end
      end
      assert.are.equal(0, late)
   end)

   it("is closed as soon as its one notice has been read", function()
      local open = 0
      for _ = 1, 20000 do
         local _, mon = smarm.spawn_monitor(function() end)
         assert(mon:recv(5))
         if select(2, mon:recv(0)) == "timeout" then open = open + 1 end
      end
      assert.are.equal(0, open)
   end)
end)
