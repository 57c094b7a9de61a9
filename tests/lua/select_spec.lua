-- select: the first ready arm in order over channels and the inbox, closed arms, timeouts,
-- and that losing arms leave no wake behind that could cut a later wait short.
local smarm = require "smarm"

describe("select", function()
   it("returns the first ready arm in array order", function()
      local tx1, rx1 = smarm.channel()
      local tx2, rx2 = smarm.channel()
      tx1:send("one")
      tx2:send("two")
      assert.are.same({ 1, "one" }, { smarm.select({ rx1, rx2 }, 1) })
      assert.are.same({ 2, "two" }, { smarm.select({ rx1, rx2 }, 1) })
      tx1:send("again")
      assert.are.same({ 2, "again" }, { smarm.select({ rx2, rx1 }, 1) })
   end)

   it("takes the inbox as an arm", function()
      local _, rx = smarm.channel()
      smarm.send(smarm.self(), { hi = 1 })
      local i, m = smarm.select({ rx, smarm.inbox }, 1)
      assert.are.equal(2, i)
      assert.are.equal(1, m.hi)
   end)

   it("counts a closed arm as ready", function()
      local tx, rx = smarm.channel()
      local _, rx2 = smarm.channel()
      tx:close()
      assert.are.same({ 1, nil, "closed" }, { smarm.select({ rx, rx2 }, 1) })
   end)

   it("times out, and polls with 0", function()
      local _, rx = smarm.channel()
      local t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { smarm.select({ rx, smarm.inbox }, 0.04) })
      local dt = smarm.now() - t0
      assert.is_true(dt >= 0.04 and dt < 1, "select timeout took " .. dt)
      t0 = smarm.now()
      assert.are.same({ nil, "timeout" }, { smarm.select({ rx, smarm.inbox }, 0) })
      -- a poll does not wait (a sanity bound: a loaded machine may set the thread aside)
      assert.is_true(smarm.now() - t0 < 1)
   end)

   it("wakes promptly on a send to any arm", function()
      local _, rx1 = smarm.channel()
      local tx2, rx2 = smarm.channel()
      smarm.spawn(function(tx)
         local s = require "smarm"
         s.sleep(0.02)
         tx:send("second arm")
      end, tx2)
      local t0 = smarm.now()
      assert.are.same({ 2, "second arm" }, { smarm.select({ rx1, rx2 }, 5) })
      assert.is_true(smarm.now() - t0 < 1)
   end)

   it("leaves no stale loser-arm wake that shortens a later sleep", function()
      local tx1, rx1 = smarm.channel()
      local tx2, rx2 = smarm.channel()
      local feeder = smarm.spawn(function(tx, parent)
         local s = require "smarm"
         assert(s.recv(5))
         -- sends on the losing arm while the parent sleeps
         for _ = 1, 20 do
            tx:send("stale")
            s.send(parent, "stale inbox")
            s.sleep(0.001)
         end
      end, tx2, smarm.self())
      tx1:send("winner")
      assert.are.same({ 1, "winner" }, { smarm.select({ rx1, rx2, smarm.inbox }, 1) })
      smarm.send(feeder, "go")
      local t0 = smarm.now()
      smarm.sleep(0.05)
      local dt = smarm.now() - t0
      assert.is_true(dt >= 0.05, "sleep cut short by a stale wake: " .. dt)
      -- drain what the feeder sent
      while smarm.recv(0.05) do end
   end)

   it("refuses bad arms", function()
      local tx, rx = smarm.channel()
      assert.has_error(function() smarm.select({ tx }, 0) end,
         "smarm.select: arm 1 is a channel tx (select takes rx)")
      assert.has_error(function() smarm.select({ rx, 5 }, 0) end)
      assert.has_error(function() smarm.select({}, 0) end, "smarm.select: no arms")
      assert.has_error(function() smarm.select(rx, 0) end)
   end)
end)
