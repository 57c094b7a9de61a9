-- A table whose array part shrinks while the heap refuses every shrink: LuaJIT shrinks it
-- after it has replaced the hash part (adding keys to a table whose array part emptied), so
-- a refused shrink would lose the table's entries. Used by out_of_memory_spec and
-- large_heap_spec, from inside the actor under test.
local M = {}

-- Builds the table (array part of `size` slots, 8 kept), adds 40 keys with shrinks refused;
-- returns whether that raised, the error, and how many entries the table has (48 if none
-- was lost).
function M.fill(size)
   local ffi = require "ffi"
   pcall(ffi.cdef, "void luavm_test_heap_refuses(int grow, int shrink);")
   local t = {}
   for i = 1, size do t[i] = i end
   for i = 9, size do t[i] = nil end
   local keys = {}
   for i = 1, 40 do keys[i] = "k" .. i end
   local function fill() for i = 1, 40 do t[keys[i]] = i end end
   ffi.C.luavm_test_heap_refuses(0, 1)
   local ok, err = pcall(fill)
   ffi.C.luavm_test_heap_refuses(0, 0)
   local n = 0
   for _ in pairs(t) do n = n + 1 end
   return ok, err, n
end

return M
