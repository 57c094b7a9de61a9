-- The process running out of memory (no max_heap): an actor whose allocations fail ends
-- with a reason and the others carry on. The heap's refusals are simulated with a test hook
-- of the runtime, called through the FFI (the binary exports its symbols).

-- Refused every allocation that grows its heap, it fails, and its crash report (a traceback
-- made on its main state, which needs memory too) must not end the process.
local function crash_out_of_memory()
   local ffi = require "ffi"
   ffi.cdef "void luavm_test_heap_refuses(int grow, int shrink);"
   local boom = "boom"
   ffi.C.luavm_test_heap_refuses(1, 1)
   error(boom) -- adding the position allocates: "not enough memory" instead
end

-- Refused only blocks that shrink, it adds keys to a table whose array part then shrinks:
-- LuaJIT does that after replacing the hash part, so a shrink must never fail.
local function shrink_refused(parent)
   local ok, err, n = require("support.shrink_refused").fill(64)
   require("smarm").send(parent, { ok = ok, err = tostring(err), n = n })
end

local smarm = require "smarm" -- below the bodies, so none can capture it

describe("out of memory", function()
   it("reports an actor that fails out of memory, and the run goes on", function()
      for _ = 1, 5 do
         local _, mon = smarm.spawn_monitor(crash_out_of_memory)
         local down = assert(mon:recv(10), "no down notice")
         assert.are.equal("error", down.reason)
         assert.are.equal("not enough memory", down.error)
      end
   end)

   it("never fails a block that shrinks (a table keeps its entries)", function()
      smarm.spawn(shrink_refused, smarm.self())
      local r = assert(smarm.recv(10), "no result")
      assert.are.equal("nil", r.err)
      assert.is_true(r.ok)
      assert.are.equal(8 + 40, r.n)
   end)
end)
