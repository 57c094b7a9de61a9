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
   local ffi = require "ffi"
   ffi.cdef "void luavm_test_heap_refuses(int grow, int shrink);"
   local s = require "smarm"
   local t = {}
   for i = 1, 64 do t[i] = i end
   for i = 9, 64 do t[i] = nil end
   local keys = {}
   for i = 1, 40 do keys[i] = "k" .. i end
   local function fill() for i = 1, 40 do t[keys[i]] = i end end
   ffi.C.luavm_test_heap_refuses(0, 1)
   local ok, err = pcall(fill)
   ffi.C.luavm_test_heap_refuses(0, 0)
   local n = 0
   for _ in pairs(t) do n = n + 1 end
   s.send(parent, { ok = ok, err = tostring(err), n = n })
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
