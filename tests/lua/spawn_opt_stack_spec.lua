-- spawn_opt{stack, guard}: checked at the call, so a bad size (NaN, 2^62, 2^64, 1e30) is an
-- error the caller can catch, and no guard is small enough for one C frame to step over.
local smarm = require "smarm"

local function answer(parent)
   require("smarm").send(parent, "ran")
end

-- A spawn_opt raises naming itself and the option (and starts nothing: see nothing_ran).
local function refused(opts, option)
   local ok, err = pcall(smarm.spawn_opt, opts, answer, smarm.self())
   assert.is_false(ok, "accepted " .. option)
   assert.is_truthy(err:find("smarm.spawn_opt: " .. option .. " must be a whole number of bytes",
      1, true), err)
end

local function nothing_ran()
   assert.is_nil(smarm.recv(0.1), "a refused actor ran")
end

describe("spawn_opt stack and guard", function()
   it("refuses sizes that are not a finite whole number", function()
      for _, v in ipairs({ 0 / 0, 1 / 0, -1 / 0, 65536.5, "65536", true }) do
         refused({ stack = v }, "stack")
         refused({ guard = v }, "guard")
      end
      refused({ max_heap = 0 / 0 }, "max_heap")
      refused({ max_heap = 1e30 }, "max_heap")
      refused({ max_heap = -1 }, "max_heap")
      nothing_ran()
   end)

   it("refuses sizes out of bounds, however large", function()
      for _, v in ipairs({ 2 ^ 62, 2 ^ 64, 1e30, 2 ^ 30 + 4096, 0, -65536, 16383 }) do
         refused({ stack = v }, "stack")
      end
      for _, v in ipairs({ 2 ^ 62, 2 ^ 64, 1e30, 64 * 2 ^ 20 + 4096, 0, 1, 4096, 16383 }) do
         refused({ guard = v }, "guard")
      end
      nothing_ran()
   end)

   it("says the bounds in the error", function()
      local _, err = pcall(smarm.spawn_opt, { guard = 1 }, answer)
      assert.is_truthy(err:find("from 16384 to 67108864 (got 1)", 1, true), err)
      _, err = pcall(smarm.spawn_opt, { stack = 2 ^ 62 }, answer)
      assert.is_truthy(err:find("from 16384 to 1073741824", 1, true), err)
   end)

   it("runs actors at the bounds", function()
      local shapes = {
         { stack = 16384 }, { stack = 2 ^ 30 }, { guard = 16384 }, { guard = 64 * 2 ^ 20 },
         { stack = 16384, guard = 16384 },
      }
      for _, opts in ipairs(shapes) do
         local pid = smarm.spawn_opt(opts, function(parent)
            local s = require "smarm"
            s.send(parent, "ran")
            s.recv()
         end, smarm.self())
         assert.are.equal("ran", smarm.recv(10))
         local info = smarm.info(pid)
         if info then -- the info library is loaded through the FFI
            assert.are.equal(opts.stack or 65536, info.stack.reserve)
            assert.are.equal(opts.guard or 65536, info.stack.guard)
         end
         smarm.kill(pid)
      end
   end)
end)
