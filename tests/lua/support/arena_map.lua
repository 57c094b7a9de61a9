-- The reservations of arenas (runtime/src/base/arena_map.c), seen through the FFI.
local ffi = require "ffi"

pcall(ffi.cdef, [[
   typedef struct { size_t reserved, handed, committed, cached; } arena_map_stats;
   void *luavm_running_arena_map(void);
   void arena_map_stats_of(void *m, arena_map_stats *out);
   int arena_map_holds(void *m, const void *p);
   int arena_map_live(void);
]])

local M = {}

-- The reservation of the calling actor's arena, or nil.
function M.running()
   local m = ffi.C.luavm_running_arena_map()
   if m == nil then return nil end
   return m
end

-- Its bytes: reserved, handed (to LuaJIT's allocator), committed, cached.
function M.stats(m)
   local st = ffi.new("arena_map_stats")
   ffi.C.arena_map_stats_of(m, st)
   return {
      reserved = tonumber(st.reserved), handed = tonumber(st.handed),
      committed = tonumber(st.committed), cached = tonumber(st.cached),
   }
end

-- Whether the object (a table, a string...) lies in the reservation m.
function M.holds(m, obj)
   local addr = tonumber(tostring(obj):match("0x%x+"))
   return ffi.C.arena_map_holds(m, ffi.cast("const void *", addr)) ~= 0
end

-- Reservations not yet given back, in the whole process.
function M.live() return ffi.C.arena_map_live() end

return M
